package scenario

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// freezeGID is the settlement left prepared by freeze-held-back.
const freezeGID = "settle-20261127-0042"

// freezeHeldBack prepares a settlement and never finishes it, then
// consumes 160,000 transaction ids, one transaction each, and goes on at
// a steady pace while check samples (the rate check measures). The
// prepared transaction is rolled back when the workload ends.
func freezeHeldBack(ctx context.Context, env *Env) error {
	defer rollbackPrepared(env)
	if err := leavePrepared(ctx, env, freezeGID, "INSERT INTO ledger_entries (account, cents) VALUES (42, -1999)"); err != nil {
		return err
	}
	app, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
	if _, err := app.Exec(ctx, "CALL consume_xids(160000)"); err != nil {
		return err
	}
	env.Ready()
	for {
		if _, err := app.Exec(ctx, "CALL consume_xids(200)"); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
