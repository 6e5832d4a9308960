package logs

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PgBouncer is PgBouncer's own log: its connections, its pools, the
// clients it closes and why (query_wait_timeout when a client waited in
// the pool longer than allowed), and its periodic stats.
const PgBouncer Format = "pgbouncer"

// bouncerRe reads a PgBouncer log line: the time (with or without a
// zone), the process (in brackets from 1.12 on), the level without
// PostgreSQL's colon, and the message ("C-0x...: db/user@addr ..." for
// a client, "S-0x..." for a server connection).
var bouncerRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Za-z][A-Za-z0-9+:/_-]*| [+-]\d\d(?::?\d\d)?)?) (?:\[(\d+)\]|(\d+)) (LOG|WARNING|ERROR|FATAL|NOISE|DEBUG|NOTICE) (.*)$`)
})

func parseBouncer(line string) (Entry, bool) {
	m := bouncerRe().FindStringSubmatch(line)
	if m == nil {
		return Entry{}, false
	}
	e := Entry{Time: parseTime(m[1]), Level: m[4], Message: m[5], Source: PgBouncer}
	if e.Time.IsZero() {
		if t, err := time.Parse("2006-01-02 15:04:05.999", m[1]); err == nil {
			e.Time = t.UTC()
		}
	}
	pid := m[2]
	if pid == "" {
		pid = m[3]
	}
	e.PID, _ = strconv.Atoi(pid)
	return e, true
}

// looksBouncer: most of the first lines are PgBouncer's.
func looksBouncer(lines []string) bool {
	n := 0
	for _, l := range lines {
		if _, ok := parseBouncer(l); ok {
			n++
		}
	}
	return n*2 >= len(lines) && n > 0
}

func readBouncer(r io.Reader, fn func(Entry)) (Stats, error) {
	var st Stats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		st.Lines++
		e, ok := parseBouncer(line)
		if !ok {
			if strings.TrimSpace(line) != "" {
				st.unrecognised(line)
			}
			continue
		}
		fn(e)
		st.Entries++
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading line %d: %w", st.Lines+1, err)
	}
	return st, nil
}

// bouncerReason is why PgBouncer closed a connection ("client close
// request", "query_wait_timeout", "client_idle_timeout", ...), from
// "closing because: REASON (age=...)".
func bouncerReason(msg string) (string, bool) {
	_, after, ok := strings.Cut(msg, "closing because: ")
	if !ok {
		return "", false
	}
	if i := strings.Index(after, " (age="); i >= 0 {
		after = after[:i]
	}
	return after, true
}

// addBouncer counts a PgBouncer line: logins, connections closed by
// reason (client or server side), clients that waited too long for a
// server connection, and errors.
func (s *Summary) addBouncer(e Entry) {
	msg := e.Message
	side := "client"
	if strings.HasPrefix(msg, "S-") {
		side = "server"
	}
	switch {
	case strings.Contains(msg, "login attempt: "):
		s.Events["pgbouncer logins"]++
	case strings.Contains(msg, "closing because: "):
		// One close per client: the "pooler error" line PgBouncer also
		// logs for it is counted apart.
		r, _ := bouncerReason(msg)
		s.Events["pgbouncer "+side+" closed: "+r]++
		if r == "query_wait_timeout" {
			s.Events["pgbouncer query_wait_timeout"]++
		}
	case strings.HasPrefix(msg, "stats: "), strings.HasPrefix(msg, "Stats: "):
		s.Events["pgbouncer stats lines"]++
	case strings.Contains(msg, "pooler error: "):
		s.Events["pgbouncer pooler errors"]++
	}
	if e.Level == "ERROR" || e.Level == "FATAL" || e.Level == "WARNING" {
		s.Events["pgbouncer "+strings.ToLower(e.Level)+"s"]++
	}
}
