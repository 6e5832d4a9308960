package collect_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/rules"
)

// TestOwnSessionsAreNotEvidence: a second pgmedic session (another check,
// or an experiment) holds a row lock and runs tagged statements while the
// application's session waits behind it. pg_stat_statements' entries of
// pgmedic, its session in pg_stat_activity, and the wait it caused are all
// left out of what the rules see.
func TestOwnSessionsAreNotEvidence(t *testing.T) {
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	connect := func(app string) *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	app, ours, checker := connect("shop"), connect(envelope.AppName), connect(envelope.AppName)
	// What pgmedic's own sessions get (see envelope): a check never
	// queues behind a lock.
	if _, err := checker.Exec(ctx, "SET lock_timeout = '2s'; SET statement_timeout = '30s'"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE EXTENSION pg_stat_statements", "CREATE TABLE items (id int)", "INSERT INTO items SELECT generate_series(1, 1000)"} {
		if _, err := app.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := ours.Exec(ctx, envelope.Tag+"SELECT count(*) FROM items WHERE id > $1", i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ours.Exec(ctx, envelope.Tag+"BEGIN; SELECT * FROM items WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := app.Exec(ctx, "UPDATE items SET id = 1 WHERE id = 1")
		waited <- err
	}()
	// Poll until the application's session waits behind pgmedic's.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := checker.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'shop' AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the application's session never waited for the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	opts := collect.Defaults()
	opts.SampleFor, opts.SampleEvery, opts.PlanTop = 500*time.Millisecond, 50*time.Millisecond, 0
	s, err := collect.SnapshotWith(ctx, checker, time.Now(), opts)
	if _, err := ours.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range s.Statements {
		if envelope.Own(st.Query) {
			t.Errorf("pgmedic's statement kept from pg_stat_statements: %q", st.Query)
		}
	}
	if s.Sampling == nil || len(s.Sampling.Samples) == 0 {
		t.Fatal("nothing was sampled")
	}
	marked := 0
	for _, smp := range s.Sampling.Samples {
		for _, b := range smp.Backends {
			if b.App == envelope.AppName {
				t.Fatalf("pgmedic's session %d was sampled", b.PID)
			}
			if b.App == "shop" && b.WaitType == "Lock" {
				if !b.BlockedByPgmedic || len(b.BlockedBy) != 0 {
					t.Fatalf("the wait pgmedic caused is not marked: %+v", b)
				}
				marked++
			}
		}
	}
	if marked == 0 {
		t.Fatal("the application's wait was not sampled")
	}
	if len(s.LockWaits) != 0 {
		t.Errorf("lock waits kept: %+v", s.LockWaits)
	}
	lockRule, _ := rules.Select([]string{rules.LockContentionID})
	if f, _ := rules.Run(s, lockRule); len(f) != 0 {
		t.Errorf("lock-contention built from pgmedic's own lock: %s", f[0].Title)
	}
}
