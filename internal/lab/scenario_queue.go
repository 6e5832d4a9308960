package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The job-queue incident (Channable's image downloader), in four parts.

const (
	pollRows    = 1200000
	pollPending = 48000 // the newest 4% are still waiting
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

func queuePoll() Scenario {
	return Scenario{
		Name:    "queue-poll",
		Summary: "1.2M-row job queue polled on two timestamps and IS NULL with only a single-column index; the partial index must be proposed and measured",
		Expect:  []Expect{{Rule: "missing-index", Object: "image_links", Confirmed: true, MinRatio: 5}},
		MustNot: []Expect{{Rule: "queue-claim-race"}, {Rule: "random-primary-key"}},
		Setup: func(ctx context.Context, env *Env) error {
			return env.execApp(ctx,
				`CREATE TABLE image_links (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, image_link text NOT NULL,
				   download_after timestamptz NOT NULL, referenced_at timestamptz NOT NULL, queued_at timestamptz)`,
				fmt.Sprintf(`INSERT INTO image_links (image_link, download_after, referenced_at, queued_at)
				 SELECT 'https://img.example.com/' || g || '.jpg',
				        now() - interval '30 days' + g * interval '2 seconds',
				        now() - interval '30 days' + g * interval '2 seconds' + random() * interval '2 days',
				        CASE WHEN g <= %d THEN now() - interval '30 days' + g * interval '2 seconds' + interval '1 minute' END
				   FROM generate_series(1, %d) g`, pollRows-pollPending, pollRows),
				`CREATE INDEX image_links_download_after_idx ON image_links (download_after)`,
				`VACUUM ANALYZE image_links`,
			)
		},
		Workload: func(ctx context.Context, env *Env) error {
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
			env.Record("poll claim mean ms (workload, before the fix)", round1(float64(total.Microseconds())/1000/float64(polls)))
			return nil
		},
	}
}

const (
	claimRows    = 20000
	claimWorkers = 4
	claimRounds  = 12
	claimBatch   = 10
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

func queueClaimRace() Scenario {
	return Scenario{
		Name:    "queue-claim-race",
		Summary: "4 concurrent Go workers claim jobs without SKIP LOCKED (rows claimed twice) and, on a twin table, with it (none)",
		Expect:  []Expect{{Rule: "queue-claim-race", Object: "public.tasks:"}},
		MustNot: []Expect{{Rule: "queue-claim-race", Object: "tasks_safe"}, {Rule: "missing-index"}},
		Setup: func(ctx context.Context, env *Env) error {
			var stmts []string
			for _, t := range []string{"tasks", "tasks_safe"} {
				stmts = append(stmts,
					fmt.Sprintf(`CREATE TABLE %s (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload text NOT NULL,
					  claimed_by int, claimed_at timestamptz)`, t),
					fmt.Sprintf(`CREATE INDEX %s_unclaimed_idx ON %s (id) WHERE claimed_at IS NULL`, t, t),
					fmt.Sprintf(`INSERT INTO %s (payload) SELECT 'job ' || g FROM generate_series(1, %d) g`, t, claimRows),
					fmt.Sprintf(`VACUUM ANALYZE %s`, t))
			}
			return env.execApp(ctx, stmts...)
		},
		Workload: func(ctx context.Context, env *Env) error {
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
		},
	}
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
	keyRows   = 1000000
	keyInsert = 20000 // rows inserted by the workload right after a checkpoint
	keyBatch  = 500
)

// randomKeys loads three tables of the same size, one row at a time into
// their primary key (as an application would), keyed by uuid v4, by a
// SHA256 hash and by a bigint identity, then inserts more rows right after
// a checkpoint so pg_stat_statements sees the full-page writes.
func randomKeys() Scenario {
	tables := []struct{ name, create, insert string }{
		{"uploads", `CREATE TABLE uploads (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
			`INSERT INTO uploads (name) SELECT 'file-' || g FROM generate_series($1::int, $2::int) g`},
		{"image_hashes", `CREATE TABLE image_hashes (id bytea PRIMARY KEY, url text NOT NULL)`,
			`INSERT INTO image_hashes (id, url) SELECT sha256(('https://img.example.com/' || g)::bytea), 'https://img.example.com/' || g FROM generate_series($1::int, $2::int) g`},
		{"image_links_seq", `CREATE TABLE image_links_seq (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, url text NOT NULL)`,
			`INSERT INTO image_links_seq (url) SELECT 'https://img.example.com/' || g FROM generate_series($1::int, $2::int) g`},
	}
	return Scenario{
		Name:    "random-keys",
		Summary: "1M rows each keyed by uuid v4, by SHA256 bytea and by bigint identity; the random two must be flagged, the identity twin not",
		Expect:  []Expect{{Rule: "random-primary-key", Object: "uploads_pkey"}, {Rule: "random-primary-key", Object: "image_hashes_pkey"}},
		MustNot: []Expect{{Rule: "random-primary-key", Object: "image_links_seq"}},
		Setup: func(ctx context.Context, env *Env) error {
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			for _, t := range tables {
				if err := execAll(ctx, conn, t.create); err != nil {
					return err
				}
				if _, err := conn.Exec(ctx, t.insert, 1, keyRows); err != nil {
					return fmt.Errorf("loading %s: %w", t.name, err)
				}
			}
			return execAll(ctx, conn, `ANALYZE uploads, image_hashes, image_links_seq`)
		},
		Workload: func(ctx context.Context, env *Env) error {
			admin, err := env.Admin(ctx)
			if err != nil {
				return err
			}
			defer admin.Close(context.Background())
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			for _, t := range tables {
				// Full-page writes happen on the first change of a page
				// after a checkpoint: start each table's inserts right after one.
				if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
					return err
				}
				for lo := keyRows + 1; lo <= keyRows+keyInsert; lo += keyBatch {
					if _, err := conn.Exec(ctx, t.insert, lo, lo+keyBatch-1); err != nil {
						return fmt.Errorf("inserting into %s: %w", t.name, err)
					}
				}
				// pg_stat_statements counts at the end of each statement
				// (pg_stat_wal only when the backend flushes its stats).
				var fpi, rows float64
				if err := admin.QueryRow(ctx, `SELECT coalesce(sum(wal_fpi), 0)::float8, coalesce(sum(rows), 0)::float8 FROM pg_stat_statements
					WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE $1`, "INSERT INTO "+t.name+" %").Scan(&fpi, &rows); err != nil {
					return err
				}
				var corr, density, frag, idx, heap float64
				if err := admin.QueryRow(ctx, `SELECT s.correlation, i.avg_leaf_density, i.leaf_fragmentation,
					pg_relation_size($1::regclass), pg_relation_size($2::regclass)
					FROM pg_stats s, pgstatindex($1::regclass) i
					WHERE s.tablename = $3 AND s.attname = 'id'`, t.name+"_pkey", t.name, t.name).Scan(&corr, &density, &frag, &idx, &heap); err != nil {
					return fmt.Errorf("measuring %s: %w", t.name, err)
				}
				env.Record(t.name+": pg_stats.correlation of id", round4(corr))
				env.Record(t.name+": avg leaf density %", round1(density))
				env.Record(t.name+": leaf fragmentation %", round1(frag))
				env.Record(t.name+": pkey size / heap size", round4(idx/heap))
				env.Record(t.name+": WAL full-page images per inserted row", round4(fpi/rows))
			}
			return nil
		},
	}
}

const (
	churnRows    = 200000
	churnPending = 300000
	churnClaims  = 30
	churnBatch   = 5000
)

// queueChurn is a queue table with autovacuum switched off: 200k done jobs
// analysed, then 300k new jobs, claims that set processed_at (a column in
// the partial index's predicate, so no claim can be HOT), and a purge of
// the old jobs. The statistics still say every job is done.
func queueChurn() Scenario {
	return Scenario{
		Name:    "queue-churn",
		Summary: "queue table with autovacuum off after inserts, claims and a purge: bloated, never-HOT updates, stale statistics",
		Expect: []Expect{{Rule: "table-bloat", Object: "events_queue", Confirmed: true, MinRatio: 1.5}, {Rule: "table-bloat", Object: "events_queue (updates)"},
			{Rule: "stale-statistics", Object: "events_queue", Confirmed: true, MinRatio: 10}},
		MustNot: []Expect{{Rule: "random-primary-key"}, {Rule: "queue-claim-race"}},
		Setup: func(ctx context.Context, env *Env) error {
			return env.execApp(ctx,
				`CREATE TABLE events_queue (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind text NOT NULL, payload text NOT NULL,
				   created_at timestamptz NOT NULL DEFAULT now(), processed_at timestamptz) WITH (autovacuum_enabled = off)`,
				`CREATE INDEX events_queue_pending_idx ON events_queue (created_at) WHERE processed_at IS NULL`,
				fmt.Sprintf(`INSERT INTO events_queue (kind, payload, created_at, processed_at)
				  SELECT 'webhook', repeat('x', 100), now() - interval '2 days' + g * interval '100 ms', now() - interval '1 day'
				    FROM generate_series(1, %d) g`, churnRows),
				`ANALYZE events_queue`,
			)
		},
		Workload: func(ctx context.Context, env *Env) error {
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
		},
	}
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

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
func round4(x float64) float64 {
	if x < 0 {
		return -round4(-x)
	}
	return float64(int64(x*10000+0.5)) / 10000
}
