package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// unreadIndexes is the audit log's life: a unique index built
// concurrently over targets that repeat, which fails and leaves the index
// invalid, as it does on any server; then inserts that write every index,
// one transaction each, and reads by primary key only.
func unreadIndexes(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX CONCURRENTLY audit_events_target_uniq ON audit_events (target)"); err == nil {
		return fmt.Errorf("the unique build over repeated targets succeeded: the scenario needs it to fail")
	}
	if err := cancelledAfterReady(ctx, env, conn); err != nil {
		return err
	}
	// One event per transaction, as an audit log writes them: 6,000
	// transactions age every index past the point where "never scanned"
	// means something.
	for i := 0; i < 6000; i++ {
		if _, err := conn.Exec(ctx, `INSERT INTO audit_events (actor, action, target, detail)
			VALUES ($1 % 500, 'act' || ($1 % 7), md5(random()::text), repeat(md5($1::text), 2))`, i); err != nil {
			return err
		}
		if i%300 == 0 {
			if _, err := conn.Exec(ctx, "SELECT actor, action FROM audit_events WHERE id = $1", 4242+i); err != nil {
				return err
			}
		}
	}
	return nil
}

// cancelledAfterReady leaves an index invalid but ready, as a concurrent
// build cancelled in its last phase does (a deploy's timeout, an
// operator's Ctrl-C): the build marks the index ready once it is built,
// validates it, then waits for every snapshot older than its own before
// it marks it valid. A report's transaction holds such a snapshot; the
// build is cancelled while it waits for it, and every later insert
// writes the index that no plan reads.
func cancelledAfterReady(ctx context.Context, env *Env, conn *pgx.Conn) error {
	report, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer report.Close(context.Background())
	tx, err := report.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
		return err
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return err
	}
	build := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "CREATE INDEX CONCURRENTLY audit_events_actor_at_idx ON audit_events (actor, at)")
		build <- err
	}()
	watcher, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer watcher.Close(context.Background())
	for {
		var waiting bool
		if err := watcher.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE c.relname = 'audit_events_actor_at_idx' AND i.indisready)
			AND EXISTS (SELECT FROM pg_stat_progress_create_index WHERE pid = $1 AND phase = 'waiting for old snapshots')`, pid).Scan(&waiting); err != nil {
			return err
		}
		if waiting {
			break
		}
		select {
		case err := <-build:
			return fmt.Errorf("the concurrent build ended before it waited for the report's snapshot: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := watcher.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
		return err
	}
	if err := <-build; err == nil {
		return fmt.Errorf("the cancelled build succeeded: the scenario needs it to fail")
	}
	return nil
}
