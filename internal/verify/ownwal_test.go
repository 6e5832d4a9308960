package verify_test

import (
	"context"
	"sync"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestIndexWritesCountTheirOwnWAL: the unused-index experiment counts the
// WAL its inserts wrote, not the WAL the server wrote meanwhile. It runs
// once on a quiet cluster and once while another session writes as fast
// as it can; the figures must not move. Counted from the server's WAL
// position (as it was), the busy run gave 1,304 bytes a row with the
// index against 269 quiet.
func TestIndexWritesCountTheirOwnWAL(t *testing.T) {
	ctx := context.Background()
	e := onATwin(t,
		"CREATE TABLE events (id bigint PRIMARY KEY, at timestamptz, kind text, body text)",
		"INSERT INTO events SELECT g, now() - g * interval '1 s', 'k' || g % 7, repeat('x', 60) FROM generate_series(1, 20000) g",
		"CREATE INDEX events_kind_idx ON events (kind)",
		"CREATE TABLE noise (n bigint, filler text)")
	run := func() model.Verification {
		f := model.Finding{Rule: "unused-index", Severity: model.Warning, Title: "an index nobody reads",
			Experiment: &model.Experiment{Kind: model.ExpIndexWrites, Table: model.RelRef{Schema: "public", Name: "events"}, Indexes: []string{"events_kind_idx"}}}
		out, _ := e.Run(ctx, &model.Snapshot{Database: "postgres", Tables: []model.Table{{Schema: "public", Name: "events"}}}, []model.Finding{f})
		v := out[0].Verification
		if v.Before == nil || v.After == nil {
			t.Fatalf("the experiment measured nothing: %s: %s", v.Status, v.Reason)
		}
		return v
	}
	quiet := run()

	noisy, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	started := make(chan struct{})
	go func() {
		defer wg.Done()
		conn, err := e.Workers(ctx)
		if err != nil {
			t.Error(err)
			close(started)
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		close(started)
		for noisy.Err() == nil {
			// Each batch is its own transaction, committed: WAL the
			// experiment's session did not write.
			if _, err := conn.Exec(noisy, "INSERT INTO noise SELECT g, repeat('y', 200) FROM generate_series(1, 2000) g"); err != nil && noisy.Err() == nil {
				t.Error(err)
				return
			}
		}
	}()
	<-started
	busy := run()
	stop()
	wg.Wait()
	var written int64
	if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM noise").Scan(&written); err != nil || written == 0 {
		t.Fatalf("the other session wrote nothing (%d rows, %v): the test proves nothing", written, err)
	}
	for _, side := range []struct {
		name        string
		quiet, busy float64
	}{{"with the index", quiet.Before.Value, busy.Before.Value}, {"without it", quiet.After.Value, busy.After.Value}} {
		if d := side.busy - side.quiet; d > 0.01*side.quiet || d < -0.01*side.quiet {
			t.Errorf("WAL per row %s: %.1f bytes quiet, %.1f while another session wrote %d rows", side.name, side.quiet, side.busy, written)
		}
	}
	if quiet.Status != model.Confirmed || busy.Status != model.Confirmed {
		t.Errorf("verdicts: %s quiet, %s busy (%.1f -> %.1f)", quiet.Status, busy.Status, busy.Before.Value, busy.After.Value)
	}
}
