package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The session scenarios run while check samples: their sessions must be
// in the state they reproduce when the sampler looks, so each workload
// runs until check is done (ctx ends) and then leaves nothing behind.

// lockChain holds a row lock in a transaction the client leaves idle,
// while three sessions queue to update the same row.
func lockChain(ctx context.Context, env *Env) error {
	holder, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 5 WHERE id = 1`); err != nil {
		return err
	}
	// The client now does something else (a remote call, say) and
	// leaves its transaction open: its row lock stays held. Six writers
	// queue behind it on a two-core server: active, none on CPU, so no
	// connection pressure.
	return untilDone(ctx, 6, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = 1`)
		return err
	}, env)
}

// clientStall reproduces a client whose work between statements stalls
// its transactions: each worker inserts (a millisecond on the server),
// then blocks for seconds as a busy event loop would, then commits; and a
// reader fetches a large result a row at a time, slower than the server
// sends it.
func clientStall(ctx context.Context, env *Env) error {
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- stalledWriter(ctx, env, w)
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- slowReader(ctx, env)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

func stalledWriter(ctx context.Context, env *Env, w int) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i := 0; ctx.Err() == nil; i++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO exports (batch, payload) VALUES ($1, $2)`, fmt.Sprintf("w%d-%d", w, i), "event"); err != nil {
			tx.Rollback(context.Background())
			return err
		}
		select { // the event loop is busy elsewhere
		case <-ctx.Done():
		case <-time.After(2500 * time.Millisecond):
		}
		if err := tx.Commit(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

func slowReader(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for ctx.Err() == nil {
		rows, err := conn.Query(ctx, `SELECT g, repeat('x', 1000) FROM generate_series(1, 200000) g`)
		if err != nil {
			return err
		}
		for rows.Next() && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		rows.Close()
	}
	return nil
}

// connectionBurst opens many more sessions than the server has cores, each
// busy all the time, as an autoscaled fleet of application servers does.
// Busy means on CPU: a statement that computes (about 20 ms of a core
// alone), not one that sleeps, which waits without wanting a core.
func connectionBurst(ctx context.Context, env *Env) error {
	return untilDone(ctx, 24, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 200000) g WHERE g % 7 = 3`)
		return err
	}, env)
}

// untilDone runs fn over and over on n connections until ctx ends; an
// error caused by ctx ending is not one.
func untilDone(ctx context.Context, n int, fn func(context.Context, *pgx.Conn) error, env *Env) error {
	err := workers(ctx, env, n, func(ctx context.Context, conn *pgx.Conn, _ int) error {
		for ctx.Err() == nil {
			if err := fn(ctx, conn); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// poolSaturation sends twelve clients through a PgBouncer pool of two
// server connections, each running short transactions back to back: the
// clients queue in the pool, and the server sees only two sessions.
func poolSaturation(ctx context.Context, env *Env) error { return pooledClients(ctx, env, 12) }

// poolRoomy is its quiet counterpart: two clients, a pool of four.
func poolRoomy(ctx context.Context, env *Env) error { return pooledClients(ctx, env, 2) }

// pooledClients runs n clients through the scenario's PgBouncer, each
// running a short transaction after another until ctx ends.
func pooledClients(ctx context.Context, env *Env, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := pgx.ParseConfig(env.BouncerDSN())
			if err != nil {
				errs <- err
				return
			}
			// Transaction pooling hands each transaction a different
			// server connection: no server-side prepared statements.
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(context.Background())
			for ctx.Err() == nil {
				if _, err := conn.Exec(ctx, `SELECT pg_sleep(0.05)`); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
