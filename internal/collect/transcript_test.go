package collect

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

var record = flag.Bool("record", false, "record the collector's tapes again against a throwaway lab cluster")

// collectTape is what one collection sent and was answered, and the
// snapshot it made of the answers.
type collectTape struct {
	Calls    []testkit.Call
	Snapshot json.RawMessage
}

// TestCollectTranscript replays a whole collection without a server: the
// catalog reads, pg_stat_statements, the plans of the top statements and
// three ticks of the sampler (on a clock of the test's own). The snapshot
// made from the replayed answers must be the one made from the server's,
// and the transcript shows every statement the collector sends, in order
// (a change to a query shows up as a diff: accept it with -update, or
// record the tape again with -record).
func TestCollectTranscript(t *testing.T) {
	const tapePath = "testdata/transcripts/shop.json"
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	opts := func() Options {
		o := Defaults()
		o.SampleFor, o.SampleEvery = 300*time.Millisecond, 100*time.Millisecond
		o.Clock = &fakeClock{t: at}
		return o
	}
	ctx := context.Background()
	if *record {
		recordCollectTape(t, tapePath, at, opts())
	}
	b, err := os.ReadFile(tapePath)
	if err != nil {
		t.Fatalf("%v (record it with go test ./internal/collect -run Transcript -record)", err)
	}
	var tp collectTape
	if err := json.Unmarshal(b, &tp); err != nil {
		t.Fatal(err)
	}
	rp := &testkit.Replayer{T: t, Name: "collect shop", Calls: tp.Calls, Strip: envelope.Tag,
		Rerecord: "record again: go test ./internal/collect -run Transcript -record"}
	snap, err := SnapshotWith(ctx, rp, at, opts())
	if err != nil {
		t.Fatal(err)
	}
	if !rp.Done() {
		t.Errorf("the collector sent %d of the %d recorded statements", rp.Sent(), len(tp.Calls))
	}
	got, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(got, tp.Snapshot) {
		t.Errorf("the snapshot made from the replayed answers differs from the recorded one")
	}
	if len(snap.Statements) == 0 || len(snap.Plans) == 0 || snap.Sampling == nil || len(snap.Sampling.Samples) != 3 {
		t.Errorf("the tape does not exercise the collector: %d statements, %d plans, sampling %+v", len(snap.Statements), len(snap.Plans), snap.Sampling)
	}
	testkit.Golden(t, "testdata/transcripts/shop.txt", []byte(rp.Transcript()))
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(ax) == string(by)
}

// recordCollectTape collects a small shop database on a lab cluster
// through the recorder and writes the tape.
func recordCollectTape(t *testing.T, path string, at time.Time, o Options) {
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{
		"CREATE EXTENSION pg_stat_statements",
		"CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, state text NOT NULL, total numeric(12,2) NOT NULL)",
		"INSERT INTO orders SELECT g, g % 5000, CASE WHEN g % 50 = 0 THEN 'new' ELSE 'done' END, g % 97 FROM generate_series(1, 100000) g",
		"CREATE INDEX ON orders (customer_id)",
		"ANALYZE orders",
		"SELECT pg_stat_statements_reset()",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		for _, q := range []string{
			"SELECT count(*) FROM orders WHERE state = 'new'",
			"SELECT sum(total) FROM orders WHERE customer_id = $1",
			"UPDATE orders SET total = total WHERE id = $1",
		} {
			args := []any{}
			if q != "SELECT count(*) FROM orders WHERE state = 'new'" {
				args = append(args, i+1)
			}
			if _, err := admin.Exec(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	sess, err := envelope.Connect(ctx, c.DSN("postgres"), envelope.Options{StatementTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	rec := &testkit.Recorder{Conn: sess.Conn}
	snap, err := SnapshotWith(ctx, rec, at, o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(collectTape{Calls: rec.Calls, Snapshot: s}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestJITQuestionTimesOut replays the shop tape with pg_jit_available()
// cancelled by statement_timeout, as a saturated server can do while it
// loads LLVM into pgmedic's backend. The collection goes on: the question
// is recorded as missing, with the flag that helps, and availability is
// judged from the statements (none of the shop's shows JIT work).
func TestJITQuestionTimesOut(t *testing.T) {
	b, err := os.ReadFile("testdata/transcripts/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	var tp collectTape
	if err := json.Unmarshal(b, &tp); err != nil {
		t.Fatal(err)
	}
	// The question runs in a quiet block that traps the cancel and leaves
	// it in a setting, which the next call reads.
	cut := false
	for i := range tp.Calls[:len(tp.Calls)-1] {
		if strings.Contains(tp.Calls[i].SQL, "pg_jit_available()") && strings.Contains(tp.Calls[i+1].SQL, "pgmedic.value") {
			outcome, _ := json.Marshal("error\x1f57014\x1fcanceling statement due to statement timeout")
			tp.Calls[i+1].Row = []json.RawMessage{outcome}
			cut = true
		}
	}
	if !cut {
		t.Fatal("the shop tape does not ask pg_jit_available()")
	}
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	o := Defaults()
	o.SampleFor, o.SampleEvery = 300*time.Millisecond, 100*time.Millisecond
	o.Clock = &fakeClock{t: at}
	rp := &testkit.Replayer{T: t, Name: "collect shop, JIT question cancelled", Calls: tp.Calls, Strip: envelope.Tag}
	snap, err := SnapshotWith(context.Background(), rp, at, o)
	if err != nil {
		t.Fatalf("a cancelled side question failed the whole collection: %v", err)
	}
	miss, ok := snap.Missing[model.SrcJIT]
	if !ok || !strings.Contains(miss.Reason, "statement timeout") || !strings.Contains(miss.Fix, "--statement-timeout") {
		t.Errorf("the cancelled question is not recorded with its fix: %+v", miss)
	}
	if snap.Server.JITAvailable || len(snap.Statements) == 0 || len(snap.Plans) == 0 {
		t.Errorf("JIT available %v with no statement showing JIT work; %d statements, %d plans",
			snap.Server.JITAvailable, len(snap.Statements), len(snap.Plans))
	}
}
