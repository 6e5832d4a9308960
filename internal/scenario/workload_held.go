package scenario

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// Connections held idle until the server refuses new ones: an
// application whose workers each open a connection of their own and keep
// it for the next request, on a server whose max_connections they fill
// (the scenario's own cluster has 20, three of them reserved). Newcomers
// (another instance scaled out, a cron job) are refused with SQLSTATE
// 53300, which the server logs. The pooled twin runs the same workers
// through PgBouncer: twenty clients, four server connections, nobody
// refused.

const (
	heldWorkers  = 17                     // max_connections less the superuser's reserved slots
	heldLate     = 3                      // clients more than the slots
	heldThink    = 250 * time.Millisecond // a worker waits for its next request
	heldLookup   = `SELECT id, status, total FROM orders WHERE id = $1`
	heldMinFails = 3
)

// heldSessions is the workload of connections-held-idle (pooled false)
// and connections-pooled (through the scenario's PgBouncer): twenty
// clients each open a connection and keep it; those the server refuses
// (whichever come last) try again after their idle time, and the
// refusals are recorded. Ready once the server has refused a few (pooled:
// once every client is in).
func heldSessions(pooled bool) Workload {
	return func(ctx context.Context, env *Env) error {
		dsn := env.AppDSN()
		if pooled {
			dsn = env.BouncerDSN()
		}
		var held, refused atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, heldWorkers+heldLate)
		client := func(i int) {
			defer wg.Done()
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for n := 0; ctx.Err() == nil; n++ {
				if conn == nil {
					c, err := connectApp(ctx, dsn, pooled)
					switch {
					case err == nil:
						conn = c
						held.Add(1)
					case envelope.NoSlot(err):
						refused.Add(1)
						wait.For(ctx, heldThink)
						continue
					default:
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
				}
				if _, err := conn.Exec(ctx, heldLookup, 1+(i*97+n)%2000); err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				wait.For(ctx, heldThink)
			}
		}
		for i := range heldWorkers + heldLate {
			wg.Add(1)
			go client(i)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for ready := false; ; {
			if !ready && ((!pooled && refused.Load() >= heldMinFails) || (pooled && held.Load() >= heldWorkers+heldLate)) {
				env.Ready()
				ready = true
			}
			select {
			case err := <-errs:
				return err // a client failed for another reason: the others end with ctx
			case <-done:
				env.Record("connections refused", float64(refused.Load()))
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// connectApp opens one application connection: through a transaction-
// mode pool nothing prepared may outlive a transaction.
func connectApp(ctx context.Context, dsn string, pooled bool) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "orders-api"
	if pooled {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	return pgx.ConnectConfig(ctx, cfg)
}
