package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// indexBuildWriters are the help desk's sessions inserting tickets.
const indexBuildWriters = 3

// indexBuildBlocks builds an index on tickets with a plain CREATE INDEX,
// over and over (each build about 3 s: its expression sleeps a millisecond
// a row), while writers insert tickets, which queue behind the build's
// SHARE lock. It is ready once the writers wait behind a build.
func indexBuildBlocks(ctx context.Context, env *Env) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	builder, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer builder.Close(context.Background())
	built := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if _, err := builder.Exec(ctx, `CREATE INDEX tickets_bucket ON tickets (account_bucket(account_id))`); err != nil {
				built <- err
				return
			}
			if _, err := builder.Exec(ctx, `DROP INDEX tickets_bucket`); err != nil {
				built <- err
				return
			}
		}
		built <- ctx.Err()
	}()
	if err := waitFor(ctx, admin, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX tickets_bucket%' AND state = 'active'`, 1); err != nil {
		return err
	}
	wrote := make(chan error, 1)
	go func() {
		wrote <- workers(ctx, env, indexBuildWriters, func(ctx context.Context, conn *pgx.Conn, w int) error {
			for i := 0; ctx.Err() == nil; i++ {
				// Literal values, as the desk's ORM writes them: the
				// rehearsal replays the statement as the sampler saw it.
				q := fmt.Sprintf(`INSERT INTO tickets (account_id, subject) VALUES (%d, 'printer jam %d')`, (w*31+i)%500, i)
				if _, err := conn.Exec(ctx, q); err != nil {
					return err
				}
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
			return nil
		})
	}()
	if err := waitFor(ctx, admin, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO tickets%'`, indexBuildWriters); err != nil {
		return err
	}
	env.Ready()
	<-ctx.Done()
	for _, err := range []error{<-built, <-wrote} {
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return err
		}
	}
	return ctx.Err()
}
