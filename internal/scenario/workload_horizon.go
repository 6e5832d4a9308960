package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
)

// heldBackGID is the prepared transaction the vacuum-held-back scenario
// leaves behind, as a crashed two-phase coordinator would.
const heldBackGID = "pay-4711-coordinator-2"

// vacuumHeldBack prepares a payment's transaction and never finishes it
// (its session closes, as the coordinator's did when it crashed); then
// renews seat holds, one transaction each, and runs VACUUM as autovacuum
// would, which can remove none of the versions the renewals left. The
// prepared transaction outlives every session, so it is rolled back when
// the workload ends.
func vacuumHeldBack(ctx context.Context, env *Env) error {
	defer rollbackPrepared(env)
	if err := leavePrepared(ctx, env, heldBackGID, "UPDATE payments SET state = 'reserved' WHERE id = 4711"); err != nil {
		return err
	}
	app, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
	for i := 0; i < 3000; i++ {
		if _, err := app.Exec(ctx, "UPDATE seat_holds SET holder = $1, held_until = now() + interval '10 minutes' WHERE seat_id = $2",
			fmt.Sprintf("user-%d", i), 1+rand.IntN(20000)); err != nil {
			return err
		}
	}
	if _, err := app.Exec(ctx, "VACUUM seat_holds"); err != nil {
		return err
	}
	env.Ready()
	<-ctx.Done()
	return ctx.Err()
}

// leavePrepared runs stmt in a transaction it prepares as gid and then
// closes its session, as a two-phase coordinator that crashed after
// PREPARE TRANSACTION does: the transaction outlives every session.
func leavePrepared(ctx context.Context, env *Env, gid, stmt string) error {
	coord, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer coord.Close(context.Background())
	if err := execAll(ctx, coord, "BEGIN", stmt, fmt.Sprintf("PREPARE TRANSACTION '%s'", gid)); err != nil {
		return fmt.Errorf("preparing transaction %s (the lab sets max_prepared_transactions): %w", gid, err)
	}
	return nil
}

// rollbackPrepared rolls back the scenario's prepared transactions, which
// would otherwise hold their database's horizon (and keep it from being
// dropped) after the scenario.
func rollbackPrepared(env *Env) {
	ctx := context.Background()
	admin, err := env.Admin(ctx)
	if err != nil {
		env.Log("rolling back the prepared transactions: %v", err)
		return
	}
	defer admin.Close(ctx)
	rows, err := admin.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
	if err != nil {
		env.Log("listing the prepared transactions: %v", err)
		return
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		env.Log("listing the prepared transactions: %v", err)
		return
	}
	for _, gid := range gids {
		if _, err := admin.Exec(ctx, "ROLLBACK PREPARED '"+gid+"'"); err != nil {
			env.Log("ROLLBACK PREPARED %s: %v", gid, err)
		}
	}
}
