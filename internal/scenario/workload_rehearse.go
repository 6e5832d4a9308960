package scenario

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// shopTraffic is the migration-rehearsal scenario's application, run
// until ctx ends: four readers look an order up every 10 ms, a writer
// updates a total every 25 ms, and a report reads every order for 1.2 s
// (it holds AccessShareLock on orders that long) every 1.8 s.
func shopTraffic(ctx context.Context, env *Env) error {
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	client := func(every time.Duration, sql string, arg func() any) {
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
				if arg != nil {
					args = append(args, arg())
				}
				if _, err := conn.Exec(ctx, sql, args...); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(every):
				}
			}
		}()
	}
	id := func() any { return 1 + rand.IntN(100000) }
	for range 4 {
		client(10*time.Millisecond, `SELECT total, placed FROM orders WHERE id = $1`, id)
	}
	client(25*time.Millisecond, `UPDATE orders SET total = total + 1 WHERE id = $1`, id)
	client(600*time.Millisecond, `SELECT count(*), sum(total), pg_sleep(1.2) FROM orders`, nil)
	wg.Wait()
	close(errs)
	return <-errs
}

// orderReports is the upgrade-jit scenario's application, run until ctx
// ends: a client asks for a customer's orders with their totals (a
// subquery over 32 hash partitions) every 250 ms, as an account page
// does.
func orderReports(ctx context.Context, env *Env) error {
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 1 {
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
				rows, err := conn.Query(ctx, `SELECT o.id, o.created_at, (SELECT sum(l.amount) FROM order_lines l WHERE l.order_id = o.id) AS total
  FROM orders o WHERE o.customer_id = $1`, 1+rand.IntN(20))
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
				case <-time.After(250 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
