package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/report"
)

// replayFlags are `pgmedic replay`'s flags.
type replayFlags struct {
	out                   outputFlags
	dsn, candidate        string
	source                string
	allow                 []string
	dryRun                bool
	speed                 float64
	runs                  int
	maxConns              int
	timeout, stmtTimeout  time.Duration
	apply, set            []string
	pool, poolA           int
	prefix, formatIn, dbf string
	twin, noPrepare       bool
	fix                   string
}

// newReplay is `pgmedic replay`: a captured workload run again, once or
// A/B with a verdict.
func newReplay(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay LOG... (--dsn DSN [--candidate DSN | --apply SQL | --set NAME=VALUE | --pool N] | --dry-run)",
		Short: "replay the sessions of a server log against a twin, once or before and after a change, with a verdict",
		Long: `replay reads the sessions a server log captured (log_min_duration_statement = 0 or
log_statement = all, with log_connections and log_disconnections; stderr with any prefix,
csvlog, jsonlog, cloud exports, gzip) and runs them again: one connection per session, each
statement when its session sent it (--speed 1), with its literal values and bind parameters.
The lag behind schedule is split into what the server caused (a session's previous statement
ran past the next one's time) and what the replayer did, so a slow replayer is never taken
for a slow server.

A change makes it an A/B: --candidate DSN (another server), --apply SQL (an index, a
migration, run on B's copy), --set NAME=VALUE (a setting for B's sessions, such as jit=off),
--pool N (B through PgBouncer with N server connections; --pool-a N for A). Each side is
replayed --runs times, alternating; on a lab cluster or twin every run starts from a fresh
copy of the database. The verdict is faster, slower or no measurable change (a change under
10%, or runs that overlap, is not called).

Replays write. pgmedic replays only against a pgmedic lab cluster or twin (pgmedic lab up,
check --twin --keep-twin), never the server the log came from (--source), unless
--allow-writes-to names the DSN. --dry-run reads the log and says what would be sent.

Exit codes: 0 replayed (faster or no measurable change), 1 slower, 2 bad input, a refused
or failed connection, or a replay refused by the safety rules.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd.Context(), args, f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out.format, "format", "text", formatHelp)
	fl.StringVar(&f.out.out, "out", "", "write the report to this file instead of stdout")
	fl.StringVar(&f.dsn, "dsn", "", "the server to replay against (side A of a comparison)")
	fl.StringVar(&f.candidate, "candidate", "", "a second server to replay against as side B")
	fl.StringVar(&f.source, "source", "", "the server the log came from: never replayed against (unless --allow-writes-to names it)")
	fl.StringArrayVar(&f.allow, "allow-writes-to", nil, "a DSN that is not a pgmedic lab cluster or twin that the replay may write to (repeat for --candidate)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "read the log and report what would be replayed; send nothing")
	fl.Float64Var(&f.speed, "speed", 1, "pace: 1 as captured, 2 twice as fast, 0 as fast as the server answers")
	fl.IntVar(&f.runs, "runs", 3, "replays of each side in a comparison (at least 2 for a verdict other than no measurable change)")
	fl.IntVar(&f.maxConns, "max-connections", replay.DefaultMaxConnections, "sessions connected at once; more wait for a free slot (the wait is reported)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop each replay after this long (default: the capture's duration at --speed, plus 5 minutes)")
	fl.DurationVar(&f.stmtTimeout, "statement-timeout", 0, "cancel a statement that runs longer, as the application's timeout did (default: none)")
	fl.StringArrayVar(&f.apply, "apply", nil, "SQL run on side B's copy before each run (repeatable)")
	fl.StringArrayVar(&f.set, "set", nil, "NAME=VALUE: a setting for side B's sessions, such as jit=off (repeatable)")
	fl.IntVar(&f.pool, "pool", 0, "side B through PgBouncer in transaction mode with this many server connections")
	fl.IntVar(&f.poolA, "pool-a", 0, "side A through PgBouncer in transaction mode with this many server connections")
	fl.StringVar(&f.prefix, "prefix", "", "the server's log_line_prefix (default: detected)")
	fl.StringVar(&f.formatIn, "format-in", "", "the logs' format: "+formatList()+" (default: detected)")
	fl.StringVar(&f.dbf, "database", "", "replay only the sessions of this database (default: all)")
	fl.BoolVar(&f.noPrepare, "no-prepare", false, "send every extended statement unnamed: for a --dsn that is a PgBouncer in transaction mode (before 1.21, or without max_prepared_statements)")
	fl.BoolVar(&f.twin, "twin", false, "replay against a twin of --source: the tables the captured statements name, copied into a lab cluster of its version")
	fl.StringVar(&f.fix, "fix", "", "side B gets the fix of this finding of --source (its id, such as missing-index/3f2a9c1b, or a rule when one finding has it)")
	return cmd
}

func runReplay(ctx context.Context, args []string, f replayFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := f.out.validateFormat(); err != nil {
		return err
	}
	if f.speed < 0 || f.speed > 1000 {
		return usageErr("--speed %g: give 0 (as fast as possible) or a factor up to 1000", f.speed)
	}
	if f.runs < 1 || f.runs > 20 {
		return usageErr("--runs %d: give 1 to 20", f.runs)
	}
	if f.maxConns < 1 {
		return usageErr("--max-connections %d: give at least 1", f.maxConns)
	}
	settings := map[string]string{}
	for _, s := range f.set {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return usageErr("--set %q: give NAME=VALUE, such as jit=off", s)
		}
		settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	switch {
	case f.twin && f.dsn != "":
		return usageErr("give --dsn or --twin, not both")
	case (f.twin || f.fix != "") && f.source == "":
		return usageErr("--twin and --fix read the server the log came from: give it with --source DSN")
	case !f.dryRun && f.dsn == "" && !f.twin:
		return usageErr("give --dsn (a twin or lab cluster to replay against), --twin --source DSN, or --dry-run")
	}
	var in logs.Format
	if f.formatIn != "" {
		in = logs.Format(f.formatIn)
		if !slices.Contains(logs.Formats, in) {
			return inputErr(fmt.Errorf("--format-in %s: not a format pgmedic reads (%s)", f.formatIn, formatList()))
		}
	}
	var sources []logs.Source
	for _, a := range args {
		sources = append(sources, logs.FileSource(a, stdin))
	}
	w, err := capture.Read(ctx, sources, capture.Options{Database: f.dbf, Options: logs.Options{Prefix: f.prefix, Format: in}})
	if err != nil {
		return inputErr(err)
	}
	rep := &report.ReplayReport{PGMedic: Version, Logs: args, Capture: report.CaptureOf(w), Speed: f.speed}
	if f.dryRun {
		rep.DryRun = true
		return writeReplay(rep, f.out, stdout)
	}
	progress := progress(stderr)
	if f.twin || f.fix != "" {
		var queries []string
		for _, sh := range w.Shapes {
			queries = append(queries, sh.Query)
		}
		src, err := diagnose.ReplaySource(ctx, f.source, queries, f.twin, diagnose.Options{Log: progress})
		if err != nil {
			return inputErr(fmt.Errorf("--source: %w", err))
		}
		if src.Twin != nil {
			defer src.Twin.Close(context.WithoutCancel(ctx))
			src.Twin.Release(ctx)
			f.dsn, rep.Twin = src.Twin.DSN(), src.Twin.Summary()
		}
		if f.fix != "" {
			fd, err := findingByID(src.Findings, f.fix)
			if err != nil {
				return inputErr(err)
			}
			ch, err := replay.ChangeOf(fd)
			if err != nil {
				return inputErr(err)
			}
			f.apply = append(f.apply, ch.B.Apply...)
			for k, v := range ch.B.Settings {
				settings[k] = v
			}
			if ch.B.Pool > 0 && f.pool == 0 {
				f.pool = ch.B.Pool
			}
			if ch.PoolA > 0 && f.poolA == 0 {
				f.poolA = ch.PoolA
			}
			rep.Fix = fd.ID + ": " + fd.Title + " (replayed: " + ch.Said + ")"
		}
	}
	change := f.candidate != "" || len(f.apply) > 0 || len(settings) > 0 || f.pool > 0
	a, err := replay.OpenServer(ctx, f.dsn)
	if err != nil {
		return inputErr(fmt.Errorf("--dsn: %w", err))
	}
	if err := a.Guard(ctx, f.allow, f.source); err != nil {
		return inputErr(err)
	}
	o := replay.Options{Speed: f.speed, MaxConnections: f.maxConns, StatementTimeout: f.stmtTimeout, Timeout: f.timeout, NoPrepare: f.noPrepare}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
		if f.speed > 0 {
			o.Timeout += time.Duration(float64(w.Duration) / f.speed)
		} else {
			o.Timeout += w.Duration
		}
	}
	users := sessionUsers(w)
	sideA, err := a.Side(replay.SideOptions{Name: "as is", Pool: f.poolA, Users: users})
	if err != nil {
		return inputErr(err)
	}
	if f.poolA > 0 {
		sideA.Name = fmt.Sprintf("pool of %d", f.poolA)
	}
	if !change {
		progress("replaying %d sessions, %d statements at speed %g on %s", len(w.Sessions), w.Statements, f.speed, a.Name)
		t, err := sideA.Open(ctx, 0)
		if err != nil {
			return inputErr(err)
		}
		ro := o
		ro.Connect, ro.NoPrepare = t.Connect, f.noPrepare || t.NoPrepare
		ro.LockWaits = &replay.LockSampler{Connect: t.ConnectAdmin}
		r, err := replay.Run(ctx, w, ro)
		t.Close()
		if err != nil {
			return inputErr(err)
		}
		if ctx.Err() != nil {
			return inputErr(fmt.Errorf("interrupted: every session was stopped and its connection closed"))
		}
		rep.Where, rep.Single = t.Where, r
		return writeReplay(rep, f.out, stdout)
	}
	bServer := a
	if f.candidate != "" {
		if bServer, err = replay.OpenServer(ctx, f.candidate); err != nil {
			return inputErr(fmt.Errorf("--candidate: %w", err))
		}
		if err := bServer.Guard(ctx, f.allow, f.source); err != nil {
			return inputErr(fmt.Errorf("--candidate: %w", err))
		}
	}
	sideB, err := bServer.Side(replay.SideOptions{Name: changeName(f, settings), Apply: f.apply, Settings: settings, Pool: f.pool, Users: users})
	if err != nil {
		return inputErr(err)
	}
	progress("replaying %d sessions, %d statements at speed %g: %d runs of %q and of %q, alternating", len(w.Sessions), w.Statements, f.speed, f.runs, sideA.Name, sideB.Name)
	c, err := replay.Compare(ctx, w, sideA, sideB, f.runs, o)
	if err != nil {
		return inputErr(err)
	}
	rep.Comparison = c
	if err := writeReplay(rep, f.out, stdout); err != nil {
		return err
	}
	if c.Verdict == replay.Slower {
		return &exitError{code: ExitFindings, err: fmt.Errorf("the change made the replay slower")}
	}
	return nil
}

// findingByID is the finding an id names, or the one finding of a rule.
func findingByID(fs []model.Finding, id string) (model.Finding, error) {
	var ofRule []model.Finding
	var ids []string
	for _, f := range fs {
		if f.ID == id {
			return f, nil
		}
		if f.Rule == id {
			ofRule = append(ofRule, f)
		}
		ids = append(ids, f.ID)
	}
	if len(ofRule) == 1 {
		return ofRule[0], nil
	}
	if len(ofRule) > 1 {
		var names []string
		for _, f := range ofRule {
			names = append(names, f.ID)
		}
		return model.Finding{}, fmt.Errorf("--fix %s: %d findings have that rule (%s): give one id", id, len(ofRule), strings.Join(names, ", "))
	}
	if len(ids) == 0 {
		return model.Finding{}, fmt.Errorf("--fix %s: the source has no finding to take a fix from", id)
	}
	return model.Finding{}, fmt.Errorf("--fix %s: no such finding on the source; its findings: %s", id, strings.Join(ids, ", "))
}

// changeName says what side B changes.
func changeName(f replayFlags, settings map[string]string) string {
	var parts []string
	if f.candidate != "" {
		parts = append(parts, "candidate server")
	}
	for _, s := range f.apply {
		parts = append(parts, oneLine(s))
	}
	for k, v := range settings {
		parts = append(parts, k+" = "+v)
	}
	if f.pool > 0 {
		parts = append(parts, fmt.Sprintf("pool of %d", f.pool))
	}
	return strings.Join(parts, "; ")
}

func sessionUsers(w *capture.Workload) []string {
	var us []string
	for _, s := range w.Sessions {
		if s.User != "" && !slices.Contains(us, s.User) {
			us = append(us, s.User)
		}
	}
	return us
}

func writeReplay(rep *report.ReplayReport, o outputFlags, stdout io.Writer) error {
	render := rep.Text
	switch o.format {
	case "json":
		render = rep.JSON
	case "html":
		render = rep.HTML
	case "markdown":
		render = rep.Markdown
	}
	return writeOut(o.out, stdout, render)
}
