package scenario

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
)

// membersReadOn checks, on a major whose build has no pg_resetwal (so
// multixact-members cannot run there), what the member space finding
// reads: one multixact of two lockers, a checkpoint, and the collector
// must count exactly its two member entries (the control file's next
// offset, the offsets file's entry of the oldest multixact, in that
// major's layout) and the member page pg_stat_slru says was started, by
// its name in that major. A role without the grants gets the space
// skipped with them, and no ERROR reaches the server's log.
func membersReadOn(t *testing.T, ctx context.Context, c *lab.Cluster) {
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if err := execAll(ctx, admin, "DROP DATABASE IF EXISTS members_read", "CREATE DATABASE members_read",
		"DROP ROLE IF EXISTS members_mon", "CREATE ROLE members_mon LOGIN IN ROLE pg_monitor"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		execAll(context.Background(), admin, "DROP DATABASE IF EXISTS members_read WITH (FORCE)", "DROP ROLE IF EXISTS members_mon")
	})
	db, err := pgx.Connect(ctx, c.DSN("members_read"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if err := execAll(ctx, db, "CREATE TABLE accounts (id int PRIMARY KEY)", "INSERT INTO accounts VALUES (1)",
		"CREATE TABLE usage_events (account_id int REFERENCES accounts)"); err != nil {
		t.Fatal(err)
	}
	var txs []pgx.Tx
	for i := 0; i < 2; i++ {
		conn, err := pgx.Connect(ctx, c.DSN("members_read"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO usage_events VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
	}
	for _, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		// Before 15 an idle backend keeps its counters until its next
		// transaction or its exit.
		tx.Conn().Close(ctx)
	}
	if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	// Before 15 the statistics collector receives them a moment later.
	if err := waitFor(ctx, db, memberPages, 1); err != nil {
		t.Fatalf("PostgreSQL %d: no member page started in pg_stat_slru: %v", c.Major, err)
	}
	o := collect.Defaults()
	o.SampleFor = 0
	s, err := collect.SnapshotWith(ctx, db, time.Now(), o)
	if err != nil {
		t.Fatal(err)
	}
	m := s.Members
	if m == nil {
		t.Fatalf("PostgreSQL %d: the member space was not read: %+v", c.Major, s.Missing[model.SrcMembers])
	}
	if m.Used() != 2 || m.OldestMulti != 1 || m.NextMulti != 2 || m.PagesBefore < 1 {
		t.Errorf("PostgreSQL %d: one multixact of two lockers read as %+v (used %d)", c.Major, *m, m.Used())
	}
	from := labtest.LogSize(c)
	mon, err := pgx.Connect(ctx, c.UserDSN("members_mon", "members_read"))
	if err != nil {
		t.Fatal(err)
	}
	s, err = collect.SnapshotWith(ctx, mon, time.Now(), o)
	mon.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sk, ok := s.Missing[model.SrcMembers]; s.Members != nil || !ok || !strings.Contains(sk.Fix, "GRANT EXECUTE ON FUNCTION pg_control_checkpoint() TO members_mon") {
		t.Errorf("PostgreSQL %d: a role without the grants: %+v, skipped %+v", c.Major, s.Members, sk)
	}
	// The server writes an ERROR to its log before it answers the client.
	b, err := os.ReadFile(filepath.Join(c.Dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	if log := string(b[min(int64(len(b)), from):]); strings.Contains(log, "ERROR") {
		t.Errorf("PostgreSQL %d: the role without the grants left an ERROR in the server log:\n%s", c.Major, log)
	}
}
