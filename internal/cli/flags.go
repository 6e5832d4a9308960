package cli

import (
	"errors"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/trial"
)

// Every flag that more than one command takes is declared here, once,
// with one meaning: a command adds it by calling its function. Where two
// commands need different meanings, the flags have different names
// (replay's --client-timeout is the application's timeout it replays;
// --statement-timeout is always pgmedic's own session's). A test
// (TestOneShape) fails when a command declares one of these by hand.

// outputFlags are where a report goes and what it keeps.
type outputFlags struct {
	format      string
	out         string
	minSeverity string
	rules       string
}

// addOutput adds --format and --out.
func addOutput(cmd *cobra.Command, o *outputFlags) {
	cmd.Flags().StringVar(&o.format, "format", "text", "output format: "+strings.Join(report.Formats(), ", ")+" (html: one self-contained page; markdown: for a ticket or a pull request)")
	cmd.Flags().StringVar(&o.out, "out", "", "write the report to this file instead of stdout (written whole or not at all)")
}

// addFindings adds --min-severity, with the command's default, and
// --rules.
func addFindings(cmd *cobra.Command, o *outputFlags, minSeverity string) {
	addMinSeverity(cmd, &o.minSeverity, minSeverity)
	addRules(cmd, &o.rules)
}

// addReport adds the flags of a command that prints findings: --format,
// --out, --min-severity and --rules.
func addReport(cmd *cobra.Command, o *outputFlags, minSeverity string) {
	addOutput(cmd, o)
	addFindings(cmd, o, minSeverity)
}

func addMinSeverity(cmd *cobra.Command, v *string, def string) {
	cmd.Flags().StringVar(v, "min-severity", def, "report findings at or above: info, warning or critical (also sets the exit code)")
}

func addRules(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "rules", "", "comma-separated rule ids to run (default: all; pgmedic --help lists where the rules are documented)")
}

func addPgBouncer(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "pgbouncer", "", "a PgBouncer admin console (postgres://USER@HOST:6432/pgbouncer) whose pools are sampled with the sessions")
}

func addServerCores(cmd *cobra.Command, v *int) {
	cmd.Flags().IntVar(v, "server-cores", 0, "the server's CPU count, for the load rule (default: this machine's when the server is local, else 4, said as a guess)")
}

// addStatementTimeout adds --statement-timeout: the statement_timeout of
// pgmedic's own session, with the command's default.
func addStatementTimeout(cmd *cobra.Command, v *time.Duration, def time.Duration) {
	cmd.Flags().DurationVar(v, "statement-timeout", def, "statement_timeout of pgmedic's own session (every statement it sends, EXPLAIN ANALYZE and experiments included)")
}

// logInput is how a command reads server logs: their format and prefix.
type logInput struct {
	prefix, format string
}

// addLogInput adds --prefix and --format-in.
func addLogInput(cmd *cobra.Command, l *logInput) {
	cmd.Flags().StringVar(&l.prefix, "prefix", "", "the server's log_line_prefix, for the formats that carry stderr lines (default: detected)")
	cmd.Flags().StringVar(&l.format, "format-in", "", "the logs' format: "+formatList()+" (default: detected)")
}

// options checks --format-in and turns both into the reader's options.
func (l logInput) options() (logs.Options, error) {
	o := logs.Options{Prefix: l.prefix}
	if l.format != "" {
		f, ok := logs.FormatNamed(l.format)
		if !ok {
			return o, usageErr("--format-in %s: not a format pgmedic reads (%s)", l.format, formatList())
		}
		o.Format = f
	}
	return o, nil
}

// addTwin adds --twin: work on a throwaway twin of the source instead of
// the source itself.
func addTwin(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "twin", false, "work on a throwaway twin: the tables involved copied (one read-only snapshot) into a lab cluster of the source's major version; nothing is written to the source")
}

// addTwinCopy adds --twin-dsn and --twin-max-size: where a twin lives
// and how much of the source it copies.
func addTwinCopy(cmd *cobra.Command, dsn *string, maxMB *int) {
	cmd.Flags().StringVar(dsn, "twin-dsn", "", "use this scratch database as the twin instead of a lab cluster (a staging database, a branch, a thin clone); its tables of the same names are replaced")
	cmd.Flags().IntVar(maxMB, "twin-max-size", 1024, "most MB of table data the twin copies; a larger set is copied as a sample of each table, and measurements on it say so")
}

// formatList names the formats --format-in takes.
func formatList() string { return strings.Join(logs.FormatNames(), ", ") }

// validateFormat checks --format.
func (o *outputFlags) validateFormat() error {
	if err := report.CheckFormat(o.format); err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// validate checks --format, --min-severity and --rules.
func (o *outputFlags) validate() (model.Severity, []string, error) {
	if err := o.validateFormat(); err != nil {
		return 0, nil, err
	}
	sev, err := model.ParseSeverity(o.minSeverity)
	if err != nil {
		return 0, nil, usageErr("--min-severity: %v", err)
	}
	ids, err := ruleIDs(o.rules)
	return sev, ids, err
}

// ruleIDs reads --rules. One table of rules serves every command: an id is
// known or refused the same way whatever input the command reads.
func ruleIDs(flag string) ([]string, error) {
	var ids []string
	for _, id := range strings.Split(flag, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if _, err := rules.Select(ids); err != nil {
		return nil, usageErr("--rules: %v", err)
	}
	return ids, nil
}

// write renders rep in --format to --out or stdout, through the one format
// switch (report.Render).
func write(rep report.Renderable, o outputFlags, stdout io.Writer) error {
	return writeOut(o.out, stdout, func(w io.Writer) error { return report.Render(w, rep, o.format) })
}

// fileSources are the log files a command reads ("-" is stdin).
func fileSources(files []string, stdin io.Reader) []logs.Source {
	var out []logs.Source
	for _, f := range files {
		out = append(out, logs.FileSource(f, stdin))
	}
	return out
}

// writeGated writes the report a gating command returned beside err and
// exits 1 when err is its gate (a replay slower, a migration risky); any
// other error is the command's and nothing is written.
//
// A run that could not conclude (trial.Inconclusive: a replay that
// sent part of the workload, a rehearsal no call of the application
// overlapped) writes its report too, which says why, and exits 2.
func writeGated(rep report.Renderable, err, gate error, o outputFlags, stdout io.Writer) error {
	gated := errors.Is(err, gate)
	unsure := trial.Inconclusive(err)
	if err != nil && !gated && !unsure {
		return err
	}
	if err := write(rep, o, stdout); err != nil {
		return err
	}
	switch {
	case unsure:
		return &exitError{code: ExitInput, err: err}
	case gated:
		return &exitError{code: ExitFindings, err: err}
	}
	return nil
}

// The flags below are taken by more than one command with one meaning
// each; what a command does with it is said in its own help.

// addAllowFunction adds --allow-function: a function the user vouches
// for, which pgmedic's re-runs may then execute.
func addAllowFunction(cmd *cobra.Command, v *[]string) {
	cmd.Flags().StringSliceVar(v, "allow-function", nil, "a VOLATILE function (schema.name) that pgmedic's re-runs (experiments, EXPLAIN ANALYZE) may execute; repeat or separate with commas")
}

// addExperimentRuns adds --runs: how many times each side of an
// experiment runs (replays count theirs with --replays).
func addExperimentRuns(cmd *cobra.Command, v *int) {
	cmd.Flags().IntVar(v, "runs", 5, "runs per side of each experiment (at least 5)")
}

// addReplays adds --replays: how many times a comparison replays each
// side. --runs, its old name here, stays one release as a hidden alias
// that warns: --runs is an experiment's.
func addReplays(cmd *cobra.Command, v *int) {
	cmd.Flags().IntVar(v, "replays", 3, "replays of each side of a comparison, alternating (at least 2 for a verdict other than no measurable change)")
	cmd.Flags().IntVar(v, "runs", 3, "")
	cmd.Flags().MarkDeprecated("runs", "use --replays (--runs is the number of runs of an experiment in check and explain)")
}

// addNoVerify adds --no-verify: diagnose only.
func addNoVerify(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "no-verify", false, "run no experiments: diagnose only, no statement re-run with its fix")
}

// addDatabaseFilter adds --database: the captured sessions of one
// database only.
func addDatabaseFilter(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "database", "", "replay only the captured sessions of this database (default: all)")
}

// addSource adds --source: the production server a capture came from.
func addSource(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "source", "", "the production server the captured workload came from: read only, its tables copied into twins, never replayed against (unless replay's --allow-writes-to names it)")
}

// addLogFiles adds --log: server logs to read, repeatable.
func addLogFiles(cmd *cobra.Command, v *[]string) {
	cmd.Flags().StringArrayVar(v, "log", nil, "a server log to read (stderr, csvlog, jsonlog, syslog, cloud exports; plain or .gz); repeat for several")
}

// addDSN adds --dsn: the database a command connects to besides its
// input.
func addDSN(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "dsn", "", "the database to connect to (a URL or libpq key=value pairs)")
}

// addDuration adds --duration: how long the command runs.
func addDuration(cmd *cobra.Command, v *time.Duration, def time.Duration) {
	cmd.Flags().DurationVar(v, "duration", def, "how long to run: profile samples this long; watch stops after it (0: until SIGTERM or Ctrl-C)")
}

// addMaxConnections adds --max-connections: the most connections pgmedic
// opens at once.
func addMaxConnections(cmd *cobra.Command, v *int, def int) {
	cmd.Flags().IntVar(v, "max-connections", def, "the most connections pgmedic opens to servers at once")
}

// addDir adds --dir: where the command keeps its files.
func addDir(fl *pflag.FlagSet, v *string, def string) {
	fl.StringVar(v, "dir", def, "the directory where the command keeps its files (lab: its clusters' state, default $TMPDIR/pgmedic-lab as root, else ~/.cache/pgmedic/lab; watch: the ring and the incident bundles)")
}

// addPg adds --pg: the lab server's major version.
func addPg(fl *pflag.FlagSet, v *int) {
	fl.IntVar(v, "pg", 0, "the PostgreSQL major version of the lab's server, "+pgversion.Range()+" (default: the first found; `pgmedic lab install N` fetches one)")
}

// addSpeed adds --speed: the pace of a replay.
func addSpeed(cmd *cobra.Command, v *float64) {
	cmd.Flags().Float64Var(v, "speed", 1, "pace: 1 as captured, 2 twice as fast, 0 as fast as the server answers")
}
