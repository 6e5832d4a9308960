package collect

import (
	"context"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
)

// TestReplicationBothSides reads a lab cluster with a standby from each
// side, sampling for a moment: the primary's reading names the standby
// streaming with its positions, twice; the standby's says it is in
// recovery, streaming, with what it received and replayed.
func TestReplicationBothSides(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a lab cluster with a standby")
	}
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{Standby: true})
	read := func(dsn string) *model.Replication {
		t.Helper()
		sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		opts := Defaults()
		opts.SampleFor, opts.SampleEvery, opts.PlanTop = 300*time.Millisecond, 100*time.Millisecond, 0
		s, err := SnapshotWith(ctx, sess.Conn, time.Now(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := s.Missing[model.SrcReplication]; ok || s.Replication == nil {
			t.Fatalf("replication not read: %+v", m)
		}
		return s.Replication
	}
	p := read(c.DSN("postgres"))
	if p.InRecovery || len(p.Readings) != 2 {
		t.Fatalf("primary: %+v", p)
	}
	last := p.Readings[1]
	if len(last.Standbys) != 1 || last.Standbys[0].Name != lab.StandbyName || last.Standbys[0].State != "streaming" ||
		last.Standbys[0].Hidden || last.Standbys[0].Sent <= 0 || last.WAL < last.Standbys[0].Replayed || last.At <= p.Readings[0].At {
		t.Errorf("primary's reading: %+v", last)
	}
	s := read(c.Standby.DSN("postgres"))
	if !s.InRecovery || len(s.Readings) != 2 {
		t.Fatalf("standby: %+v", s)
	}
	if r := s.Readings[1]; r.Receiver != "streaming" || r.WAL <= 0 || r.Replayed <= 0 || r.Paused || len(r.Standbys) != 0 {
		t.Errorf("standby's reading: %+v", r)
	}
}
