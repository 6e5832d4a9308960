package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
)

func analyze(t *testing.T, files ...string) *Summary {
	t.Helper()
	var srcs []Source
	for _, f := range files {
		srcs = append(srcs, FileSource(f, nil))
	}
	s, err := Analyze(context.Background(), srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// counts is what the three formats of one workload must agree on.
type counts struct {
	Entries    int64
	Statements map[string]int64
	Events     map[string]int64
	Errors     int64
	Plans      int
}

func countsOf(s *Summary) counts {
	c := counts{Statements: map[string]int64{}, Events: s.Events, Plans: len(s.Plans())}
	for _, f := range s.Files {
		c.Entries += f.Entries
	}
	for _, st := range s.Statements {
		c.Statements[st.Query] = st.Count
	}
	for _, e := range s.Errors {
		c.Errors += e.Count
	}
	return c
}

// TestFormatsAgree: the same workload logged by PostgreSQL 15 as stderr
// (its prefix detected), csvlog, jsonlog and syslog (written by rsyslog;
// scripts/log-fixtures.sh) gives the same statements, counts, events and
// plans; and the figures are the workload's.
func TestFormatsAgree(t *testing.T) {
	dir := "testdata/lab"
	stderr := analyze(t, filepath.Join(dir, "stderr.log"))
	if f := stderr.Files[0]; f.Format != Stderr || f.Prefix != "%m [%p] %q%u@%d " || f.Unrecognised != 0 {
		t.Errorf("stderr: %+v", f)
	}
	want := countsOf(stderr)
	for _, name := range []string{"csvlog.csv", "jsonlog.json", "stderr.log.gz", "syslog.log"} {
		got := countsOf(analyze(t, filepath.Join(dir, name)))
		if name == "syslog.log" {
			// syslog also has the one message the server wrote before its
			// logging collector took over the other destinations.
			got.Entries--
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("%s differs from stderr.log:\n got %s\nwant %s", name, a, b)
		}
	}
	if want.Statements["SELECT balance FROM accounts WHERE id = $1;"] != 20 || want.Statements["SELECT $1"] != 25 {
		t.Errorf("statement counts: %v", want.Statements)
	}
	if want.Events["connections"] < 30 || want.Events["lock waits"] != 1 || want.Events["temporary files"] == 0 || want.Events["duplicate keys"] != 1 || want.Plans < 3 {
		t.Errorf("events %v, plans %d", want.Events, want.Plans)
	}
	if want.Errors != 3 {
		t.Errorf("errors: %d", want.Errors)
	}
}

// TestEveryVersion: the log of the same workload written by each major
// version from 13 to 18 (scripts/version-fixtures.sh), in every format
// the version writes, reads with every line accounted for, and the
// formats agree.
func TestEveryVersion(t *testing.T) {
	// Every major pgversion knows: a new row there needs its fixtures here.
	for _, m := range pgversion.Majors() {
		v := strconv.Itoa(m)
		dir := "testdata/versions/pg" + v
		if _, err := os.Stat(filepath.Join(dir, "stderr.log")); err != nil {
			t.Errorf("PostgreSQL %s: no log in %s (record it: bash scripts/version-fixtures.sh %s)", v, dir, v)
			continue
		}
		stderr := analyze(t, filepath.Join(dir, "stderr.log"))
		if f := stderr.Files[0]; f.Format != Stderr || f.Prefix != "%m [%p] %q%u@%d " || f.Unrecognised != 0 {
			t.Errorf("PostgreSQL %s stderr: %+v", v, f)
		}
		want := countsOf(stderr)
		others := []string{"csvlog.csv"}
		if v >= "15" {
			others = append(others, "jsonlog.json")
		}
		for _, name := range others {
			sum := analyze(t, filepath.Join(dir, name))
			if f := sum.Files[0]; f.Unrecognised != 0 {
				t.Errorf("PostgreSQL %s %s: %d lines not recognised: %v", v, name, f.Unrecognised, f.Examples)
			}
			a, _ := json.Marshal(countsOf(sum))
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Errorf("PostgreSQL %s: %s differs from stderr.log:\n got %s\nwant %s", v, name, a, b)
			}
		}
		if want.Statements["SELECT amount FROM orders WHERE id = $1;"] != 20 {
			t.Errorf("PostgreSQL %s: statement counts %v", v, want.Statements)
		}
		if want.Events["connections"] < 10 || want.Events["lock waits"] != 1 || want.Events["temporary files"] == 0 ||
			want.Plans < 1 || want.Errors != 2 {
			t.Errorf("PostgreSQL %s: events %v, plans %d, errors %d", v, want.Events, want.Plans, want.Errors)
		}
		if c := stderr.Checkpoints; c.Completed == 0 || c.DistanceKB <= 0 {
			t.Errorf("PostgreSQL %s: checkpoints %+v", v, c)
		}
	}
}

// TestParallelEqualsSequential: files read by parallel workers and merged
// give what reading them one after another gives.
func TestParallelEqualsSequential(t *testing.T) {
	files := []string{"testdata/lab/stderr.log", "testdata/lab/csvlog.csv", "testdata/lab/jsonlog.json"}
	parallel := countsOf(analyze(t, files...))
	seq := NewSummary()
	for _, f := range files {
		seq.Merge(analyze(t, f))
	}
	seq.Finish()
	a, _ := json.Marshal(parallel)
	b, _ := json.Marshal(countsOf(seq))
	if string(a) != string(b) {
		t.Errorf("parallel %s\nsequential %s", a, b)
	}
}

// TestPrefixes: fields read from lines written with other prefixes.
func TestPrefixes(t *testing.T) {
	for _, c := range []struct {
		prefix, line              string
		pid                       int
		user, db, app, level, msg string
	}{
		{"%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ", "2024-05-01 10:00:00 UTC [4242]: [3-1] user=app,db=shop,app=web,client=10.0.0.5 LOG:  duration: 12.5 ms  statement: SELECT 1",
			4242, "app", "shop", "web", "LOG", "duration: 12.5 ms  statement: SELECT 1"},
		{"%m [%p] %q%u@%d ", "2024-05-01 10:00:00.123 UTC [77] LOG:  checkpoint starting: time", 77, "", "", "", "LOG", "checkpoint starting: time"},
		{"%m [%p] %q%u@%d ", "2024-05-01 10:00:00.123 CEST [77] [unknown]@[unknown] LOG:  connection received: host=x", 77, "[unknown]", "[unknown]", "", "LOG", "connection received: host=x"},
		{"%t:%r:%u@%d:[%p]:", "2024-05-01 10:00:00 +02:10.1.1.1(5432):bob@db1:[9]:ERROR:  division by zero", 9, "bob", "db1", "", "ERROR", "division by zero"},
	} {
		p, err := CompilePrefix(c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := p.parse(c.line)
		if !ok || e.PID != c.pid || e.User != c.user || e.Database != c.db || e.App != c.app || e.Level != c.level || e.Message != c.msg {
			t.Errorf("%q on %q: %+v %v", c.prefix, c.line, e, ok)
		}
	}
	if _, err := CompilePrefix("%m %"); err == nil {
		t.Errorf("a lone %% compiled")
	}
	if _, err := CompilePrefix("%y "); err == nil {
		t.Errorf("an unknown escape compiled")
	}
}

// TestBadInput: each broken input says what is wrong, and what can be
// read is read.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, _ := os.ReadFile("testdata/lab/stderr.log")
	lines := strings.Split(string(good), "\n")
	// After a one-line message (a connection), where no multi-line
	// message could claim it.
	at := 0
	for i, l := range lines {
		if strings.Contains(l, "connection authorized") {
			at = i + 1
			break
		}
	}
	garbage := strings.Join(lines[:at], "\n") + "\n\x00\xff\xfe binary \x1b[31m garbage\n" + strings.Join(lines[at:], "\n")
	truncated := string(good[:len(good)-37])
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good)
	zw.Close()
	corrupt := gz.Bytes()[:gz.Len()/2]
	for _, c := range []struct {
		name, path string
		parsed     bool
		err        string
	}{
		{"empty", write("empty.log", nil), false, "the log is empty"},
		{"missing", filepath.Join(dir, "missing.log"), false, "no such file"},
		{"unknown prefix", write("odd.log", []byte("hello world\nnot a log at all\n")), false, "no known log_line_prefix"},
		{"garbage in the middle", write("garbage.log", []byte(garbage)), true, ""},
		{"truncated last line", write("cut.log", []byte(truncated)), true, ""},
		{"corrupt gzip", write("cut.log.gz", corrupt), true, "unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := analyze(t, c.path)
			f := s.Files[0]
			if s.Parsed() != c.parsed || (c.err == "" && f.Error != "") || !strings.Contains(f.Error, c.err) {
				t.Errorf("parsed=%v error=%q", s.Parsed(), f.Error)
			}
			if c.name == "garbage in the middle" && (f.Unrecognised != 1 || len(f.Examples) != 1) {
				t.Errorf("the garbage line was not counted: %+v", f)
			}
		})
	}
	// A wrong --prefix reads nothing and says which lines it could not
	// recognise.
	s, err := Analyze(context.Background(), []Source{FileSource("testdata/lab/stderr.log", nil)}, Options{Prefix: "%t [%p]: [%l-1] user=%u,db=%d "})
	if err != nil || s.Parsed() || s.Files[0].Unrecognised == 0 || len(s.Files[0].Examples) == 0 {
		t.Errorf("a wrong prefix: %v %+v", err, s.Files[0])
	}
}

// TestStdin: "-" reads standard input.
func TestStdin(t *testing.T) {
	b, _ := os.ReadFile("testdata/lab/jsonlog.json")
	s, err := Analyze(context.Background(), []Source{FileSource("-", bytes.NewReader(b))}, Options{})
	if err != nil || !s.Parsed() || s.Files[0].Name != "stdin" {
		t.Fatalf("%v %+v", err, s.Files)
	}
}

func FuzzStderr(f *testing.F) {
	b, _ := os.ReadFile("testdata/lab/stderr.log")
	f.Add("%m [%p] %q%u@%d ", string(b[:min(len(b), 4000)]))
	own, _ := os.ReadFile("testdata/own/stderr.log")
	f.Add("%m [%p] %q%u@%d ", string(own))
	wrap, _ := os.ReadFile("testdata/wraparound/stderr.log")
	f.Add("%m [%p] %q%u@%d ", string(wrap))
	f.Add("%t [%p]: [%l-1] user=%u,db=%d ", "2024-05-01 10:00:00 UTC [1]: [1-1] user=a,db=b LOG:  duration: 1 ms  statement: SELECT 1\n\tcontinued\n")
	f.Fuzz(func(t *testing.T, prefix, text string) {
		p, err := CompilePrefix(prefix)
		if err != nil {
			return
		}
		s := NewSummary()
		Read(strings.NewReader(text), Stderr, p, s.Add)
		s.Finish()
		s.LogEvents()
	})
}

func FuzzCSV(f *testing.F) {
	b, _ := os.ReadFile("testdata/lab/csvlog.csv")
	f.Add(string(b[:min(len(b), 4000)]))
	f.Fuzz(func(t *testing.T, text string) {
		s := NewSummary()
		Read(strings.NewReader(text), CSV, nil, s.Add)
		s.Finish()
	})
}

func FuzzJSON(f *testing.F) {
	b, _ := os.ReadFile("testdata/lab/jsonlog.json")
	f.Add(string(b[:min(len(b), 4000)]))
	f.Fuzz(func(t *testing.T, text string) {
		s := NewSummary()
		Read(strings.NewReader(text), JSON, nil, s.Add)
		s.Finish()
	})
}

// TestShapeKey: statements that differ only in literals share a key, and
// different statements do not.
func TestShapeKey(t *testing.T) {
	same := [][2]string{
		{"SELECT * FROM t WHERE id = 12 AND name = 'a''b'", "SELECT * FROM t WHERE id = 7 AND name = 'zz'"},
		{"SELECT 1.5,\n\t 2", "SELECT 3.25, 4"},
	}
	for _, p := range same {
		if shapeKey(p[0]) != shapeKey(p[1]) {
			t.Errorf("%q and %q differ: %x %x", p[0], p[1], shapeKey(p[0]), shapeKey(p[1]))
		}
	}
	if shapeKey("SELECT * FROM t1 WHERE a = 1") == shapeKey("SELECT * FROM t2 WHERE a = 1") {
		t.Errorf("t1 and t2 share a key")
	}
}

// TestRangesEqualWhole: a file cut into byte ranges on entry boundaries
// and read by parallel workers gives what reading it whole gives, in both
// formats that allow it (property test over several cut counts).
func TestRangesEqualWhole(t *testing.T) {
	defer func(m int64, w func() int) { splitMin, rangeWorkers = m, w }(splitMin, rangeWorkers)
	for _, name := range []string{"testdata/lab/stderr.log", "testdata/lab/jsonlog.json"} {
		splitMin = 1 << 40
		whole := countsOf(analyze(t, name))
		for _, n := range []int{2, 3, 7, 16} {
			splitMin, rangeWorkers = 1, func() int { return n }
			got := countsOf(analyze(t, name))
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(whole)
			if string(a) != string(b) {
				t.Errorf("%s in %d ranges:\n got %s\nwant %s", name, n, a, b)
			}
		}
	}
}

// TestMaintenance: autovacuum held back by an 8-second snapshot while
// three updates ran, then free to clean up; checkpoints forced by WAL
// with max_wal_size at 32MB (scripts/log-fixtures.sh, maintenance.log).
func TestMaintenance(t *testing.T) {
	s := analyze(t, "testdata/lab/maintenance.log")
	jobs := s.Tables["postgres.public.jobs"]
	if jobs == nil || jobs.Vacuums < 3 || jobs.NotRemovable != 300000 || jobs.LastNotRemovable != 0 || jobs.Removed < 300000 || jobs.Analyzes == 0 {
		t.Errorf("jobs: %+v", jobs)
	}
	ev := s.LogEvents()
	if ev.CheckpointsByWAL < 10 || ev.CheckpointsTooFrequent < 10 || ev.CheckpointMedianIntervalS <= 0 || ev.CheckpointMedianIntervalS > 5 ||
		ev.CheckpointMeanDistanceKB < 10000 || ev.CheckpointMeanDistanceKB > 32768 || ev.WALKBPerSecond <= 0 {
		t.Errorf("checkpoints: %+v", ev)
	}
	if jobs.Truncations != 0 || jobs.PagesRemoved != 0 {
		t.Errorf("jobs gave no pages back, read as %d truncations", jobs.Truncations)
	}
	// Aggressive and anti-wraparound vacuums are vacuums too.
	if s.Tables["template1.pg_catalog.pg_class"].Vacuums != 1 {
		t.Errorf("aggressive vacuum not counted: %+v", s.Tables["template1.pg_catalog.pg_class"])
	}
}

// TestTruncations: the runs that gave a table's empty end back ("pages:
// N removed" with N > 0), not those that removed none, nor an index's
// pages.
func TestTruncations(t *testing.T) {
	g := analyze(t, "testdata/truncation/stderr.log").LogEvents().Tables
	if len(g) != 1 || g[0].Vacuums != 3 || g[0].Truncations != 2 || g[0].PagesRemoved != 4444 {
		t.Errorf("access_grants: %+v", g)
	}
}

// TestOwnEntriesLeftOut: what pgmedic's own session logged (its tagged
// statements, the plan auto_explain printed for its PREPARE, an execute of
// its prepared statement, its errors and lock waits) and a lock wait that
// pgmedic's session caused are not the application's; the same pid after
// pgmedic disconnected is the application's again.
func TestOwnEntriesLeftOut(t *testing.T) {
	s := analyze(t, "testdata/own/stderr.log")
	var texts []string
	var calls int64
	for _, st := range s.Statements {
		texts = append(texts, st.Query)
		calls += st.Count
	}
	if calls != 2 || len(texts) != 1 || !strings.Contains(texts[0], "customer_id") {
		t.Errorf("statements %q (%d calls), want the application's SELECT twice", texts, calls)
	}
	if n := len(s.Plans()); n != 0 {
		t.Errorf("%d plans kept, want none: the only plan is pgmedic's", n)
	}
	if n := s.Events["lock waits"]; n != 1 {
		t.Errorf("%d lock waits, want 1 (process 502 behind the application's 500)", n)
	}
	if n := s.Events["statement timeouts"]; n != 0 {
		t.Errorf("pgmedic's statement timeout was counted")
	}
	var errs int64
	for _, e := range s.Errors {
		errs += e.Count
	}
	if errs != 1 {
		t.Errorf("%d errors, want the application's duplicate key only", errs)
	}
	if n := s.Events[ownEntries]; n < 7 {
		t.Errorf("%d entries counted as pgmedic's, want at least 7", n)
	}
}

// TestLiteralsKept: whatever ShowLiterals says, the summary keeps each
// shape's text with its values (the slowest plan's query text, else the
// slowest logged call's) for check's re-runs, and prints none of them.
func TestLiteralsKept(t *testing.T) {
	s := analyze(t, "testdata/lab/stderr.log")
	lits := s.Literals()
	fp, _ := s.fingerprint("SELECT balance FROM accounts WHERE id = 1")
	if got := lits[fp]; got != "SELECT balance FROM accounts WHERE id = 7;" {
		t.Errorf("the slowest call's text: %q", got)
	}
	fp, _ = s.fingerprint("INSERT INTO accounts SELECT g, 'x' || g, 1 FROM generate_series(1, 2) g")
	if got := lits[fp]; !strings.Contains(got, "generate_series(1, 300000)") {
		t.Errorf("the plan's query text: %q", got)
	}
	for _, st := range s.Statements {
		if st.Example != "" {
			t.Errorf("a literal was printed without ShowLiterals: %q", st.Example)
		}
	}
}

// TestWraparoundLogged: the server's warnings about its wraparound
// limits are counted by limit with the fewest left and the database they
// name, and its refusals in every major's wording. The member warnings
// are a lab cluster's (its member space set close to the end with
// pg_resetwal -O, then a backfill of concurrent foreign-key inserts);
// the refusals are written in 15's and 16's words.
func TestWraparoundLogged(t *testing.T) {
	ev := analyze(t, "testdata/wraparound/stderr.log").LogEvents()
	want := []model.WraparoundLogged{
		{Limit: model.LimitXIDs, Warnings: 2, Least: 39985001, Database: "ledger", Refusals: 2},
		{Limit: model.LimitMultis, Warnings: 1, Least: 9000000, Database: "billing", Refusals: 1},
		{Limit: model.LimitMembers, Warnings: 5, Least: 243568, Database: "the database with OID 4", Refusals: 1},
	}
	if !reflect.DeepEqual(ev.Wraparound, want) {
		t.Errorf("got %+v\nwant %+v", ev.Wraparound, want)
	}
}
