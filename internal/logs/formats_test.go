package logs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// statementCount is how many statement calls a summary counted.
func statementCount(s *Summary) int64 {
	var n int64
	for _, st := range s.Statements {
		n += st.Count
	}
	return n
}

// realFormats are logs of other people's servers (testdata/formats,
// SOURCES.md): each must be read as its format, with at most 1% of its
// lines not recognised, and at least as many statements as pgBadger
// counts on the same file (its flags for the format in badger).
var realFormats = []struct {
	file   string
	format Format
	prefix string   // the log_line_prefix detected ("" for none)
	badger []string // pgBadger's flags for the file (nil: pgBadger does not read it)
	events []string // events the summary must have counted
}{
	{"cloudsql.json.gz", CloudSQL, "db=%d,user=%u ", []string{"-f", "jsonlog"}, []string{"connections"}},
	{"cnpg.json.gz", CNPG, "", nil, []string{"connections"}},
	{"logplex.log.gz", Logplex, "sql_error_code = %e ", []string{"-f", "logplex"}, []string{"deadlocks"}},
	{"queryid.log.gz", Stderr, "%m [%p] [queryid=%Q] %u@%d ", []string{"--prefix", "%m [%p] [queryid=%Q] %u@%d "}, nil},
	{"statement-without-duration.csv", CSV, "", []string{"-f", "csv"}, nil},
	{"rds.log.gz", Stderr, "%t:%r:%u@%d:[%p]:", []string{"-f", "rds", "--prefix", "%t:%r:%u@%d:[%p]:"}, nil},
	{"rds-one-space.log", Stderr, "%t:%r:%u@%d:[%p]:", []string{"--prefix", "%t:%r:%u@%d:[%p]:"}, nil},
	{"pg-ctl-lines.log", Stderr, "%m [%p] %q%u@%d ", nil, nil},
	{"xid-appli.log", Stderr, "%t [%p]: [%l-%l] [%x] usr=%u,db=%d,appli=%a ", []string{"--prefix", "%t [%p]: [%l-1] [%x] usr=%u,db=%d,appli=%a "}, nil},
	{"syslog.log.gz", Syslog, "db=%d,user=%u,app=%a,client=%h ", []string{"-f", "syslog"}, nil},
	{"pgbouncer-1.21.log.gz", PgBouncer, "", nil, []string{"pgbouncer logins", "pgbouncer client closed: client close request"}},
	{"pgbouncer-1.9.log.gz", PgBouncer, "", nil, []string{"pgbouncer logins"}},
}

func TestRealFormats(t *testing.T) {
	badger, _ := exec.LookPath("pgbadger")
	for _, c := range realFormats {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "formats", c.file)
			s := analyze(t, path)
			f := s.Files[0]
			if f.Error != "" || f.Format != c.format || f.Prefix != c.prefix {
				t.Fatalf("read as %s with prefix %q (error %q), want %s with %q", f.Format, f.Prefix, f.Error, c.format, c.prefix)
			}
			if f.Lines == 0 || f.Unrecognised*100 > f.Lines {
				t.Errorf("%d of %d lines not recognised: %q", f.Unrecognised, f.Lines, f.Examples)
			}
			for _, ev := range c.events {
				if s.Events[ev] == 0 {
					t.Errorf("no %q counted: %v", ev, s.Events)
				}
			}
			if c.badger == nil {
				return
			}
			if badger == "" {
				testkit.Missing(t, "pgbadger", exec.ErrNotFound)
			}
			theirs := badgerStatements(t, badger, path, c.badger)
			if ours := statementCount(s); ours < theirs || ours == 0 && c.format != CloudSQL {
				t.Errorf("pgmedic counted %d statements, pgBadger %d", ours, theirs)
			}
		})
	}
}

// badgerStatements runs pgBadger on a log and sums its statement counts.
func badgerStatements(t *testing.T, bin, path string, flags []string) int64 {
	t.Helper()
	var n int64
	for _, c := range badgerCounts(t, bin, path, flags) {
		n += c
	}
	return n
}

// badgerCounts runs pgBadger (one process, JSON output) on a log with
// the flags for its format, and returns its calls per normalised query.
func badgerCounts(t *testing.T, bin, path string, flags []string) map[string]int64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.json")
	args := append([]string{"-j", "1", "--pid-dir", t.TempDir(), "-o", out, "-x", "json"}, flags...)
	if b, err := exec.Command(bin, append(args, path)...).CombinedOutput(); err != nil {
		t.Fatalf("pgbadger: %v: %s", err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Normalized map[string]map[string]struct {
			Count int64 `json:"count"`
		} `json:"normalyzed_info"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, byQuery := range r.Normalized {
		for q, v := range byQuery {
			counts[q] += v.Count
		}
	}
	return counts
}

// TestCarriers reads the formats no public fixture covers, written out
// from the services' documented fields: each line is read or counted as
// not recognised, and the entries carry what the carrier said.
func TestCarriers(t *testing.T) {
	cases := []struct {
		name, log  string
		format     Format
		entries    int64
		statements int64
		other      int64
		check      func(t *testing.T, s *Summary)
	}{
		{name: "CloudWatch export of RDS (timestamps in ms)", format: CloudWatch, entries: 3, statements: 2, log: `{"timestamp":1709287200000,"message":"2024-03-01 10:00:00 UTC:10.1.2.3(51234):app@shop:[4242]:LOG:  duration: 12.5 ms  statement: SELECT * FROM orders WHERE id = 7","ingestionTime":1709287201000}
{"timestamp":1709287201000,"message":"2024-03-01 10:00:01 UTC:10.1.2.3(51234):app@shop:[4242]:LOG:  duration: 3.5 ms  statement: SELECT * FROM orders WHERE id = 8","ingestionTime":1709287202000}
{"timestamp":1709287202000,"message":"2024-03-01 10:00:02 UTC:10.1.2.3(51234):app@shop:[4242]:ERROR:  relation \"ordrs\" does not exist at character 15","ingestionTime":1709287203000}
`},
		{name: "CloudWatch Logs Insights export", format: CloudWatch, entries: 2, statements: 1, log: `{"@timestamp":"2024-03-01 10:00:00.000","@message":"2024-03-01 10:00:00 UTC:10.1.2.3(51234):app@shop:[4242]:LOG:  duration: 12.5 ms  statement: SELECT 1"}
{"@timestamp":"2024-03-01 10:00:01.000","@message":"2024-03-01 10:00:01 UTC::@:[400]:LOG:  checkpoint starting: time"}
`},
		{name: "journald JSON, PostgreSQL writing to stderr under systemd", format: Journald, entries: 2, statements: 1, log: `{"__REALTIME_TIMESTAMP":"1709287200000000","_PID":"4242","SYSLOG_IDENTIFIER":"postgres","MESSAGE":"2024-03-01 10:00:00.000 UTC [4242] app@shop LOG:  duration: 0.5 ms  statement: SELECT\n\tcount(*) FROM t"}
{"__REALTIME_TIMESTAMP":"1709287201000000","_PID":"4243","SYSLOG_IDENTIFIER":"postgres","MESSAGE":[50,48,50,52,45,48,51,45,48,49,32,49,48,58,48,48,58,48,49,46,48,48,48,32,85,84,67,32,91,52,50,52,51,93,32,76,79,71,58,32,32,99,104,101,99,107,112,111,105,110,116,32,115,116,97,114,116,105,110,103,58,32,116,105,109,101]}
`, check: func(t *testing.T, s *Summary) {
			if s.Checkpoint["time"] != 1 {
				t.Errorf("the MESSAGE sent as bytes was not read: %v", s.Checkpoint)
			}
		}},
		{name: "journald JSON, PostgreSQL logging to syslog", format: Journald, entries: 1, statements: 1, log: `{"__REALTIME_TIMESTAMP":"1709287200000000","_PID":"4242","MESSAGE":"[7-1] user=app,db=shop LOG:  duration: 0.5 ms  statement: SELECT 1"}
{"__REALTIME_TIMESTAMP":"1709287200000001","_PID":"4242","MESSAGE":"[7-2] #011FROM t"}
`},
		{name: "Docker's json-file driver, a statement over two lines", format: Docker, entries: 4, statements: 2, log: `{"log":"2024-03-01 10:00:00.000 UTC [1] LOG:  database system is ready to accept connections\n","stream":"stderr","time":"2024-03-01T10:00:00.123456789Z"}
{"log":"2024-03-01 10:00:01.000 UTC [42] app@shop LOG:  duration: 12.500 ms  statement: SELECT *\n","stream":"stderr","time":"2024-03-01T10:00:01.000000001Z"}
{"log":"\tFROM orders WHERE id = 7\n","stream":"stderr","time":"2024-03-01T10:00:01.000000002Z"}
{"log":"2024-03-01 10:00:02.000 UTC [42] app@shop LOG:  duration: 3.500 ms  statement: SELECT * FROM orders WHERE id = 8\n","stream":"stderr","time":"2024-03-01T10:00:02.000000001Z"}
{"log":"2024-03-01 10:00:03.000 UTC [43] app@shop ERROR:  relation \"ordrs\" does not exist at character 15\n","stream":"stderr","time":"2024-03-01T10:00:03.000000001Z"}
{"log":"2024-03-01 10:00:03.000 UTC [43] app@shop STATEMENT:  SELECT * FROM ordrs\n","stream":"stderr","time":"2024-03-01T10:00:03.000000002Z"}
`, check: func(t *testing.T, s *Summary) {
			if len(s.Errors) != 1 {
				t.Errorf("the error was not counted: %v", s.Errors)
			}
		}},
		{name: "Azure Monitor export", format: Azure, entries: 2, statements: 1, log: `{"time":"2024-03-01T10:00:00Z","category":"PostgreSQLLogs","operationName":"LogEvent","properties":{"prefix":"2024-03-01 10:00:00 UTC-65e1a7c0.1a4-app@shop","message":"duration: 4.2 ms  statement: SELECT 1","errorLevel":"LOG","sqlerrcode":"00000","processId":420}}
{"time":"2024-03-01T10:00:01Z","category":"PostgreSQLLogs","operationName":"LogEvent","properties":{"prefix":"2024-03-01 10:00:01 UTC-65e1a7c0.1a4-","message":"deadlock detected","errorLevel":"ERROR","sqlerrcode":"40P01","processId":420}}
`, check: func(t *testing.T, s *Summary) {
			if s.Events["deadlocks"] != 1 || len(s.Errors) != 1 {
				t.Errorf("the error was not counted: %v %v", s.Events, s.Errors)
			}
		}},
		{name: "CloudNativePG with the operator's own lines", format: CNPG, entries: 1, statements: 1, other: 2, log: `{"level":"info","ts":1669575482.09,"msg":"Readiness probe failing","logging_pod":"pg-1"}
{"level":"info","ts":1669575482.09,"logger":"postgres","msg":"record","logging_pod":"pg-1","record":{"log_time":"2022-11-27 18:58:02.096 UTC","user_name":"app","database_name":"shop","process_id":"600","connection_from":"10.0.0.9:4000","error_severity":"LOG","sql_state_code":"00000","message":"duration: 1.5 ms  statement: SELECT 1","application_name":"web","backend_type":"client backend","query_id":"0"}}
{"level":"info","ts":1669575482.09,"logger":"instance-manager","msg":"Instance is still down, will retry in 1 second"}
`},
		{name: "csvlog of 14+ whose first record spans lines", format: CSV, entries: 2, statements: 2, log: `2024-03-01 10:00:00.000 UTC,"app","shop",4242,"10.1.2.3:5000",65e1a7c0.1092,1,"SELECT",2024-03-01 10:00:00 UTC,3/7,0,LOG,00000,"duration: 2.000 ms  statement: SELECT *
FROM orders
WHERE id = 7",,,,,,,,,"web","client backend",,-123456789
2024-03-01 10:00:01.000 UTC,"app","shop",4242,"10.1.2.3:5000",65e1a7c0.1092,2,"SELECT",2024-03-01 10:00:00 UTC,3/8,0,LOG,00000,"duration: 1.000 ms  statement: SELECT * FROM orders WHERE id = 8",,,,,,,,,"web","client backend",,-123456789
`},
		{name: "PgBouncer clients closed by query_wait_timeout", format: PgBouncer, entries: 4, statements: 0, log: `2024-03-01 10:00:00.000 UTC [900] LOG C-0x55d1a0: shop/app@10.0.0.7:40000 login attempt: db=shop user=app tls=no
2024-03-01 10:02:00.001 UTC [900] LOG C-0x55d1a0: shop/app@10.0.0.7:40000 closing because: query_wait_timeout (age=120s)
2024-03-01 10:02:00.002 UTC [900] WARNING C-0x55d1a0: shop/app@10.0.0.7:40000 pooler error: query_wait_timeout
2024-03-01 10:02:05.000 UTC [900] LOG stats: 12 xacts/s, 40 queries/s, in 9000 B/s, out 20000 B/s, xact 900000 us, query 200000 us, wait 3000000 us
`, check: func(t *testing.T, s *Summary) {
			le := s.LogEvents()
			if le.PoolWaitTimeouts != 1 || le.PoolLogins != 1 || s.Events["pgbouncer stats lines"] != 1 || s.Events["pgbouncer pooler errors"] != 1 {
				t.Errorf("PgBouncer's events: %+v %v", le, s.Events)
			}
		}},
		{name: "log_statement with log_duration: each statement and its duration", format: Stderr, entries: 5, statements: 3, log: `2024-03-01 10:00:00.000 UTC [4242] app@shop LOG:  statement: SELECT * FROM orders WHERE id = 7
2024-03-01 10:00:00.002 UTC [4242] app@shop LOG:  duration: 2.000 ms
2024-03-01 10:00:00.003 UTC [4243] app@shop LOG:  execute S_1: SELECT * FROM orders WHERE id = $1
2024-03-01 10:00:00.004 UTC [4243] app@shop LOG:  duration: 1.000 ms
2024-03-01 10:00:00.005 UTC [4242] app@shop LOG:  statement: UPDATE orders SET state = 'paid' WHERE id = 7
`, check: func(t *testing.T, s *Summary) {
			var timed, untimed int64
			var total float64
			for _, st := range s.Statements {
				timed += st.Count - st.Untimed
				untimed += st.Untimed
				total += st.TotalMS
			}
			if timed != 2 || untimed != 1 || total != 3 {
				t.Errorf("durations paired wrong: %d timed, %d untimed, %v ms", timed, untimed, total)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, []byte(c.log), 0o644); err != nil {
				t.Fatal(err)
			}
			s := analyze(t, path)
			f := s.Files[0]
			if f.Error != "" || f.Format != c.format {
				t.Fatalf("read as %s (%s), want %s", f.Format, f.Error, c.format)
			}
			if f.Unrecognised != 0 || f.Entries != c.entries || f.Other != c.other {
				t.Errorf("entries %d (want %d), other %d (want %d), not recognised %d: %q", f.Entries, c.entries, f.Other, c.other, f.Unrecognised, f.Examples)
			}
			if got := statementCount(s); got != c.statements {
				t.Errorf("%d statements, want %d", got, c.statements)
			}
			if s.First.IsZero() {
				t.Error("no time was read")
			}
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}

// TestRefusedConnections: every wording of SQLSTATE 53300 counts as a
// refused connection, with or without the code in the line.
func TestRefusedConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pg.log")
	log := `2026-11-27 10:00:00.001 UTC [4101] app@shop FATAL:  sorry, too many clients already
2026-11-27 10:00:00.002 UTC [4102] app@shop FATAL:  remaining connection slots are reserved for non-replication superuser connections
2026-11-27 10:00:00.003 UTC [4103] app@shop FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute
2026-11-27 10:00:00.004 UTC [4104] app@shop FATAL:  remaining connection slots are reserved for roles with privileges of the "pg_use_reserved_connections" role
2026-11-27 10:00:00.005 UTC [4105] app@shop LOG:  connection authorized: user=app database=shop
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := analyze(t, path); s.Events["too many clients"] != 4 || s.Events["connections"] != 1 {
		t.Errorf("refused %d (want 4), connections %d: %v", s.Events["too many clients"], s.Events["connections"], s.Events)
	}
}

// TestUnknownJSON: JSON lines of a kind pgmedic does not know are said to
// be so, not read as an empty log.
func TestUnknownJSON(t *testing.T) {
	_, _, err := Detect([]byte("{\"a\":1}\n{\"a\":2}\n"))
	if err == nil || !strings.Contains(err.Error(), "no kind pgmedic knows") {
		t.Errorf("error %v", err)
	}
}

// FuzzDetectAndRead feeds any bytes to detection and to the reader of
// the format detected (or of each format when none is): no panic, and
// every line counted once, as read, as another program's or as not
// recognised.
func FuzzDetectAndRead(f *testing.F) {
	for _, c := range realFormats {
		b, err := os.ReadFile(filepath.Join("testdata", "formats", c.file))
		if err != nil || strings.HasSuffix(c.file, ".gz") {
			continue
		}
		f.Add(string(b))
	}
	f.Add("{\"textPayload\":\"[1]: [1-1] db=a,user=b LOG:  duration: 1 ms  statement: SELECT 1\",\"timestamp\":\"2024-01-01T00:00:00Z\"}\n{\"textPayload\":\"\\tmore\"}\n")
	f.Add("{\"MESSAGE\":[91,49,45,49,93],\"_PID\":\"x\",\"__REALTIME_TIMESTAMP\":\"-1\"}\n")
	f.Add("2019-03-14T00:22:56+00:00 app[postgres.1]: [GREEN] [2-2]  sql_error_code = 00000 LOG:  x\n")
	f.Add("2023-12-19 03:06:13.586 CET [1] LOG C-0x1: a/b@c:1 closing because: query_wait_timeout (age=120s)\n")
	f.Fuzz(func(t *testing.T, text string) {
		fm, p, err := Detect([]byte(text))
		formats := []Format{fm}
		if err != nil {
			formats = Formats
		}
		for _, fm := range formats {
			if needsPrefix(fm) && p == nil {
				p, _ = CompilePrefix("%m [%p] ")
			}
			s := NewSummary()
			st, err := Read(strings.NewReader(text), fm, p, s.Add)
			s.Finish()
			if err == nil && st.Unrecognised+st.Other > st.Lines {
				t.Fatalf("%s: %d lines, %d not recognised, %d other", fm, st.Lines, st.Unrecognised, st.Other)
			}
		}
	})
}
