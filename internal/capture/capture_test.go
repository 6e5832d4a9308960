package capture

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/logs"
)

func read(t *testing.T, path string, opt Options) *Workload {
	t.Helper()
	w, err := Read(context.Background(), []logs.Source{logs.FileSource(path, nil)}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestMixed(t *testing.T) {
	w := read(t, "testdata/mixed.log", Options{})
	if len(w.Sessions) != 2 {
		t.Fatalf("sessions = %d, want 2 (pid 100 began before the log, pid 400 is pgmedic's): %+v", len(w.Sessions), w.Sessions)
	}
	web, batch := w.Sessions[0], w.Sessions[1]
	if web.App != "web" || web.User != "app" || web.Database != "shop" || batch.App != "batch" {
		t.Fatalf("sessions: %+v %+v", web, batch)
	}
	var got []string
	for _, st := range web.Statements {
		got = append(got, st.SQL)
	}
	want := []string{"BEGIN", "SELECT * FROM orders WHERE id = $1 AND note = $2", `INSERT INTO orders VALUES (1, 'x')`, "SELECT 2", "ROLLBACK", "UPDATE orders SET note = $1 WHERE id = $2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("web statements:\n got %q\nwant %q", got, want)
	}
	ex := web.Statements[1]
	if ex.Kind != Extended || ex.Name != "S_1" || len(ex.Params) != 2 || *ex.Params[0] != "42" || *ex.Params[1] != "it's" {
		t.Fatalf("execute: %+v", ex)
	}
	// Sent 9 ms before its line at .410, the capture began at .000.
	if ex.At != 401*time.Millisecond || ex.Took != 9*time.Millisecond {
		t.Fatalf("execute at %v took %v", ex.At, ex.Took)
	}
	if !web.Statements[2].Failed || !web.Statements[3].Failed || web.Statements[4].Failed {
		t.Fatalf("failures: %+v", web.Statements)
	}
	if up := web.Statements[5]; up.Params[0] != nil || *up.Params[1] != "7" || up.Name != "" {
		t.Fatalf("unnamed execute: %+v", up)
	}
	if web.Start != 101*time.Millisecond || web.End != 1100*time.Millisecond {
		t.Fatalf("web session from %v to %v", web.Start, web.End)
	}
	// log_statement lines, paired with their durations; the failed one
	// marked, not added twice.
	if len(batch.Statements) != 3 || batch.Statements[0].Took != 100200*time.Microsecond || batch.Statements[0].At != 1250*time.Millisecond {
		t.Fatalf("batch: %+v", batch.Statements)
	}
	if b := batch.Statements[1]; b.Kind != Extended || *b.Params[0] != "3" || b.Took != 10*time.Millisecond {
		t.Fatalf("batch execute: %+v", b)
	}
	if !batch.Statements[2].Failed {
		t.Fatalf("SELECT 1/0 not marked failed: %+v", batch.Statements[2])
	}
	if w.Statements != 9 || w.Transactions != 1 || w.Failed != 3 || w.Extended != 3 {
		t.Fatalf("counts: statements %d transactions %d failed %d extended %d", w.Statements, w.Transactions, w.Failed, w.Extended)
	}
	skipped := map[string]int{}
	for _, s := range w.Skipped {
		skipped[s.Reason] = s.Count
	}
	if skipped[skipCopyIn] != 1 || skipped[skipBefore] != 1 || skipped[skipNoParams] != 1 || skipped[skipOwn] != 1 {
		t.Fatalf("skipped: %+v", w.Skipped)
	}
	if w.Duration != 2*time.Second {
		t.Fatalf("duration %v", w.Duration)
	}
}

func TestParameters(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		in   string
		want []*string
		ok   bool
	}{
		{"parameters: $1 = '1'", []*string{s("1")}, true},
		{"parameters: $1 = NULL, $2 = 'a, $3 = b'", []*string{nil, s("a, $3 = b")}, true},
		{"parameters: $1 = 'O''Brien', $2 = ''", []*string{s("O'Brien"), s("")}, true},
		{"parameters: $1 = 'multi\nline'", []*string{s("multi\nline")}, true},
		{"parameters: $2 = '1'", nil, false},
		{"parameters: $1 = 'open", nil, false},
		{"parameters: $1 = 12", nil, false},
		{"Key (id)=(1) already exists.", nil, false},
	} {
		got, ok := Parameters(c.in)
		if ok != c.ok || len(got) != len(c.want) {
			t.Errorf("%q: got %v %v", c.in, got, ok)
			continue
		}
		for i := range got {
			if (got[i] == nil) != (c.want[i] == nil) || got[i] != nil && *got[i] != *c.want[i] {
				t.Errorf("%q: value %d", c.in, i+1)
			}
		}
	}
}

func TestNoConnectionLines(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/l.log"
	writeFile(t, path, `2026-11-25 10:00:00.000 UTC [1] a@d LOG:  duration: 1.000 ms  statement: SELECT 1
2026-11-25 10:00:00.500 UTC [2] a@d LOG:  duration: 1.000 ms  statement: SELECT 2
2026-11-25 10:00:01.000 UTC [1] a@d LOG:  duration: 1.000 ms  statement: SELECT 3
`)
	w := read(t, path, Options{})
	if len(w.Sessions) != 2 || len(w.Sessions[0].Statements) != 2 || len(w.Notes) == 0 {
		t.Fatalf("%+v notes %v", w.Sessions, w.Notes)
	}
}

func TestSessionIDWithoutPID(t *testing.T) {
	// pgreplay-go's recommended prefix: %c and no %p.
	path := t.TempDir() + "/l.log"
	writeFile(t, path, `2026-11-25 10:00:00.000 UTC|app|shop|6740a1b2.1f4|LOG:  connection authorized: user=app database=shop
2026-11-25 10:00:00.010 UTC|app|shop|6740a1b2.1f5|LOG:  connection authorized: user=app database=shop
2026-11-25 10:00:00.100 UTC|app|shop|6740a1b2.1f4|LOG:  statement: SELECT 1
2026-11-25 10:00:00.200 UTC|app|shop|6740a1b2.1f5|LOG:  execute <unnamed>: SELECT $1
2026-11-25 10:00:00.200 UTC|app|shop|6740a1b2.1f5|DETAIL:  parameters: $1 = 'x'
2026-11-25 10:00:00.300 UTC|app|shop|6740a1b2.1f4|LOG:  disconnection: session time: 0:00:00.300 user=app database=shop host=127.0.0.1 port=1
`)
	w := read(t, path, Options{Options: logs.Options{Prefix: "%m|%u|%d|%c|"}})
	if len(w.Sessions) != 2 || w.Sessions[0].ID != "6740a1b2.1f4" || len(w.Sessions[1].Statements) != 1 || *w.Sessions[1].Statements[0].Params[0] != "x" {
		t.Fatalf("%+v", w.Sessions)
	}
}

func TestNothingReplayable(t *testing.T) {
	path := t.TempDir() + "/l.log"
	writeFile(t, path, "2026-11-25 10:00:00.000 UTC [1] a@d LOG:  checkpoint starting: time\n")
	_, err := Read(context.Background(), []logs.Source{logs.FileSource(path, nil)}, Options{})
	if err == nil || !strings.Contains(err.Error(), "log_min_duration_statement = 0") {
		t.Fatalf("err = %v", err)
	}
}

// TestFormatsAgree: one lab run logged to stderr (plain and gzip), csvlog
// and jsonlog at once is the same workload in each.
func TestFormatsAgree(t *testing.T) {
	var first *Workload
	for _, f := range []string{"stderr.log", "stderr.log.gz", "csvlog.csv", "jsonlog.json"} {
		w := read(t, "../logs/testdata/lab/"+f, Options{})
		if first == nil {
			first = w
			if w.Statements < 50 || len(w.Sessions) < 10 || w.Failed == 0 {
				t.Fatalf("%s: %d statements in %d sessions, %d failed", f, w.Statements, len(w.Sessions), w.Failed)
			}
			continue
		}
		if w.Statements != first.Statements || len(w.Sessions) != len(first.Sessions) || w.Failed != first.Failed {
			t.Fatalf("%s: %d statements in %d sessions (%d failed); stderr: %d in %d (%d)", f, w.Statements, len(w.Sessions), w.Failed, first.Statements, len(first.Sessions), first.Failed)
		}
		for i, s := range w.Sessions {
			for j, st := range s.Statements {
				want := first.Sessions[i].Statements[j]
				if st.SQL != want.SQL || st.At != want.At {
					t.Fatalf("%s: session %d statement %d: %q at %v; stderr: %q at %v", f, i, j, st.SQL, st.At, want.SQL, want.At)
				}
			}
		}
	}
}

// TestFailedLeftOut: a failed statement that is left out (COPY's rows are
// not in the log) does not mark the statement before it as failed.
func TestFailedLeftOut(t *testing.T) {
	path := t.TempDir() + "/l.log"
	writeFile(t, path, `2026-11-25 10:00:00.000 UTC [1] a@d LOG:  connection authorized: user=a database=d
2026-11-25 10:00:00.100 UTC [1] a@d LOG:  duration: 1.000 ms  statement: SELECT 1
2026-11-25 10:00:00.200 UTC [1] a@d ERROR:  invalid input syntax for type integer: "x"
2026-11-25 10:00:00.200 UTC [1] a@d STATEMENT:  COPY t FROM STDIN
`)
	w := read(t, path, Options{})
	if len(w.Sessions) != 1 || len(w.Sessions[0].Statements) != 1 || w.Sessions[0].Statements[0].Failed || w.Failed != 0 {
		t.Fatalf("%+v", w.Sessions[0].Statements)
	}
}

func TestControl(t *testing.T) {
	for sql, want := range map[string]int{
		"BEGIN": Begins, "begin;": Begins, "BEGIN ISOLATION LEVEL SERIALIZABLE": Begins, "START TRANSACTION READ ONLY": Begins,
		"COMMIT": Ends, "end": Ends, "ROLLBACK": Ends, "rollback;": Ends, "ABORT": Ends,
		"ROLLBACK TO SAVEPOINT a": NoControl, "rollback to a": NoControl, "SAVEPOINT a": NoControl,
		"START": NoControl, "SELECT 'BEGIN'": NoControl, "": NoControl, "  COMMIT  ": Ends,
	} {
		if got := Control(sql); got != want {
			t.Errorf("Control(%q) = %d, want %d", sql, got, want)
		}
	}
}

// TestRepeatedLeavesNoHole: a capture whose log starts 3 s before the
// application and whose statements span 2 s is repeated with the next
// copy's first statement right after the last one, not after the quiet
// lead-in again.
func TestRepeatedLeavesNoHole(t *testing.T) {
	w := &Workload{Duration: 5 * time.Second, Statements: 3, Sessions: []*Session{{ID: "a",
		Statements: []Statement{{At: 3 * time.Second}, {At: 4 * time.Second}, {At: 5 * time.Second}}}}}
	r := w.Repeated(3)
	if len(r.Sessions) != 3 || r.Statements != 9 {
		t.Fatalf("%d sessions, %d statements", len(r.Sessions), r.Statements)
	}
	gap := r.Sessions[1].Statements[0].At - r.Sessions[0].Statements[2].At
	if gap <= 0 || gap > time.Second {
		t.Errorf("the second copy starts %s after the first one's last statement", gap)
	}
	if r.Sessions[2].ID != "a (repeat 3)" {
		t.Errorf("%q", r.Sessions[2].ID)
	}
}
