package scenario

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// The authorisation service's grants table (setup.sql) holds
// truncateLive grants that stay. Each round, a partner import adds
// truncateBatch trial grants at the table's end and the retention job
// deletes them once they expire, which leaves the end of the file empty
// for autovacuum (naptime 1 s, a threshold of 1,000 dead rows) to give
// back; the API reads grants by id all the while.
const (
	truncateLive    = 20000
	truncateBatch   = 12000
	truncateReaders = 6
	truncateRounds  = 2
	// truncateReadPace is the pause between one reader's reads.
	truncateReadPace = 5 * time.Millisecond
	truncateRead     = `SELECT role, stack_id, expires_at FROM access_grants WHERE id = $1`
)

// tailTruncation is Spacelift's GraphQL API degradation in small: every
// time the retention job empties the end of the grants table, autovacuum
// truncates it under ACCESS EXCLUSIVE, stretch by stretch, and the API's
// reads queue behind each stretch.
func tailTruncation(ctx context.Context, env *Env) error { return grantsRetention(ctx, env) }

// tailKept is its quiet counterpart: the same service with the fix,
// vacuum_truncate = false on the table (setup.sql), so autovacuum cleans
// the deleted grants and leaves the empty pages for the next import.
func tailKept(ctx context.Context, env *Env) error { return grantsRetention(ctx, env) }

func grantsRetention(parent context.Context, env *Env) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	jobErr := make(chan error, 1)
	go func() {
		err := retentionRounds(ctx, env)
		cancel() // a failed job ends the readers too
		jobErr <- err
	}()
	err := untilDone(ctx, truncateReaders, func(ctx context.Context, conn *pgx.Conn) error {
		var role string
		var stack int
		var expires time.Time
		err := conn.QueryRow(ctx, truncateRead, 1+rand.IntN(truncateLive)).Scan(&role, &stack, &expires)
		if err != nil && err != pgx.ErrNoRows {
			return err
		}
		// An API's requests come at a pace: up to 200 a second each, not
		// flat out on the lab's cores.
		select {
		case <-ctx.Done():
		case <-time.After(truncateReadPace):
		}
		return nil
	}, env)
	cancel()
	jerr := <-jobErr
	switch {
	case parent.Err() != nil:
		return nil
	case err != nil:
		return err
	}
	return jerr
}

// retentionRounds imports a batch of trial grants that expire at once,
// deletes them as the retention job does, and waits for autovacuum to
// clean the table before the next round. The lab is ready once
// truncateRounds rounds are cleaned (and, without the fix, truncated): a
// pattern in the server log, not one delete's aftermath.
func retentionRounds(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for round := 1; ctx.Err() == nil; round++ {
		var vacuums int64
		if err := conn.QueryRow(ctx, `SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'access_grants'`).Scan(&vacuums); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `INSERT INTO access_grants (account_id, stack_id, role, claims, expires_at)
			SELECT g % 2000, g % 30000, 'trial', repeat(md5(g::text), 12), now() FROM generate_series(1, $1::int) g`, truncateBatch); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `DELETE FROM access_grants WHERE expires_at <= now()`); err != nil {
			return err
		}
		if err := waitUntil(ctx, time.Minute, func() (bool, string, error) {
			var now int64
			err := conn.QueryRow(ctx, `SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'access_grants'`).Scan(&now)
			return now > vacuums, "autovacuum has not cleaned access_grants after the retention job", err
		}); err != nil {
			return err
		}
		if round == truncateRounds {
			env.Ready()
		}
	}
	return nil
}
