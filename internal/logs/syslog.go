package logs

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Syslog is a log PostgreSQL sent to syslog (log_destination = 'syslog')
// as a syslog daemon writes it to a file.
const Syslog Format = "syslog"

// syslogRe reads a syslog file line: rsyslog's traditional timestamp
// ("Nov 23 08:12:01") or an RFC 3339 one, the host, the program with its
// PID, and PostgreSQL's "[message-chunk]" numbers (syslog_sequence_numbers,
// on by default), before the text with its log_line_prefix.
var syslogRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?) \S+ ([^\s\[]+)\[(\d+)\]: (?:\[(\d+)-(\d+)\] )?(.*)$`)
})

// syslogLine is one line of a syslog file.
type syslogLine struct {
	// program is the syslog tag's name: PostgreSQL's syslog_ident, or
	// another program writing to the same file.
	program string
	at      time.Time
	pid     int
	seq     string
	chunk   int // 0 when sequence numbers are off
	text    string
}

func parseSyslog(line string, now time.Time) (syslogLine, bool) {
	m := syslogRe().FindStringSubmatch(line)
	if m == nil {
		return syslogLine{}, false
	}
	l := syslogLine{program: m[2], seq: m[4], text: m[6]}
	l.pid, _ = strconv.Atoi(m[3])
	l.chunk, _ = strconv.Atoi(m[5])
	l.at = syslogTime(m[1], now)
	// rsyslog writes control characters as #ooo: PostgreSQL starts each
	// continuation line with a tab.
	l.text = strings.ReplaceAll(l.text, "#011", "\t")
	return l, true
}

// syslogTime reads the header's time. The traditional format has no year
// and no zone: the year is the one that puts the line in the past (a log
// read in January holds December's lines), and the time is taken as UTC.
func syslogTime(v string, now time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC()
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999999-0700", v); err == nil {
		return t.UTC()
	}
	t, err := time.Parse("Jan _2 15:04:05", v)
	if err != nil {
		return time.Time{}
	}
	t = t.AddDate(now.Year(), 0, 0)
	if t.After(now.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return t
}

// syslogTexts are the message texts of a syslog head, for detecting the
// log_line_prefix inside them; ok when most lines are syslog lines.
func syslogTexts(lines []string) ([]string, bool) {
	var texts []string
	n := 0
	for _, l := range lines {
		s, ok := parseSyslog(l, time.Now())
		if !ok {
			continue
		}
		n++
		if s.chunk <= 1 {
			texts = append(texts, s.text)
		}
	}
	return texts, n*2 >= len(lines) && n > 0
}

// readSyslog puts PostgreSQL's messages back together and reads them as a
// stderr log. PostgreSQL sends each line of what it logs at once (the
// message, the continuation lines of a statement or plan, its DETAIL,
// HINT and STATEMENT lines) as its own syslog record, and cuts lines
// longer than 900 bytes, at a space where it can (syslog_split_messages),
// numbering the pieces [message-1], [message-2], ...: a piece that starts
// with a tab or with the log_line_prefix is the next line, any other
// continues the line before. Records of different processes interleave,
// so each process's message is collected until its next one starts.
func readSyslog(r io.Reader, p *Prefix, fn func(Entry)) (Stats, error) {
	return readSyslogAt(r, p, fn, time.Now())
}

// readSyslogAt is readSyslog with the time that dates headers without a
// year.
func readSyslogAt(r io.Reader, p *Prefix, fn func(Entry), now time.Time) (Stats, error) {
	return readCarried(r, p, fn, func(raw string) (syslogLine, lineKind) {
		l, ok := parseSyslog(raw, now)
		switch {
		case !ok:
			return l, notRecognised
		case systemPrograms()[l.program]:
			return l, other
		}
		return l, carries
	})
}

// systemPrograms write to the same syslog file as PostgreSQL on most
// systems (systemd says when it starts the cluster): their lines are not
// the server's, so not lines pgmedic failed to read.
var systemPrograms = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"systemd": true, "kernel": true, "CRON": true, "cron": true, "sshd": true, "rsyslogd": true,
		"sudo": true, "systemd-journald": true, "systemd-logind": true, "pg_ctl": true, "pg_ctlcluster": true}
})

// lineKind is what a physical line of a log that carries PostgreSQL's
// lines inside another format (syslog, a cloud's JSON) turned out to be.
type lineKind int

const (
	notRecognised lineKind = iota
	carries                // a PostgreSQL line (or a piece of one)
	other                  // a line of the carrier's own (an operator's message)
)

// readCarried puts back together the PostgreSQL lines a carrier format
// holds, one record per physical line, and reads them as a stderr log.
// unwrap takes a record apart: the PostgreSQL text, and what the carrier
// says of it (time, process, syslog's sequence and piece numbers). A
// record without a process or a piece number that starts with a tab, or
// without the prefix, continues the last message (a carrier that sends
// each line of a plan as its own record).
func readCarried(r io.Reader, p *Prefix, fn func(Entry), unwrap func(string) (syslogLine, lineKind)) (Stats, error) {
	var st Stats
	a := newAssembler(p, &st, fn)
	open := map[int]*syslogMessage{}
	var last *syslogMessage
	order := 0
	emit := func(m *syslogMessage) {
		for _, l := range m.lines {
			a.line(l, m.at, m.pid)
		}
		delete(open, m.pid)
		if last == m {
			last = nil
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		raw := strings.TrimSuffix(sc.Text(), "\r")
		st.Lines++
		l, kind := unwrap(raw)
		switch kind {
		case other:
			st.Other++
			continue
		case notRecognised:
			if strings.TrimSpace(raw) != "" {
				st.unrecognised(raw)
			}
			continue
		}
		texts := strings.Split(strings.TrimSuffix(l.text, "\n"), "\n")
		m := open[l.pid]
		if l.chunk > 1 {
			if m == nil || m.seq != l.seq {
				st.unrecognised(raw) // the message's first piece is not in this file
				continue
			}
			for i, t := range texts {
				if _, prefixed := p.parse(t); prefixed || strings.HasPrefix(t, "\t") || i > 0 {
					m.lines = append(m.lines, t)
				} else {
					m.lines[len(m.lines)-1] += t
				}
			}
			continue
		}
		if l.chunk == 0 && l.pid == 0 && last != nil {
			if _, prefixed := p.parse(texts[0]); !prefixed {
				last.lines = append(last.lines, texts...)
				continue
			}
		}
		if m != nil {
			emit(m)
		}
		if l.chunk <= 1 {
			// A message's first piece: what stands before its prefix is
			// the carrier's padding.
			texts[0] = strings.TrimLeft(texts[0], " ")
		}
		order++
		m = &syslogMessage{order: order, at: l.at, pid: l.pid, seq: l.seq, lines: texts}
		open[l.pid], last = m, m
		if len(open) > 10000 {
			flushOpen(open, emit)
		}
	}
	flushOpen(open, emit)
	a.close()
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading line %d: %w", st.Lines+1, err)
	}
	return st, nil
}

// syslogMessage is one process's message being put back together.
type syslogMessage struct {
	order int
	at    time.Time
	pid   int
	seq   string
	lines []string
}

// flushOpen emits the collected messages in the order they started.
func flushOpen(open map[int]*syslogMessage, emit func(*syslogMessage)) {
	all := make([]*syslogMessage, 0, len(open))
	for _, m := range open {
		all = append(all, m)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].order < all[j].order })
	for _, m := range all {
		emit(m)
	}
}
