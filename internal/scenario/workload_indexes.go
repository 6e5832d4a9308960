package scenario

import (
	"context"
	"fmt"

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
