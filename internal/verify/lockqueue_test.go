package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/verify"
)

// TestLockQueueAfterTheChange: the twin was copied after the queued
// change had gone through on the target, so the column it adds is
// already there. The reproduction takes the twin's table back to before the
// change and measures the queue as it was, instead of failing on
// "column already exists".
func TestLockQueueAfterTheChange(t *testing.T) {
	ctx := context.Background()
	e := onATwin(t,
		"CREATE TABLE ledger (id int PRIMARY KEY, amount numeric)",
		"INSERT INTO ledger SELECT g, g FROM generate_series(1, 5000) g",
		"ALTER TABLE ledger ADD COLUMN note text")
	f := model.Finding{Rule: "lock-contention", Severity: model.Warning, Title: "a schema change queued",
		Experiment: &model.Experiment{Kind: model.ExpLockQueue, Query: "ALTER TABLE ledger ADD COLUMN note text",
			Table: model.RelRef{Schema: "public", Name: "ledger"}, Waiter: "SELECT amount FROM ledger WHERE id = 42", HeadLock: "ACCESS SHARE"}}
	out, _ := e.Run(ctx, &model.Snapshot{Database: "postgres", Tables: []model.Table{{Schema: "public", Name: "ledger"}}}, []model.Finding{f})
	v := out[0].Verification
	// The head holds its lock 1.2 s and the change queues 0.1 s after: a
	// read behind it waits about 1.1 s on a quiet machine, less when the
	// machine is slow to start the change and the reads. Half the hold
	// is what no read waits without the queue.
	if v.Before == nil || v.After == nil || v.Before.Value < 600 || !strings.Contains(v.Method, "taken back") {
		t.Fatalf("the reproduction: %s: %s (%s)", v.Status, v.Reason, v.Method)
	}
	if v.Status != model.Confirmed {
		t.Errorf("the queue as written %.0f ms, with lock_timeout %.0f ms: %s", v.Before.Value, v.After.Value, v.Status)
	}
}

// TestHeldLockOnARowTheTwinHolds: the waiters sent UPDATE ... WHERE id =
// $2 through the extended protocol, so their values are unknown, and the
// table has no statistics to take one from: the value bind falls back to
// (1) matches no row, the head locks nothing and nobody waits. The
// reproduction then takes one row the twin holds for the head and the
// waiters, and measures the wait.
func TestHeldLockOnARowTheTwinHolds(t *testing.T) {
	ctx := context.Background()
	e := onATwin(t,
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int) WITH (autovacuum_enabled = off)",
		"INSERT INTO accounts SELECT g, 0 FROM generate_series(1000, 1100) g")
	const write = "UPDATE accounts SET balance = balance + $1 WHERE id = $2"
	f := model.Finding{Rule: "idle-in-transaction", Severity: model.Warning, Title: "a transaction left idle holds a row",
		Experiment: &model.Experiment{Kind: model.ExpHeldLock, Query: write, Waiter: write, Table: model.RelRef{Schema: "public", Name: "accounts"}}}
	snap := &model.Snapshot{Database: "postgres", Tables: []model.Table{{Schema: "public", Name: "accounts"}},
		Columns: []model.Column{{Schema: "public", Table: "accounts", Name: "id", Type: "integer"}, {Schema: "public", Table: "accounts", Name: "balance", Type: "integer"}}}
	out, _ := e.Run(ctx, snap, []model.Finding{f})
	v := out[0].Verification
	if v.Before == nil || v.After == nil || v.Before.Value < 600 {
		t.Fatalf("the reproduction: %s: %s (%s)", v.Status, v.Reason, v.Method)
	}
	if !strings.Contains(v.Method, "one row") || !strings.Contains(strings.Join(v.Parameters, " "), "a row of accounts") {
		t.Errorf("the method and values do not say the row was the twin's: %s %v", v.Method, v.Parameters)
	}
	if strings.Contains(strings.Join(v.Parameters, " "), "1000") {
		t.Errorf("the row's value is shown without --show-values: %v", v.Parameters)
	}
}

// TestHeldLockWithAChangeBehind: a transaction left idle after reading
// the table, an ALTER queued behind it, reads queued behind the ALTER.
// The reproduction queues the ALTER between the head and the reads: as
// written the reads wait out the head's idle time, with the idle timeout
// a fraction of it.
func TestHeldLockWithAChangeBehind(t *testing.T) {
	ctx := context.Background()
	e := onATwin(t,
		"CREATE TABLE orders (id int PRIMARY KEY, total numeric); INSERT INTO orders SELECT g, g FROM generate_series(1, 1000) g")
	f := model.Finding{Rule: "idle-in-transaction", Severity: model.Warning, Title: "a transaction left idle",
		Experiment: &model.Experiment{Kind: model.ExpHeldLock, Table: model.RelRef{Schema: "public", Name: "orders"}, HeadLock: "ACCESS SHARE",
			Change: "ALTER TABLE orders ADD COLUMN note text", Waiter: "SELECT total FROM orders WHERE id = 7"}}
	out, _ := e.Run(ctx, &model.Snapshot{Database: "postgres", Tables: []model.Table{{Schema: "public", Name: "orders"}}}, []model.Finding{f})
	v := out[0].Verification
	if v.Status != model.Confirmed || v.Before == nil || v.Before.Value < 1000 || !strings.Contains(v.Method, "ALTER TABLE orders") {
		t.Fatalf("the reproduction: %s: %s (%s) %v %v", v.Status, v.Reason, v.Method, v.Before, v.After)
	}
}

// onATwin is an engine on a throwaway lab cluster standing in for a twin
// (its tables are pgmedic's to write), after the setup statements ran.
func onATwin(t *testing.T, setup ...string) *verify.Engine {
	t.Helper()
	c := labtest.Cluster(t, lab.Options{})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range setup {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := envelope.Connect(ctx, c.DSN("postgres"), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	return &verify.Engine{Conn: sess.Conn, Runs: 5, Cores: 2, StatementTimeoutText: "5s", Lab: true, InPlace: true,
		Workers: verify.Sessions(func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, c.DSN("postgres")) })}
}
