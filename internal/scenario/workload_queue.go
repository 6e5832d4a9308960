package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/model"
)

// The job-queue incident (Channable's image downloader): the poll, the
// claim race and the churn need Go, the first two for concurrent sessions,
// all three for the figures they measure themselves.

const (
	pollWorkers = 3
	pollRounds  = 5
)

// pollClaim is the downloader's claim: it locks correctly (SKIP LOCKED),
// but its poll filters on two timestamps and IS NULL and sorts by one of
// them, while the table only has an index on download_after. The index
// walks all the rows that were downloaded long ago before it finds pending
// ones.
const pollClaim = `UPDATE image_links il SET queued_at = now()
  FROM (SELECT id FROM image_links
         WHERE download_after < $1 AND referenced_at > $2 AND queued_at IS NULL
         ORDER BY download_after LIMIT $3
         FOR UPDATE SKIP LOCKED) sub
 WHERE il.id = sub.id`

// queuePoll polls from several workers at once, passing the current time
// as the application does, and records the mean poll time.
func queuePoll(ctx context.Context, env *Env) error {
	var mu sync.Mutex
	var total time.Duration
	polls := 0
	err := workers(ctx, env, pollWorkers, func(ctx context.Context, conn *pgx.Conn, w int) error {
		for r := 0; r < pollRounds; r++ {
			now := time.Now()
			start := time.Now()
			if _, err := conn.Exec(ctx, pollClaim, now, now.Add(-36*time.Hour), 100); err != nil {
				return err
			}
			mu.Lock()
			total += time.Since(start)
			polls++
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	env.Record("poll claim mean ms (workload, before the fix)", model.Round(float64(total.Microseconds())/1000/float64(polls), 1))
	return nil
}

const (
	claimWorkers = 4
	claimRounds  = 12
)

// Two claims over twin tables: the racy one picks rows in a subquery
// without locking them; the safe one adds FOR UPDATE SKIP LOCKED.
const (
	racyClaim = `UPDATE tasks t SET claimed_by = $1, claimed_at = now()
  FROM (SELECT id FROM tasks WHERE claimed_at IS NULL ORDER BY id LIMIT 10) sub
 WHERE t.id = sub.id RETURNING t.id`
	safeClaim = `UPDATE tasks_safe t SET claimed_by = $1, claimed_at = now()
  FROM (SELECT id FROM tasks_safe WHERE claimed_at IS NULL ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED) sub
 WHERE t.id = sub.id RETURNING t.id`
)

// queueClaimRace races the two claims and fails when the racy one claims
// no row twice (the scenario did not reproduce) or the safe one does.
func queueClaimRace(ctx context.Context, env *Env) error {
	for _, c := range []struct {
		sql, metric string
		wantDup     bool
	}{{racyClaim, "rows claimed twice without SKIP LOCKED", true}, {safeClaim, "rows claimed twice with FOR UPDATE SKIP LOCKED", false}} {
		dups, claimed, err := raceClaims(ctx, env, c.sql)
		if err != nil {
			return err
		}
		env.Record(c.metric, float64(dups))
		if c.wantDup {
			env.Record("rows claimed without SKIP LOCKED (incl. duplicates)", float64(claimed))
		}
		if c.wantDup != (dups > 0) {
			return fmt.Errorf("the claim workload did not reproduce: %d duplicates for %q", dups, c.metric)
		}
	}
	return nil
}

// raceClaims runs the claim from several workers that start each round
// together (as pollers woken by the same tick), each holding its claim
// for a moment of "work" before committing, and counts rows claimed more
// than once.
func raceClaims(ctx context.Context, env *Env, claim string) (dups, claimed int, err error) {
	var mu sync.Mutex
	seen := map[int64]int{}
	var start [claimRounds]sync.WaitGroup
	for r := range start {
		start[r].Add(claimWorkers)
	}
	err = workers(ctx, env, claimWorkers, func(ctx context.Context, conn *pgx.Conn, w int) error {
		// A worker that fails still arrives at the remaining barriers, so
		// the others are not left waiting for it.
		arrived := 0
		defer func() {
			for ; arrived < claimRounds; arrived++ {
				start[arrived].Done()
			}
		}()
		for r := 0; r < claimRounds; r++ {
			start[r].Done()
			arrived++
			start[r].Wait()
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, claim, w)
			if err != nil {
				tx.Rollback(ctx)
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				tx.Rollback(ctx)
				return err
			}
			time.Sleep(20 * time.Millisecond)
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			mu.Lock()
			for _, id := range ids {
				seen[id]++
				claimed++
			}
			mu.Unlock()
		}
		return nil
	})
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	return dups, claimed, err
}

const (
	churnPending = 300000
	churnClaims  = 30
	churnBatch   = 5000
)

// queueChurn inserts new jobs, claims them in batches and purges the old
// ones, on a table autovacuum does not visit.
func queueChurn(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO events_queue (kind, payload) SELECT 'webhook', repeat('y', 100) FROM generate_series(1, $1::int)`, churnPending); err != nil {
		return err
	}
	for i := 0; i < churnClaims; i++ {
		if _, err := conn.Exec(ctx, `UPDATE events_queue SET processed_at = now()
			WHERE id IN (SELECT id FROM events_queue WHERE processed_at IS NULL ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)`, churnBatch); err != nil {
			return err
		}
		if i%10 == 0 {
			var depth int64
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM events_queue WHERE processed_at IS NULL`).Scan(&depth); err != nil {
				return err
			}
		}
	}
	if _, err := conn.Exec(ctx, `DELETE FROM events_queue WHERE processed_at < now() - interval '12 hours'`); err != nil {
		return err
	}
	var depth int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM events_queue WHERE processed_at IS NULL`).Scan(&depth); err != nil {
		return err
	}
	env.Record("pending jobs (actual)", float64(depth))
	return nil
}

// workers runs fn on n connections at once and returns the first error.
func workers(ctx context.Context, env *Env, n int, fn func(ctx context.Context, conn *pgx.Conn, w int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				errs <- err
				cancel()
				return
			}
			defer conn.Close(context.Background())
			if err := fn(ctx, conn, w); err != nil {
				errs <- err
				cancel()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	return <-errs
}
