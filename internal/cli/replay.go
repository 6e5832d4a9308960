package cli

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/trial"
)

// replayShort is the line help lists the command with.
const replayShort = "replay the sessions of a server log against a twin, once or before and after a change, with a verdict"

// replayFlags are `pgmedic replay`'s flags.
type replayFlags struct {
	out             outputFlags
	dsn, candidate  string
	source          string
	allow           []string
	dryRun          bool
	speed           float64
	runs            int
	maxConns        int
	timeout         time.Duration
	clientTimeout   time.Duration
	apply, set      []string
	pool, poolA     int
	in              logInput
	dbf             string
	twin, noPrepare bool
	fix             string
}

// newReplay is `pgmedic replay`: a captured workload run again, once or
// A/B with a verdict.
func newReplay(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay LOG... (--dsn DSN [--candidate DSN | --apply SQL | --set NAME=VALUE | --pool N] | --dry-run)",
		Short: replayShort,
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
replayed --replays times, alternating, and every run starts from a fresh copy of the database
(CREATE DATABASE ... TEMPLATE) on any server: the database the DSN names is never written by a
comparison, which is refused before it writes where the role cannot make the copy (it needs
CREATEDB and to own the database, or superuser). The verdict is faster, slower or no measurable change (a change under
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
	addOutput(cmd, &f.out)
	addDSN(cmd, &f.dsn)
	fl.StringVar(&f.candidate, "candidate", "", "a second server to replay against as side B")
	addSource(cmd, &f.source)
	fl.StringArrayVar(&f.allow, "allow-writes-to", nil, "a DSN that is not a pgmedic lab cluster or twin that the replay may write to (repeat for --candidate)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "read the log and report what would be replayed; send nothing")
	addSpeed(cmd, &f.speed)
	addReplays(cmd, &f.runs)
	addMaxConnections(cmd, &f.maxConns, replay.DefaultMaxConnections)
	fl.DurationVar(&f.timeout, "timeout", 0, "stop each replay after this long (default: the capture's duration at --speed, plus 5 minutes)")
	fl.DurationVar(&f.clientTimeout, "client-timeout", 0, "cancel a replayed statement that runs longer, as the application's own timeout did (default: none)")
	fl.StringArrayVar(&f.apply, "apply", nil, "SQL run on side B's copy before each run (repeatable)")
	fl.StringArrayVar(&f.set, "set", nil, "NAME=VALUE: a setting for side B's sessions, such as jit=off (repeatable)")
	fl.IntVar(&f.pool, "pool", 0, "side B through PgBouncer in transaction mode with this many server connections")
	fl.IntVar(&f.poolA, "pool-a", 0, "side A through PgBouncer in transaction mode with this many server connections")
	addLogInput(cmd, &f.in)
	addDatabaseFilter(cmd, &f.dbf)
	fl.BoolVar(&f.noPrepare, "no-prepare", false, "send every extended statement unnamed: for a --dsn that is a PgBouncer in transaction mode (before 1.21, or without max_prepared_statements)")
	addTwin(cmd, &f.twin)
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
		return usageErr("--replays %d: give 1 to 20", f.runs)
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
	read, err := f.in.options()
	if err != nil {
		return err
	}
	sources := fileSources(args, stdin)
	rep, err := trial.Replay(ctx, Version, trial.ReplayOptions{SourceOptions: trial.SourceOptions{Log: progress(stderr)}, Timeline: f.out.format == "html",
		Logs: args, Sources: sources, Read: read, Database: f.dbf,
		DSN: f.dsn, Candidate: f.candidate, Source: f.source, Allow: f.allow, DryRun: f.dryRun,
		BuildTwin: f.twin, Fix: f.fix, Apply: f.apply, Settings: settings, Pool: f.pool, PoolA: f.poolA,
		Speed: f.speed, Runs: f.runs, MaxConnections: f.maxConns, ClientTimeout: f.clientTimeout, Timeout: f.timeout, NoPrepare: f.noPrepare})
	return writeGated(rep, err, trial.ErrSlower, f.out, stdout)
}
