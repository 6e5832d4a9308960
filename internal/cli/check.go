package cli

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/verify"
)

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
	// lab is set for lab databases, where experiments may write.
	lab bool
}

func (c *checkFlags) register(cmd *cobra.Command) {
	c.outputFlags.register(cmd)
	cmd.Flags().DurationVar(&c.statementTimeout, "statement-timeout", 5*time.Second, "statement_timeout for every statement pgmedic sends, except the table copies of --verify-indexes (--copy-timeout)")
	cmd.Flags().DurationVar(&c.copyTimeout, "copy-timeout", 2*time.Minute, "statement_timeout while --verify-indexes copies a table and builds the proposed index on the copy")
	cmd.Flags().IntVar(&c.serverCores, "server-cores", 0, "the server's CPU count, for the load check before experiments (default: this machine's when the server is local, else 4)")
	cmd.Flags().IntVar(&c.runs, "runs", 5, "runs per side of each experiment (at least 5)")
	cmd.Flags().BoolVar(&c.noVerify, "no-verify", false, "diagnose only: run no experiments")
	cmd.Flags().BoolVar(&c.verifyIndexes, "verify-indexes", false, "time proposed indexes on a temporary copy of the table (temporary objects only, in a transaction that is rolled back)")
	cmd.Flags().StringSliceVar(&c.allowFunctions, "allow-function", nil, "a VOLATILE function (schema.name) that experiments may execute; repeat or separate with commas")
	cmd.Flags().IntVar(&c.maxTables, "max-tables", collect.Defaults.MaxTables, "read at most this many tables, the largest first (those left out are listed in skipped)")
	cmd.Flags().IntVar(&c.maxStatements, "max-statements", collect.Defaults.MaxStatements, "read at most this many pg_stat_statements entries, the most expensive first (those left out are listed in skipped)")
	cmd.Flags().IntVar(&c.verifyMaxMB, "verify-max-size", 1024, "largest table (MB, with indexes) --verify-indexes copies, and largest relation pgstattuple reads")
}

func newCheck(stdout, stderr io.Writer) *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check [DSN]",
		Short: "diagnose a live database and prove each finding with a measured experiment",
		Long: `check connects to one database (DSN as argument, or the libpq environment:
PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ~/.pgpass, PGSERVICE), reads the
catalogs and pg_stat_statements read-only, runs every rule, re-runs the evidence
for findings that can be tested safely, and prints the findings with their fix.

Exit codes: 0 nothing at or above --min-severity, 1 findings, 2 usage or
connection error, 3 internal error.`,
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
			rep, err := diagnose(cmd.Context(), dsn, f, ids, min, progress(stderr))
			if err != nil {
				return err
			}
			return emit(rep, f.outputFlags, min, stdout)
		},
	}
	f.register(cmd)
	return cmd
}

// diagnose is the whole pipeline: connect, collect, rules, verify, report.
func diagnose(ctx context.Context, dsn string, f checkFlags, ruleIDs []string, min model.Severity, logf func(string, ...any)) (*report.Report, error) {
	selected, err := rules.Select(ruleIDs)
	if err != nil {
		return nil, usageErr("--rules: %v", err)
	}
	if f.runs < 5 {
		return nil, usageErr("--runs must be at least 5: a median of fewer runs is noise")
	}
	if f.verifyMaxMB <= 0 {
		return nil, usageErr("--verify-max-size must be a positive number of megabytes")
	}
	if f.statementTimeout < 100*time.Millisecond {
		return nil, usageErr("--statement-timeout must be at least 100ms")
	}
	if f.copyTimeout < 100*time.Millisecond {
		return nil, usageErr("--copy-timeout must be at least 100ms")
	}
	sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: f.statementTimeout})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	logf("connected to %s (PostgreSQL %s)", sess.Target, sess.Target.ServerVersion)
	if f.maxTables <= 0 || f.maxStatements <= 0 {
		return nil, usageErr("--max-tables and --max-statements must be positive")
	}
	opts := collect.Defaults
	opts.MaxTables, opts.MaxStatements = f.maxTables, f.maxStatements
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		return nil, inputErr(err)
	}
	logf("collected %d statements", len(snap.Statements))
	findings, skipped := rules.Run(snap, selected)
	if !f.noVerify {
		eng := &verify.Engine{Conn: sess.Conn, Runs: f.runs, Cores: serverCores(f.serverCores, sess.Target.Host),
			StatementTimeoutText: f.statementTimeout.String(), Log: logf,
			Lab: f.lab, VerifyIndexes: f.verifyIndexes, MaxCopyBytes: int64(f.verifyMaxMB) << 20,
			AllowFunctions: f.allowFunctions, CopyTimeout: f.copyTimeout}
		var more []model.Skip
		findings, more = eng.Run(ctx, snap, findings)
		skipped = append(skipped, more...)
		rules.Sort(findings)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return report.New(Version, sess.Target, snap.CollectedAt, findings, skipped, len(selected), min), nil
}

func serverCores(flag int, host string) int {
	if flag > 0 {
		return flag
	}
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return runtime.NumCPU()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return runtime.NumCPU()
	}
	return 4
}

// findingsReport is what check and explain print: text or JSON, and the
// worst severity reported, which decides the exit code.
type findingsReport interface {
	Text(io.Writer) error
	JSON(io.Writer) error
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
	return nil
}

// write renders in --format to --out or stdout.
func write(rep interface {
	Text(io.Writer) error
	JSON(io.Writer) error
}, o outputFlags, stdout io.Writer) error {
	render := rep.Text
	if o.format == "json" {
		render = rep.JSON
	}
	return writeOut(o.out, stdout, render)
}
