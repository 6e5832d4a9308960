package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
)

// checkShort is the line help lists the command with.
const checkShort = "diagnose a live database and prove each finding with a measured experiment"

// checkFlags are the flags of `check` (and of the commands that run it).
type checkFlags struct {
	outputFlags
	statementTimeout time.Duration
	serverCores      int
	runs             int
	noVerify         bool
	verifyIndexes    bool
	verifyMaxMB      int
	allowFunctions   []string
	copyTimeout      time.Duration
	maxTables        int
	maxStatements    int
	sample           time.Duration
	sampleInterval   time.Duration
	pgbouncer        string
	// Logs: check only (the lab's clusters log to a file of their own).
	logFiles    []string
	serverLogMB int
	profile     time.Duration
	showValues  bool
	// The twin: check only.
	twin      bool
	twinDSN   string
	twinMaxMB int
	keepTwin  bool
	maxConns  int
	// Over time: check only.
	baseline string
	failOn   string
	from     string
}

// register adds check's flags to a command (check, lab run, demo).
func (c *checkFlags) register(cmd *cobra.Command) {
	addReport(cmd, &c.outputFlags, "warning")
	addStatementTimeout(cmd, &c.statementTimeout, 5*time.Second)
	cmd.Flags().DurationVar(&c.copyTimeout, "copy-timeout", 2*time.Minute, "statement_timeout while --verify-indexes copies a table and builds the proposed index on the copy")
	addServerCores(cmd, &c.serverCores)
	addExperimentRuns(cmd, &c.runs)
	addNoVerify(cmd, &c.noVerify)
	cmd.Flags().BoolVar(&c.verifyIndexes, "verify-indexes", false, "time proposed indexes on a temporary copy of the table (temporary objects only, in a transaction that is rolled back)")
	addAllowFunction(cmd, &c.allowFunctions)
	cmd.Flags().IntVar(&c.maxTables, "max-tables", collect.Defaults().MaxTables, "read at most this many tables, the largest first (those left out are listed in skipped)")
	cmd.Flags().IntVar(&c.maxStatements, "max-statements", collect.Defaults().MaxStatements, "read at most this many pg_stat_statements entries, the most expensive first (those left out are listed in skipped)")
	cmd.Flags().DurationVar(&c.sample, "sample", 10*time.Second, "watch the server's sessions this long (pg_stat_activity, pg_locks, pg_stat_database) for stalled clients, idle transactions, lock queues and connection pressure; 0 turns it off")
	cmd.Flags().DurationVar(&c.sampleInterval, "sample-interval", 100*time.Millisecond, "time between two samples (one query each)")
	addPgBouncer(cmd, &c.pgbouncer)
	cmd.Flags().BoolVar(&c.showValues, "show-values", false, "show in the report the values re-runs took from the database's data (pg_stats' common values, the application's literals); by default a report names where each came from and its type, not the value")
	cmd.Flags().IntVar(&c.verifyMaxMB, "verify-max-size", 1024, "largest table (MB, with indexes) --verify-indexes copies, and largest relation pgstattuple reads")
}

// newCheck is `pgmedic check`: its flags, handed to diagnose.Check.
func newCheck(stdout, stderr io.Writer) *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check [DSN]",
		Short: checkShort,
		Long: `check connects to one database (DSN as argument, or the libpq environment:
PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ~/.pgpass, PGSERVICE), reads the
catalogs and pg_stat_statements read-only, runs every rule, re-runs the evidence
for findings that can be tested safely, and prints the findings with their fix.

Exit codes: 0 nothing at or above --min-severity, 1 findings, 2 usage or
connection error, 3 internal error, 4 nothing found in what pgmedic could
see, but it could not see part of the database (other roles' statements or
sessions, tables it may not read): the report's first lines say what, and the
grant that shows it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			min, ids, err := f.validate()
			if err != nil {
				return err
			}
			dsn := ""
			if len(args) == 1 {
				dsn = args[0]
			}
			defer tuneCollector(100, checkMemoryLimit)()
			gate, err := f.gate()
			if err != nil {
				return err
			}
			o := f.options(ids, progress(stderr))
			if err := f.twinOptions(&o); err != nil {
				return err
			}
			if f.baseline != "" {
				if o.Baseline, err = loadBaseline(f.baseline); err != nil {
					return err
				}
			}
			var rep *report.Report
			if f.from != "" {
				if dsn != "" || f.twin || f.twinDSN != "" {
					return usageErr("check --from reads an incident bundle, not a server: drop the DSN and --twin")
				}
				rep, err = diagnose.FromBundle(f.from, Version, o, min)
			} else {
				rep, err = diagnose.Check(cmd.Context(), dsn, Version, o, min)
			}
			if err != nil {
				return err
			}
			if gate == nil {
				return emit(rep, f.outputFlags, min, stdout)
			}
			if err := write(rep, f.outputFlags, stdout); err != nil {
				return err
			}
			if failed := gate.Failures(rep.Baseline); len(failed) > 0 {
				fmt.Fprintln(stderr, "pgmedic: against the baseline: "+strings.Join(failed, "; "))
				return errFindings
			}
			return nil
		},
	}
	f.register(cmd)
	addLogFiles(cmd, &f.logFiles)
	cmd.Flags().DurationVar(&f.profile, "profile", 0, "sample the busiest backends' CPU with perf this long (on the database server, as root) and name the hot spots; 0 for none")
	addTwin(cmd, &f.twin)
	addTwinCopy(cmd, &f.twinDSN, &f.twinMaxMB)
	addMaxConnections(cmd, &f.maxConns, 1)
	cmd.Flags().BoolVar(&f.keepTwin, "keep-twin", false, "leave the twin's lab cluster running after the check, to explore it (pgmedic lab down --dir DIR removes it)")
	cmd.Flags().StringVar(&f.baseline, "baseline", "", "an earlier report of this database (JSON written by pgmedic check --format json): each finding is marked NEW, PERSISTING or RESOLVED, statements that got slower are re-run, and --fail-on sets the exit code")
	cmd.Flags().StringVar(&f.failOn, "fail-on", "", "with --baseline, what exits 1: new:SEVERITY, persisting:SEVERITY, any:SEVERITY, regression, none; comma-separated (default "+baseline.DefaultGate+")")
	cmd.Flags().StringVar(&f.from, "from", "", "an incident bundle written by pgmedic watch (its directory): the report of what the server did in that window, with no connection")
	cmd.Flags().IntVar(&f.serverLogMB, "server-log", 64, "read this many MB from the end of the server's current log over the connection, when logging_collector is on and the role may read server files (pg_monitor, pg_read_server_files); 0 turns it off")
	return cmd
}

// twinOptions checks the twin's flags and sets them on the pipeline's
// options.
func (f *checkFlags) twinOptions(o *diagnose.Options) error {
	if f.twinMaxMB < 1 {
		return usageErr("--twin-max-size must be at least 1 (MB)")
	}
	if f.maxConns < 1 {
		return usageErr("--max-connections %d: give at least 1 (pgmedic's own session)", f.maxConns)
	}
	o.Twin, o.TwinDSN, o.TwinMaxBytes, o.KeepTwin, o.MaxConnections = f.twin, f.twinDSN, int64(f.twinMaxMB)<<20, f.keepTwin, f.maxConns
	return nil
}

// options turns the flags into the pipeline's options.
func (c checkFlags) options(ids []string, logf func(string, ...any)) diagnose.Options {
	return diagnose.Options{Rules: ids, StatementTimeout: c.statementTimeout, CopyTimeout: c.copyTimeout,
		ServerCores: c.serverCores, Runs: c.runs, NoVerify: c.noVerify, VerifyIndexes: c.verifyIndexes,
		MaxCopyBytes: int64(c.verifyMaxMB) << 20, AllowFunctions: c.allowFunctions,
		MaxTables: c.maxTables, MaxStatements: c.maxStatements, SampleFor: c.sample, SampleEvery: c.sampleInterval, PgBouncer: c.pgbouncer, Log: logf,
		LogFiles: c.logFiles, ServerLogBytes: int64(c.serverLogMB) << 20, ProfileFor: c.profile, ShowValues: c.showValues}
}

// findingsReport is what check and explain print: a report in every
// format and the worst severity reported, which decides the exit code.
type findingsReport interface {
	report.Renderable
	Worst() model.Severity
}

// emit writes the report and turns findings into exit code 1.
func emit(rep findingsReport, o outputFlags, min model.Severity, stdout io.Writer) error {
	if err := write(rep, o, stdout); err != nil {
		return err
	}
	if rep.Worst() >= min {
		return errFindings
	}
	if inc, ok := rep.(interface{ Incomplete() bool }); ok && inc.Incomplete() {
		return errIncomplete
	}
	return nil
}

// rendered is a command's output made of several reports (the demo's and
// lab run's), for write.
type rendered struct {
	text, json func(io.Writer) error
	doc        func() *report.Document
}

func (r rendered) Text(w io.Writer) error     { return r.text(w) }
func (r rendered) JSON(w io.Writer) error     { return r.json(w) }
func (r rendered) Document() *report.Document { return r.doc() }

// gate is --fail-on, parsed; nil without --baseline (then --min-severity
// sets the exit code).
func (c checkFlags) gate() (baseline.Gate, error) {
	if c.baseline == "" {
		if c.failOn != "" {
			return nil, usageErr("--fail-on needs --baseline: without one, --min-severity sets the exit code")
		}
		return nil, nil
	}
	spec := c.failOn
	if spec == "" {
		spec = baseline.DefaultGate
	}
	g, err := baseline.ParseGate(spec)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return g, nil
}

// loadBaseline reads --baseline: any JSON report pgmedic wrote.
func loadBaseline(path string) (*baseline.Old, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr("--baseline: %v", err)
	}
	old, err := baseline.Load(data, path)
	if err != nil {
		return nil, inputErr(err)
	}
	return old, nil
}
