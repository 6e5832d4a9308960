package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// A billing service's backfill (setup.sql): usage events are inserted
// for a handful of accounts by many workers at once, each in its own
// transaction. Every insert's foreign-key check takes FOR KEY SHARE on the
// account's row, so the lockers of one account make a multixact, and each
// new locker a new one that copies all the members before it.
const (
	backfillWorkers = 8
	backfillInsert  = `INSERT INTO usage_events (account_id, meter, quantity) VALUES ($1, $2, $3)`
	// The member space a server that has run such backfills for years has
	// used: 45% of its 2^32 entries, set with pg_resetwal -O at a segment's
	// first entry (52,352 members a segment), where the server starts a new
	// page instead of reading one that is not there.
	membersOffset = 36918 * 52352
	// memberPages is the member pages the server has started, under the
	// name pg_stat_slru gives them in each major (MultiXactMember before 17,
	// multixact_member since).
	memberPages = `SELECT coalesce(sum(blks_zeroed), 0)::int FROM pg_stat_slru WHERE lower(replace(name, '_', '')) = 'multixactmember'`
)

// multixactMembers is Metronome's incident in small: the member space
// nearly half used while the multixact ids' age is a few thousand, and
// the backfill filling it at tens of thousands of entries a second.
func multixactMembers(ctx context.Context, env *Env) error {
	return backfillNearTheLimit(ctx, env, false)
}

// multixactReclaimed is its quiet counterpart: the same space used and
// the same backfill, on a server whose autovacuum_multixact_freeze_max_age
// (10,000, its floor) has autovacuum freeze every database's multixacts as
// soon as the backfill makes them old, which gives the space back.
func multixactReclaimed(ctx context.Context, env *Env) error {
	return backfillNearTheLimit(ctx, env, true)
}

func backfillNearTheLimit(ctx context.Context, env *Env, reclaimed bool) error {
	// One multixact before the jump: the oldest, at offset 1, which every
	// database's datminmxid still refers to.
	if err := twoLockers(ctx, env); err != nil {
		return err
	}
	if err := env.Cluster.ResetWAL(ctx, "-O", strconv.Itoa(membersOffset)); err != nil {
		return err
	}
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	// The backfill as Metronome's ran it: many workers, each transaction
	// inserting for one of a few accounts.
	concurrent, stopConcurrent := context.WithCancel(ctx)
	defer stopConcurrent()
	var g sessionGroup
	g.run(concurrent, func() error {
		return untilDone(concurrent, backfillWorkers, func(ctx context.Context, conn *pgx.Conn) error {
			return backfillBatch(ctx, conn, 1+rand.IntN(3), 2)
		}, env)
	})
	// Ready once the backfill has started member pages of its own.
	if err := waitFor(ctx, admin, memberPages, 20); err != nil {
		return err
	}
	if reclaimed {
		// The fix: the backfill spread out (one writer, each account's
		// events in one transaction, which takes no shared lock another
		// holds), and the lower freeze age, with which autovacuum freezes
		// every database past the multixacts the concurrent backfill made.
		// Ready once every database is younger than that age (otherwise
		// the ages wraparound judges against 10,000 are the old ones) and
		// a checkpoint has recorded the offsets since.
		stopConcurrent()
		if err := g.wait(); err != nil {
			return err
		}
		var spread sessionGroup
		defer spread.wait()
		spread.run(ctx, func() error {
			return untilDone(ctx, 1, func(ctx context.Context, conn *pgx.Conn) error {
				return backfillBatch(ctx, conn, 1+rand.IntN(3), 20)
			}, env)
		})
		if err := waitFor(ctx, admin, `SELECT (max(mxid_age(datminmxid)) < 10000)::int FROM pg_database`, 1); err != nil {
			return err
		}
		if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
			return fmt.Errorf("checkpoint after the freeze: %w", err)
		}
		env.Ready()
		return spread.wait()
	}
	env.Ready()
	return g.wait()
}

// backfillBatch inserts n usage events for one account in one
// transaction.
func backfillBatch(ctx context.Context, conn *pgx.Conn, account, n int) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	for i := 0; i < n; i++ {
		if _, err := tx.Exec(ctx, backfillInsert, account, "api_calls", 1+rand.IntN(100)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// twoLockers inserts a usage event for the same account from two open
// transactions: the second foreign-key check joins the first one's lock
// on the account's row, which makes a multixact of the two.
func twoLockers(ctx context.Context, env *Env) error {
	var txs []pgx.Tx
	defer func() {
		for _, tx := range txs {
			tx.Rollback(context.Background())
			tx.Conn().Close(context.Background())
		}
	}()
	for i := 0; i < 2; i++ {
		conn, err := pgx.Connect(ctx, env.AppDSN())
		if err != nil {
			return err
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			conn.Close(context.Background())
			return err
		}
		txs = append(txs, tx)
		if _, err := tx.Exec(ctx, backfillInsert, 1, "api_calls", 1); err != nil {
			return fmt.Errorf("the first multixact: %w", err)
		}
	}
	for _, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}
