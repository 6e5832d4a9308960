package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/model"
)

// The migration-lock-queue scenario: a long report reads orders, a
// migration's ALTER TABLE waits behind it for AccessExclusiveLock, and
// every read of orders queues behind the ALTER, though the report alone
// would not block them.
const (
	migrationRead   = `SELECT total FROM orders WHERE id = $1`
	migrationReport = `SELECT count(*), pg_sleep(%g) FROM orders`
	// readers and their pace: each sends a read every readEvery whether
	// or not the last one came back (an open loop, as requests arrive at
	// a service), and a read's latency counts from when it was due.
	migrationReaders = 4
	readEvery        = 10 * time.Millisecond
	// The measured phases: the report holds its lock reportFor, the
	// migration starts migrationAfter into it.
	reportFor      = 1500 * time.Millisecond
	migrationAfter = 300 * time.Millisecond
	// The fix: give up after lockTimeout, retry after retryAfter.
	lockTimeout = 100 * time.Millisecond
	retryAfter  = 200 * time.Millisecond
)

// migrationLockQueue is the workload during check: the report runs until
// the end, the ALTER waits behind it, the readers queue behind the ALTER.
func migrationLockQueue(ctx context.Context, env *Env) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var g sessionGroup
	run := func(f func() error) { g.run(ctx, f) }
	run(func() error { return execAs(ctx, env.AppDSN(), fmt.Sprintf(migrationReport, 600.0)) })
	if err := waitFor(ctx, admin, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT count(*), pg_sleep%' AND state = 'active'`, 1); err != nil {
		return err
	}
	run(func() error { return execAs(ctx, env.Cluster.DSN(env.DB), `ALTER TABLE orders ADD COLUMN note text`) })
	run(func() error {
		_, err := openLoopReads(ctx, env)
		return err
	})
	if err := waitFor(ctx, admin, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = '`+migrationRead+`'`, migrationReaders); err != nil {
		return err
	}
	env.Ready()
	return g.wait()
}

// sessionGroup runs a workload's sessions side by side: wait returns the
// first error one of them met before the workload was ended.
type sessionGroup struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error
}

func (g *sessionGroup) run(ctx context.Context, f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil && ctx.Err() == nil {
			g.mu.Lock()
			g.first = cmp.Or(g.first, err)
			g.mu.Unlock()
		}
	}()
}

func (g *sessionGroup) wait() error {
	g.wg.Wait()
	return g.first
}

// execAs runs one statement on a connection of its own.
func execAs(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// waitForLimit bounds waitFor: a bound for a stalled machine, not a
// measure of speed (a loaded 2-core CI run took over 30 s to start the
// multixact scenarios' 20 member pages). The scenario's own readyLimit
// is longer.
const waitForLimit = 90 * time.Second

// waitFor polls a count until it reaches n.
func waitFor(ctx context.Context, conn *pgx.Conn, sql string, n int) error {
	deadline := time.Now().Add(waitForLimit)
	for {
		var got int
		if err := conn.QueryRow(ctx, sql).Scan(&got); err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %d (%s), saw %d", waitForLimit, n, sql, got)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// openLoopReads runs the readers until ctx ends and returns every read's
// latency in ms, from when it was due.
func openLoopReads(ctx context.Context, env *Env) ([]float64, error) {
	var mu sync.Mutex
	var lat []float64
	err := workers(ctx, env, migrationReaders, func(ctx context.Context, conn *pgx.Conn, w int) error {
		due := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(d):
				}
			}
			var total float64
			if err := conn.QueryRow(ctx, migrationRead, 1+(w*7919+i)%20000).Scan(&total); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			mu.Lock()
			lat = append(lat, float64(time.Since(due).Microseconds())/1000)
			mu.Unlock()
			due = due.Add(readEvery)
		}
		return nil
	})
	if ctx.Err() != nil {
		err = nil
	}
	return lat, err
}

// migrationPhase measures the readers' latencies while the report holds
// its lock and the migration adds column (as written, or with
// lock_timeout and retries).
func migrationPhase(ctx context.Context, env *Env, column string, withTimeout bool) (p99 float64, attempts int, err error) {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		lat []float64
		err error
	}
	reads := make(chan result, 1)
	go func() { l, err := openLoopReads(pctx, env); reads <- result{l, err} }()
	reportDone := make(chan error, 1)
	go func() { reportDone <- execAs(ctx, env.AppDSN(), fmt.Sprintf(migrationReport, reportFor.Seconds())) }()
	time.Sleep(migrationAfter)
	admin, err := env.Admin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer admin.Close(context.Background())
	alter := "ALTER TABLE orders ADD COLUMN " + column + " text"
	for {
		attempts++
		if withTimeout {
			if _, err := admin.Exec(ctx, fmt.Sprintf("SET lock_timeout = '%dms'", lockTimeout.Milliseconds())); err != nil {
				return 0, attempts, err
			}
		}
		_, err := admin.Exec(ctx, alter)
		var pgErr *pgconn.PgError
		if err == nil {
			break
		}
		if !withTimeout || !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			return 0, attempts, fmt.Errorf("%s: %w", alter, err)
		}
		time.Sleep(retryAfter)
	}
	if err := <-reportDone; err != nil {
		return 0, attempts, err
	}
	time.Sleep(300 * time.Millisecond) // reads after the migration, as the service goes on
	stop()
	r := <-reads
	if r.err != nil {
		return 0, attempts, r.err
	}
	sort.Float64s(r.lat)
	return model.Percentile(r.lat, 0.99), attempts, nil
}

// migrationLockQueueMeasure runs the migration as written and with
// lock_timeout plus retries, on the same report and readers, and
// verifies the lock-contention finding by the readers' p99.
func migrationLockQueueMeasure(ctx context.Context, env *Env, findings []model.Finding) error {
	before, _, err := migrationPhase(ctx, env, "note_as_written", false)
	if err != nil {
		return err
	}
	after, attempts, err := migrationPhase(ctx, env, "note_with_timeout", true)
	if err != nil {
		return err
	}
	env.Record("readers' p99 ms: migration as written", model.Round(before, 1))
	env.Record("readers' p99 ms: lock_timeout 100ms and retries", model.Round(after, 1))
	env.Record("migration attempts with lock_timeout", float64(attempts))
	for i := range findings {
		f := &findings[i]
		if f.Rule != "lock-contention" || !strings.Contains(f.Object.Name, "ALTER TABLE") {
			continue
		}
		f.Verification = model.Verification{
			Method: fmt.Sprintf("p99 latency of %d readers sending a read every %s while a %.1f s report holds its lock and the migration starts %.1f s in: as written, then with lock_timeout = %s and a retry every %s (%d attempts)",
				migrationReaders, readEvery, reportFor.Seconds(), migrationAfter.Seconds(), lockTimeout, retryAfter, attempts),
			Before: &model.Measure{Value: model.Round(before, 1), Unit: "ms"},
			After:  &model.Measure{Value: model.Round(after, 1), Unit: "ms"},
			Status: model.Refuted,
		}
		if after > 0 && before >= 2*after {
			f.Verification.Status = model.Confirmed
		}
	}
	return nil
}
