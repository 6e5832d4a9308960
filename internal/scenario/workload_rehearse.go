package scenario

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// loop is one client of an application that sends the same statement
// again and again: sql with the value arg gives (none when nil), then a
// pause of every.
type loop struct {
	every time.Duration
	sql   string
	arg   func() any
}

// runLoops runs each loop on a connection of its own, as the
// application's role, until ctx ends; the first error a client meets
// ends the workload.
func runLoops(ctx context.Context, env *Env, loops ...loop) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(loops))
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				if ctx.Err() == nil {
					errs <- err
				}
				return
			}
			defer conn.Close(context.Background())
			for ctx.Err() == nil {
				var args []any
				if l.arg != nil {
					args = append(args, l.arg())
				}
				rows, err := conn.Query(ctx, l.sql, args...)
				if err == nil {
					rows.Close()
					err = rows.Err()
				}
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(l.every):
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// shopTraffic is the migration-rehearsal scenario's
// application, run until ctx ends: four readers look an order up every
// 20 ms, a writer updates a total every 25 ms, and a report reads every
// order for 1.2 s (it holds AccessShareLock on orders that long) every
// 1.8 s.
func shopTraffic(ctx context.Context, env *Env) error {
	id := func() any { return 1 + rand.IntN(30000) }
	read := loop{20 * time.Millisecond, `SELECT total, placed FROM orders WHERE id = $1`, id}
	return runLoops(ctx, env, read, read, read, read,
		loop{25 * time.Millisecond, `UPDATE orders SET total = total + 1 WHERE id = $1`, id},
		loop{600 * time.Millisecond, `SELECT count(*), sum(total), pg_sleep(1.2) FROM orders`, nil})
}

// orderReports is the upgrade-jit scenario's application, run until ctx
// ends: two clients ask for a customer's orders with their totals (a
// subquery over 32 hash partitions) every 150 ms, as an account page
// does.
func orderReports(ctx context.Context, env *Env) error {
	report := loop{150 * time.Millisecond, `SELECT o.id, o.created_at, (SELECT sum(l.amount) FROM order_lines l WHERE l.order_id = o.id) AS total
  FROM orders o WHERE o.customer_id = $1`, func() any { return 1 + rand.IntN(10) }}
	return runLoops(ctx, env, report, report)
}

// shopLookups is the upgrade-quiet scenario's application, run until ctx
// ends: three readers look an order up every 20 ms and a writer updates
// a total every 50 ms, statements no major plans or runs differently.
func shopLookups(ctx context.Context, env *Env) error {
	id := func() any { return 1 + rand.IntN(5000) }
	read := loop{20 * time.Millisecond, `SELECT total, placed FROM orders WHERE id = $1`, id}
	return runLoops(ctx, env, read, read, read, loop{50 * time.Millisecond, `UPDATE orders SET total = total + 1 WHERE id = $1`, id})
}
