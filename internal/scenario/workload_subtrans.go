package scenario

import (
	"context"
	_ "embed"
	"time"
)

//go:embed clients/psycopg_savepoints.py
var savepointsClient []byte

// subtransRowsAfter is how many steps the web worker must have added
// after the migration's transaction began before check starts: the
// dashboards read the newest 5,000, so then every row they read is newer
// than every snapshot's xmin.
const subtransRowsAfter = 5000

// subtransOverflow runs the CI service with its migration written as an
// ORM writes one: one transaction, a savepoint per row. Ready once that
// transaction is past 64 subtransactions and the dashboard's rows are all
// newer than it.
func subtransOverflow(ctx context.Context, env *Env) error {
	return savepointService(ctx, env, "nested")
}

// subtransBatched is its quiet counterpart: the migration commits batches
// of rows, no savepoint. Ready once the web worker has added as many
// rows as the broken form waits for.
func subtransBatched(ctx context.Context, env *Env) error {
	return savepointService(ctx, env, "batched")
}

func savepointService(ctx context.Context, env *Env, mode string) error {
	readyCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	go func() {
		admin, err := env.Admin(readyCtx)
		if err != nil {
			return
		}
		defer admin.Close(context.Background())
		// The migration's transaction id (nested), or the last row at the
		// start (batched): the rows after it are counted.
		var since int64
		if mode == "batched" {
			admin.QueryRow(readyCtx, "SELECT coalesce(max(id), 0) FROM job_steps").Scan(&since)
		}
		for readyCtx.Err() == nil {
			var n int64
			var err error
			if mode == "nested" {
				err = admin.QueryRow(readyCtx, `SELECT count(*) FROM job_steps j, pg_stat_activity a
					WHERE a.application_name = 'backfill-durations' AND a.backend_xid IS NOT NULL
					AND j.id > (SELECT max(id) FROM job_steps) - 10000 AND j.xmin::text::int8 > a.backend_xid::text::int8`).Scan(&n)
			} else {
				err = admin.QueryRow(readyCtx, "SELECT count(*) FROM job_steps WHERE id > $1", since).Scan(&n)
			}
			if err == nil && n >= subtransRowsAfter {
				env.Ready()
				return
			}
			select {
			case <-readyCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return runPythonUntil(ctx, "psycopg", "python3-psycopg", "psycopg_savepoints.py", savepointsClient, env.AppDSN(), mode)
}
