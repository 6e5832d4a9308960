package lab

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStandby: a cluster made with a standby streams to it (a table made
// on the primary is read on the standby, which refuses writes); Load
// finds both, and Destroy stops both servers and removes the directory.
func TestStandby(t *testing.T) {
	needPostgres(t)
	ctx := context.Background()
	c, err := Create(ctx, Options{Standby: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy(context.Background()) })
	if c.Standby == nil || !c.Standby.Running() || c.Standby.Port == c.Port {
		t.Fatalf("no standby running beside the primary: %+v", c.Standby)
	}
	primary, err := pgx.Connect(ctx, c.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close(ctx)
	if _, err := primary.Exec(ctx, "CREATE TABLE shipped AS SELECT g FROM generate_series(1, 1000) g"); err != nil {
		t.Fatal(err)
	}
	standby, err := pgx.Connect(ctx, c.Standby.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close(ctx)
	var inRecovery bool
	if err := standby.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("the standby is not in recovery: %v %v", inRecovery, err)
	}
	// Replay is asynchronous: poll (a bound for a stalled machine).
	for deadline := time.Now().Add(time.Minute); ; {
		var n int
		err := standby.QueryRow(ctx, "SELECT count(*) FROM shipped").Scan(&n)
		if err == nil && n == 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay the table: %d rows, %v", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := standby.Exec(ctx, "CREATE TABLE refused (x int)"); err == nil {
		t.Error("the standby took a write")
	}
	loaded, err := Load(c.Dir)
	if err != nil || loaded.Standby == nil || loaded.Standby.Port != c.Standby.Port {
		t.Fatalf("Load: %+v, %v", loaded, err)
	}
	pids := []int{c.PostmasterPID(), c.Standby.PostmasterPID()}
	if err := loaded.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !c.WaitGone(pid, 10*time.Second) {
			t.Errorf("postmaster %d still alive after Destroy", pid)
		}
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Destroy", c.Dir)
	}
}
