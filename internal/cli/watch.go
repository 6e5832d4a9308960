package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/watch"
)

// watchShort is the line help lists the command with.
const watchShort = "flight recorder: sample a server for days, keep a bounded ring on disk, write a bundle per incident, serve /metrics"

// watchFlags are the flags of `watch`.
type watchFlags struct {
	dir             string
	keep            time.Duration
	maxSizeMB       int
	interval        time.Duration
	statementsEvery time.Duration
	before, after   time.Duration
	maxIncident     time.Duration
	maxBundles      int
	duration        time.Duration
	pgbouncer       string
	serverCores     int
	targets         string
	shard           string
	maxConnections  int
	metrics         string
	minSeverity     string
}

// newWatch is `pgmedic watch`: the flight recorder.
func newWatch(_ io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch [DSN]",
		Short: watchShort,
		Long: `watch keeps one connection to the server (DSN as argument, or the libpq
environment) and, every --interval, samples its sessions and locks; every
--statements-every it reads pg_stat_statements (never resetting it). Both go
to a ring on disk (--dir, bounded by --keep and --max-size). When a trigger
fires (listed below) it opens an incident; once nothing
has fired for --after, the window from --before ahead of it is written as a
bundle under --dir/incidents, with its report (check --from BUNDLE reads it
again). With --targets FILE it watches a fleet from one process, one
connection per server, each in its own directory.

The ring and the bundles hold the sessions' statements as the server showed
them, values included (a client that sends literals puts them in
pg_stat_activity): they are written readable by their owner only (0600 in
0700 directories). The reports written beside them leave the values out, as
every report does unless --show-values is given to check --from.

It reconnects with back-off through restarts and failovers, stops cleanly on
SIGTERM or Ctrl-C (an incident in progress is written first), and prints
what it cost when it stops. Exit codes: 0 stopped, 2 usage or connection
error.

Triggers:
` + triggerHelp(),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dsn := ""
			if len(args) == 1 {
				dsn = args[0]
			}
			return runWatch(cmd.Context(), f, dsn, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	addDir(fl, &f.dir, "pgmedic-watch")
	fl.DurationVar(&f.keep, "keep", 2*time.Hour, "how long the ring keeps what it recorded")
	fl.IntVar(&f.maxSizeMB, "max-size", 256, "most MB the ring holds (per target); the oldest minutes go first")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between two samples of the sessions (one query each)")
	fl.DurationVar(&f.statementsEvery, "statements-every", time.Minute, "time between two readings of pg_stat_statements")
	fl.DurationVar(&f.before, "before", 2*time.Minute, "how much of the ring before an incident's first trigger its bundle holds")
	fl.DurationVar(&f.after, "after", time.Minute, "an incident ends once no trigger has fired for this long; its bundle holds it")
	fl.DurationVar(&f.maxIncident, "max-incident", 30*time.Minute, "write an incident that goes on this long, and open no other until it is over")
	fl.IntVar(&f.maxBundles, "max-bundles", 200, "bundles kept (per target); the oldest go first")
	addDuration(cmd, &f.duration, 0)
	addPgBouncer(cmd, &f.pgbouncer)
	addServerCores(cmd, &f.serverCores)
	fl.StringVar(&f.targets, "targets", "", "a YAML file of servers to watch from one process (name, dsn, pgbouncer, labels, server_cores for each)")
	fl.StringVar(&f.shard, "shard", "", "with --targets, watch only shard I of N (I/N): each target's name is hashed, so N processes given the same file split it without coordination")
	addMaxConnections(cmd, &f.maxConnections, 100)
	fl.StringVar(&f.metrics, "metrics", "", "serve /metrics in Prometheus's text format on this address (127.0.0.1:9849)")
	addMinSeverity(cmd, &f.minSeverity, "warning")
	return cmd
}

func (f watchFlags) validate() error {
	switch {
	case f.interval < 100*time.Millisecond:
		return usageErr("--interval must be at least 100ms")
	case f.statementsEvery < f.interval:
		return usageErr("--statements-every must be at least --interval")
	case f.keep < f.before+f.after || f.keep <= 0:
		return usageErr("--keep must hold an incident's window: at least --before plus --after")
	case f.maxSizeMB < 1:
		return usageErr("--max-size must be at least 1 (MB)")
	case f.after < 15*time.Second || f.before < 0:
		// A backend reports its counters (rollbacks, sessions) up to 10 s
		// after the fact when it sits idle: an incident must outlast that.
		return usageErr("--after must be at least 15s (PostgreSQL reports an idle backend's counters up to 10 s late), and --before 0 or more")
	case f.after < f.interval:
		return usageErr("--after must be at least --interval")
	case f.maxIncident < f.after:
		return usageErr("--max-incident must be at least --after")
	case f.maxBundles < 1:
		return usageErr("--max-bundles must be at least 1")
	case f.duration < 0:
		return usageErr("--duration must be 0 (until stopped) or more")
	case f.serverCores < 0:
		return usageErr("--server-cores must be positive")
	}
	if _, err := model.ParseSeverity(f.minSeverity); err != nil {
		return usageErr("--min-severity: %v", err)
	}
	return nil
}

// targetsOf is the servers to watch: the DSN, or the --targets file's
// (this shard's), within the connection budget.
func (f watchFlags) targetsOf(dsn string) ([]watch.Target, error) {
	if f.targets == "" {
		if f.shard != "" {
			return nil, usageErr("--shard needs --targets")
		}
		return []watch.Target{{Name: watch.NameOf(dsn), DSN: dsn, PgBouncer: f.pgbouncer, ServerCores: f.serverCores}}, nil
	}
	if dsn != "" || f.pgbouncer != "" {
		return nil, usageErr("--targets names every server: drop the DSN and --pgbouncer (put pgbouncer: in the target's entry)")
	}
	data, err := os.ReadFile(f.targets)
	if err != nil {
		return nil, usageErr("--targets: %v", err)
	}
	fleet, err := watch.ParseFleet(data, f.targets)
	if err != nil {
		return nil, inputErr(err)
	}
	ts := fleet.Targets
	if f.shard != "" {
		i, n, err := watch.ParseShard(f.shard)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		ts = fleet.Shard(i, n)
		if len(ts) == 0 {
			return nil, inputErr(fmt.Errorf("--shard %s holds none of the %d targets: fewer shards, or more targets", f.shard, len(fleet.Targets)))
		}
	}
	if need := watch.Connections(ts); need > f.maxConnections {
		return nil, inputErr(fmt.Errorf("%d targets need %d connections, over --max-connections %d: raise it, or split the fleet with --shard 1/%d ... --shard %d/%d in as many processes",
			len(ts), need, f.maxConnections, (need+f.maxConnections-1)/f.maxConnections, (need+f.maxConnections-1)/f.maxConnections, (need+f.maxConnections-1)/f.maxConnections))
	}
	return ts, nil
}

func runWatch(ctx context.Context, f watchFlags, dsn string, stdout, stderr io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	ts, err := f.targetsOf(dsn)
	if err != nil {
		return err
	}
	min, _ := model.ParseSeverity(f.minSeverity)
	cfg := watch.Config{Dir: f.dir, Interval: f.interval, StatementsEvery: f.statementsEvery, Keep: f.keep, MaxBytes: int64(f.maxSizeMB) << 20,
		Before: f.before, After: f.after, MaxIncident: f.maxIncident, MaxBundles: f.maxBundles, Duration: f.duration}
	line, err := diagnose.Watch(ctx, Version, diagnose.WatchOptions{Targets: ts, Fleet: f.targets != "", Config: cfg, Metrics: f.metrics, MinSeverity: min, Stderr: stderr})
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, line)
	return nil
}

// triggerHelp lists the triggers, one a line, from watch's table.
func triggerHelp() string {
	var b strings.Builder
	for _, t := range watch.Triggers {
		fmt.Fprintf(&b, "  %-20s %s\n", t.ID, t.Says)
	}
	return strings.TrimRight(b.String(), "\n")
}
