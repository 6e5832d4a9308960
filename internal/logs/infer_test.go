package logs

import (
	"strings"
	"testing"
)

// TestInferPrefix: prefixes in no known list are read from the lines,
// and the fields come out right.
func TestInferPrefix(t *testing.T) {
	for _, c := range []struct {
		name, want string
		lines      []string
		pid        int
		user, db   string
	}{
		{"keys with values", "time=%m pid=%p user=%u db=%d app=%a client=%h ",
			[]string{"time=2024-05-01 10:00:00.123 UTC pid=4242 user=app db=shop app=web client=10.0.0.5 LOG:  duration: 1.0 ms  statement: SELECT 1",
				"time=2024-05-01 10:00:01.123 UTC pid=4243 user=app db=shop app=psql client=10.0.0.6 ERROR:  division by zero"},
			4242, "app", "shop"},
		{"Azure's %t-%c-", "%t-%c-",
			[]string{"2024-05-01 10:00:00 UTC-6632a1b2.1f40-LOG:  checkpoint starting: time",
				"2024-05-01 10:00:01 UTC-6632a1b3.1f41-LOG:  connection received: host=10.0.0.1 port=5000"},
			0x1f40, "", ""}, // the pid is %c's second half
		{"pid and line, then key=value pairs in another order", "%m [%p]: [%l-%l] db=%d,user=%u,app=%a,client=%h ",
			[]string{"2024-05-01 10:00:00.123 +02 [77]: [3-1] db=shop,user=app,app=web,client=10.1.1.1 LOG:  duration: 2.000 ms  statement: SELECT 2",
				"2024-05-01 10:00:00.223 +02 [78]: [9-1] db=shop,user=bob,app=[unknown],client=10.1.1.2 LOG:  connection authorized: user=bob"},
			77, "app", "shop"},
		{"user@db only in session lines", "%m [%p] %q%u@%d ",
			[]string{"2024-05-01 10:00:00.123 UTC [77] app@shop LOG:  duration: 2.000 ms  statement: SELECT 2",
				"2024-05-01 10:00:00.200 UTC [78] app@shop LOG:  duration: 3.000 ms  statement: SELECT 3",
				"2024-05-01 10:00:00.300 UTC [12] LOG:  checkpoint starting: time"},
			77, "app", "shop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := inferPrefix(c.lines)
			if p == nil || p.Text != c.want {
				t.Fatalf("inferred %v, want %q", p, c.want)
			}
			for _, l := range c.lines {
				if _, ok := p.parse(l); !ok {
					t.Errorf("%q does not parse %q", p.Text, l)
				}
			}
			e, _ := p.parse(c.lines[0])
			if e.PID != c.pid || e.User != c.user || e.Database != c.db || e.Time.IsZero() {
				t.Errorf("fields %+v", e)
			}
		})
	}
	// Detection says it matched, through the inferred prefix.
	f, p, err := Detect([]byte(strings.Join([]string{
		"time=2024-05-01 10:00:00.123 UTC pid=1 user=a db=b app=c client=d LOG:  x",
		"time=2024-05-01 10:00:00.123 UTC pid=2 user=a db=b app=c client=d LOG:  y", ""}, "\n")))
	if err != nil || f != Stderr || p == nil {
		t.Fatalf("%v %v %v", f, p, err)
	}
	if inferPrefix([]string{"hello world", "not a log"}) != nil {
		t.Errorf("a prefix from lines that are not a log")
	}
}

// TestParseDuration: the duration lines PostgreSQL writes, and lines
// that only look like them.
func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		msg        string
		ok         bool
		ms         float64
		kind, text string
	}{
		{"duration: 12.345 ms", true, 12.345, "", ""},
		{"duration: 1.5 ms  statement: SELECT 'a: b'", true, 1.5, "statement", "SELECT 'a: b'"},
		{"duration: 0.010 ms  execute <unnamed>: SELECT $1", true, 0.01, "execute", "SELECT $1"},
		{"duration: 0.010 ms  execute S_1: SELECT 1", true, 0.01, "execute", "SELECT 1"},
		{"duration: 0.020 ms  bind S_1: SELECT 1", true, 0.02, "bind", "SELECT 1"},
		{"duration: 0.020 ms  parse <unnamed>: SELECT 1", true, 0.02, "parse", "SELECT 1"},
		{"duration: 45.1 ms  plan:\n{\"Plan\": {}}", true, 45.1, "plan", "{\"Plan\": {}}"},
		{"duration: x ms", false, 0, "", ""},
		{"duration: 1 ms  statementx: SELECT 1", false, 0, "", ""},
		{"duration: 1 ms trailing", false, 0, "", ""},
		{"duration: -1 ms", false, 0, "", ""},
	} {
		ms, kind, text, ok := parseDuration(c.msg)
		if ok != c.ok || ms != c.ms || kind != c.kind || text != c.text {
			t.Errorf("%q: %v %v %q %q", c.msg, ok, ms, kind, text)
		}
	}
}
