package cli

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/trial"
	"github.com/spf13/cobra"
)

// rehearseShort is the line help lists the command with.
const rehearseShort = "rehearse a change on twins under the captured workload before production: a migration, a major upgrade"

// migrationFlags are `pgmedic rehearse migration`'s flags.
type migrationFlags struct {
	out              outputFlags
	source           string
	logFiles         []string
	in               logInput
	dbf              string
	twinDSN          string
	twinMaxMB        int
	maxWait          time.Duration
	before, stepTime time.Duration
	failOn           string
	statementTimeout time.Duration
}

// newRehearse is `pgmedic rehearse`: a change tried on a twin under the
// application's captured traffic before it reaches production.
func newRehearse(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rehearse",
		Short: rehearseShort,
	}
	cmd.AddCommand(newRehearseMigration(stdin, stdout, stderr), newRehearseUpgrade(stdin, stdout, stderr))
	return cmd
}

func newRehearseMigration(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f migrationFlags
	var failOn []string
	for _, o := range trial.FailOnMigration {
		failOn = append(failOn, o.Name+" ("+o.Means+")")
	}
	cmd := &cobra.Command{
		Use:   "migration FILE.sql (--source DSN [--log CAPTURE ...] | --twin-dsn DSN)",
		Short: "run a migration on a twin while the captured workload replays, statement by statement, as written and in its safe form",
		Long: `rehearse migration reads a migration script (FILE.sql, or - for stdin) statement by statement:
the table lock each takes, whether it rewrites or scans the table under it, and the lighter
form of the same change. Without --source that reading is the report.

With --source DSN (read only, inside the safety envelope), the tables the migration touches and
those the captured workload reads are copied into a twin (a lab cluster of the source's major,
or --twin-dsn's database), and on a fresh copy of it the migration runs while the workload of
the --log files (every format logs reads; log_min_duration_statement = 0, log_connections,
log_disconnections) replays at its captured pace, repeated until the migration is over. Each
statement starts at the moment a session of the application holds a lock on its table that
its own lock conflicts with (one of the capture's 50 ms or longer), within 3 s: the moment a deploy meets a
long reader. For each statement: its duration, the wait for its lock, the lock it held and
for how long (pg_locks), whether it rewrote the table (a new relfilenode), the sessions that
queued behind it, and the application's p99 meanwhile against before.

Then its safe form is rehearsed the same way: CONCURRENTLY, NOT VALID + VALIDATE, SET NOT NULL
proved by a CHECK, a unique index built first, a volatile default backfilled in batches, and
every statement whose lock stops reads or writes under a lock_timeout with retries, chosen
from what the first run measured.

The source is never written: its write counters (pg_stat_database) are read before and after.

Exit codes: 0 nothing --fail-when names, 1 the migration as written does, 2 bad input or a
refused connection.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRehearseMigration(cmd.Context(), args[0], f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	addOutput(cmd, &f.out)
	addSource(cmd, &f.source)
	addLogFiles(cmd, &f.logFiles)
	addLogInput(cmd, &f.in)
	addDatabaseFilter(cmd, &f.dbf)
	addTwinCopy(cmd, &f.twinDSN, &f.twinMaxMB)
	addStatementTimeout(cmd, &f.statementTimeout, 5*time.Second)
	fl.DurationVar(&f.maxWait, "max-wait", 200*time.Millisecond, "an application session that waited behind a statement longer than this was queued by it")
	fl.DurationVar(&f.before, "lead-in", 2*time.Second, "traffic replayed before the first statement (and the longest a statement waits for a long reader to meet)")
	// --before was its name; watch's --before is an incident's window.
	fl.DurationVar(&f.before, "before", 2*time.Second, "")
	fl.MarkDeprecated("before", "use --lead-in (watch's --before is the ring kept before an incident)")
	fl.DurationVar(&f.stepTime, "step-timeout", 10*time.Minute, "statement_timeout of each statement of the migration on the twin")
	fl.StringVar(&f.failOn, "fail-when", "queued,failed", "what exits 1, comma-separated: "+strings.Join(failOn, "; "))
	// --fail-on was its name; check's --fail-on gates on a baseline, in
	// another grammar.
	fl.StringVar(&f.failOn, "fail-on", "queued,failed", "")
	fl.MarkDeprecated("fail-on", "use --fail-when (check's --fail-on gates on a baseline)")
	return cmd
}

func runRehearseMigration(ctx context.Context, file string, f migrationFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := f.out.validateFormat(); err != nil {
		return err
	}
	var failOn []string
	for _, s := range strings.Split(f.failOn, ",") {
		s = strings.TrimSpace(s)
		if !slices.ContainsFunc(trial.FailOnMigration, func(o struct{ Name, Means string }) bool { return o.Name == s }) {
			var names []string
			for _, o := range trial.FailOnMigration {
				names = append(names, o.Name)
			}
			return usageErr("--fail-when %q: give %s, comma-separated", s, strings.Join(names, ", "))
		}
		if s != "none" {
			failOn = append(failOn, s)
		}
	}
	switch {
	case f.maxWait <= 0:
		return usageErr("--max-wait %s: give a positive duration, such as 200ms", f.maxWait)
	case f.before < 100*time.Millisecond || f.before > 5*time.Minute:
		return usageErr("--lead-in %s: give 100ms to 5m", f.before)
	case f.stepTime <= 0:
		return usageErr("--step-timeout %s: give a positive duration", f.stepTime)
	case f.twinMaxMB < 1:
		return usageErr("--twin-max-size must be at least 1 (MB)")
	case len(f.logFiles) > 0 && f.source == "" && f.twinDSN == "":
		return usageErr("--log gives the traffic to rehearse under: give the server the migration is for with --source DSN (or a scratch database with --twin-dsn)")
	}
	var script []byte
	var err error
	if file == "-" {
		script, err = io.ReadAll(stdin)
	} else {
		script, err = os.ReadFile(file)
	}
	if err != nil {
		return inputErr(err)
	}
	read, err := f.in.options()
	if err != nil {
		return err
	}
	sources := fileSources(f.logFiles, stdin)
	rep, err := trial.RehearseMigration(ctx, Version, trial.MigrationOptions{
		SourceOptions: trial.SourceOptions{Log: progress(stderr), StatementTimeout: f.statementTimeout, TwinDSN: f.twinDSN, TwinMaxBytes: int64(f.twinMaxMB) << 20},
		File:          file, Script: script, Source: f.source,
		Logs: f.logFiles, Sources: sources, Read: read, Database: f.dbf,
		MaxWait: f.maxWait, Before: f.before, StepTimeout: f.stepTime, FailOn: failOn})
	return writeGated(rep, err, trial.ErrMigrationRisky, f.out, stdout)
}

// upgradeFlags are `pgmedic rehearse upgrade`'s flags.
type upgradeFlags struct {
	out              outputFlags
	source           string
	to               int
	logFiles         []string
	in               logInput
	dbf              string
	twinDSN          string
	twinMaxMB        int
	runs             int
	minRatio, speed  float64
	statementTimeout time.Duration
}

func newRehearseUpgrade(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f upgradeFlags
	cmd := &cobra.Command{
		Use:   "upgrade --source DSN --to N --log CAPTURE ...",
		Short: "replay the captured workload on twins of the source's major and of major N, statement shape by statement shape, and measure why a shape got slower",
		Long: `rehearse upgrade copies the tables the captured workload reads (read only, inside the safety
envelope) into two twins: a lab cluster of the source's major and one of major N (pgmedic lab install N
fetches it), each with the same rows and the settings the source sets (an upgrade keeps
postgresql.conf and takes the new binary's defaults for the rest). It lists the settings the upgrade
changes for this server: defaults that differ between the majors where the source leaves the
default, settings the source sets that major N no longer has, planner features new in N, and JIT
where the new build has it and the old did not.

The sessions of the --log files (every format logs reads) replay on both, --replays times each,
alternating, with replay's verdict per statement shape (the ratio of the medians with its 95%
interval) and each shape's plan on both majors. For each shape slower on N, its captured
statements are timed on both majors and on N with each setting the upgrade changes put back to the
old behaviour (jit = off, enable_memoize = off, the old default): the one that takes the slowdown
back is the cause, and the fix, with the numbers.

The source is never written: its write counters (pg_stat_database) are read before and after.

Exit codes: 0 no shape slower by --min-ratio at the lower end of its interval and none failing only
on N, 1 otherwise, 2 bad input or a refused connection.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRehearseUpgrade(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	addOutput(cmd, &f.out)
	addSource(cmd, &f.source)
	fl.IntVar(&f.to, "to", 0, "the PostgreSQL major to upgrade to")
	addLogFiles(cmd, &f.logFiles)
	addLogInput(cmd, &f.in)
	addDatabaseFilter(cmd, &f.dbf)
	addTwinCopy(cmd, &f.twinDSN, &f.twinMaxMB)
	addStatementTimeout(cmd, &f.statementTimeout, 5*time.Second)
	addReplays(cmd, &f.runs)
	fl.Float64Var(&f.minRatio, "min-ratio", 1.25, "a shape fails the upgrade when it is this many times slower at the lower end of its interval")
	addSpeed(cmd, &f.speed)
	return cmd
}

func runRehearseUpgrade(ctx context.Context, f upgradeFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := f.out.validateFormat(); err != nil {
		return err
	}
	switch {
	case f.source == "":
		return usageErr("give the server to upgrade with --source DSN")
	case f.to == 0:
		return usageErr("give the major to upgrade to with --to N, such as --to 17")
	case len(f.logFiles) == 0:
		return usageErr("give the captured workload with --log FILE (log_min_duration_statement = 0, log_connections, log_disconnections)")
	case f.twinDSN != "":
		return usageErr("--twin-dsn: an upgrade needs two servers of different majors; rehearse upgrade makes both as lab clusters")
	case f.runs < 1 || f.runs > 20:
		return usageErr("--replays %d: give 1 to 20", f.runs)
	case f.minRatio < 1:
		return usageErr("--min-ratio %g: give 1 or more", f.minRatio)
	case f.speed < 0 || f.speed > 1000:
		return usageErr("--speed %g: give 0 (as fast as possible) or a factor up to 1000", f.speed)
	case f.twinMaxMB < 1:
		return usageErr("--twin-max-size must be at least 1 (MB)")
	}
	read, err := f.in.options()
	if err != nil {
		return err
	}
	sources := fileSources(f.logFiles, stdin)
	rep, err := trial.RehearseUpgrade(ctx, Version, trial.UpgradeOptions{
		SourceOptions: trial.SourceOptions{Log: progress(stderr), StatementTimeout: f.statementTimeout, TwinMaxBytes: int64(f.twinMaxMB) << 20},
		Source:        f.source, To: f.to, Logs: f.logFiles, Sources: sources, Read: read, Database: f.dbf,
		Runs: f.runs, MinRatio: f.minRatio, Speed: f.speed, Timeline: f.out.format == "html"})
	return writeGated(rep, err, trial.ErrUpgradeSlower, f.out, stdout)
}
