package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The object store's metadata table (setup.sql) has autovacuum_freeze_max_age
// at its floor, 100,000, and a throttled autovacuum, so that consuming a
// little more than that many transaction ids starts a slow VACUUM "to
// prevent wraparound" on it, as years of traffic do on a large table.
const (
	wraparoundXIDs    = 110000
	wraparoundRead    = `SELECT name, size FROM manta_objects WHERE id = $1`
	wraparoundReaders = 4
	wraparoundDDL     = `DROP TRIGGER IF EXISTS manta_objects_audit ON manta_objects`
)

// consumeXIDs spends n transaction ids in one statement: a DO block run
// outside a transaction may COMMIT, and txid_current() gives each of its
// transactions an id.
func consumeXIDs(ctx context.Context, conn *pgx.Conn, n int) error {
	_, err := conn.Exec(ctx, fmt.Sprintf(`DO $$BEGIN FOR i IN 1..%d LOOP PERFORM txid_current(); COMMIT; END LOOP; END$$`, n))
	return err
}

// wraparoundQueue is Joyent's Manta outage in small: the metadata
// table's autovacuum to prevent wraparound runs (and, unlike an ordinary
// one, does not cancel itself for a lock request), an operator's
// DROP TRIGGER queues for its ACCESS EXCLUSIVE lock behind it, and every
// read of the table queues behind the DROP TRIGGER.
func wraparoundQueue(ctx context.Context, env *Env) error {
	return ddlBehindVacuum(ctx, env, false)
}

// wraparoundFrozen is its quiet counterpart: the table is frozen at a
// quiet hour (VACUUM (FREEZE)) before its age reaches the limit, so no
// run to prevent wraparound starts, and the same DROP TRIGGER goes
// through at once under the same reads.
func wraparoundFrozen(ctx context.Context, env *Env) error {
	return ddlBehindVacuum(ctx, env, true)
}

func ddlBehindVacuum(ctx context.Context, env *Env, freeze bool) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	if freeze {
		// The same ids spent, with the table frozen at a quiet hour half
		// way: its age never reaches autovacuum_freeze_max_age. (Freezing
		// after would race the autovacuum the age starts, and wait behind
		// it.)
		for _, n := range []int{wraparoundXIDs / 2, wraparoundXIDs - wraparoundXIDs/2} {
			if err := consumeXIDs(ctx, admin, n); err != nil {
				return err
			}
			if _, err := admin.Exec(ctx, `VACUUM (FREEZE) manta_objects`); err != nil {
				return err
			}
		}
	} else if err := consumeXIDs(ctx, admin, wraparoundXIDs); err != nil {
		return err
	} else if err := waitFor(ctx, admin, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND query LIKE '%manta_objects (to prevent wraparound)'`, 1); err != nil {
		return err
	}
	var g sessionGroup
	run := func(f func() error) { g.run(ctx, f) }
	run(func() error { return execAs(ctx, env.Cluster.DSN(env.DB), wraparoundDDL) })
	run(func() error {
		return untilDone(ctx, wraparoundReaders, func(ctx context.Context, conn *pgx.Conn) error {
			// A web request's lookup, a few dozen a second per reader.
			var name string
			var size int64
			if err := conn.QueryRow(ctx, wraparoundRead, 1+int(nextID()%50000)).Scan(&name, &size); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			return nil
		}, env)
	})
	want := wraparoundReaders
	if freeze {
		want = 0 // nothing queues: ready once the readers run
	}
	if err := waitFor(ctx, admin, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = '`+wraparoundRead+`'`, want); err != nil {
		return err
	}
	env.Ready()
	return g.wait()
}

var (
	idMu sync.Mutex
	idN  uint64
)

// nextID spreads the readers' keys over the table.
func nextID() uint64 {
	idMu.Lock()
	defer idMu.Unlock()
	idN += 7919
	return idN
}
