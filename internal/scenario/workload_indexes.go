package scenario

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// unreadIndexes is the audit log's life: a unique index built
// concurrently over targets that repeat, which fails and leaves the index
// invalid, as it does on any server; then inserts that write every index,
// and reads by primary key only.
func unreadIndexes(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX CONCURRENTLY audit_events_target_uniq ON audit_events (target)"); err == nil {
		return fmt.Errorf("the unique build over repeated targets succeeded: the scenario needs it to fail")
	}
	for i := 0; i < 20; i++ {
		if _, err := conn.Exec(ctx, `INSERT INTO audit_events (actor, action, target, detail)
			SELECT g % 500, 'act' || (g % 7), md5(random()::text), repeat(md5(g::text), 2) FROM generate_series(1, 500) g`); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "SELECT actor, action FROM audit_events WHERE id = $1", 4242+i); err != nil {
			return err
		}
	}
	return nil
}
