package logs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Format is how a log file is written.
type Format string

// The formats pgmedic reads.
const (
	Stderr Format = "stderr"
	CSV    Format = "csvlog"
	JSON   Format = "jsonlog"
)

// maxLine bounds one physical line (a statement or a plan can be long; a
// file of binary garbage must not take all memory).
const maxLine = 16 << 20

// Stats counts what a read saw: entries parsed, and lines no format
// explains, with the first few as examples.
type Stats struct {
	Entries int64 `json:"entries"`
	Lines   int64 `json:"lines"`
	// Other are lines recognised as not PostgreSQL's: a Kubernetes
	// operator's own messages in its log, say.
	Other        int64    `json:"other_lines,omitempty"`
	Unrecognised int64    `json:"unrecognised_lines"`
	Examples     []string `json:"unrecognised_examples,omitempty"`
}

func (s *Stats) unrecognised(line string) {
	s.Unrecognised++
	if len(s.Examples) < 5 {
		if len(line) > 160 {
			line = line[:160] + "..."
		}
		s.Examples = append(s.Examples, line)
	}
}

// Open wraps r for reading: gzip is recognised by its magic bytes.
func Open(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading the gzip header: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// Detect tells the format from the first bytes of a log, and for stderr
// and syslog the log_line_prefix that matches most of its first messages;
// it says why when it cannot.
func Detect(head []byte) (Format, *Prefix, error) {
	first := headLines(head)
	if len(first) == 0 {
		return "", nil, errors.New("the log is empty")
	}
	if strings.HasPrefix(first[0], "{") && json.Valid([]byte(first[0])) {
		f := classifyJSON(first)
		switch {
		case f == "":
			return JSON, nil, fmt.Errorf("the log's lines are JSON objects of no kind pgmedic knows (it reads %s; first: %.120q)", strings.Join(jsonFormats(), ", "), first[0])
		case rowOf(f).entry != nil:
			return f, nil, nil // the fields are PostgreSQL's own: no prefix
		}
		texts := carriedTexts(f, first)
		if len(texts) == 0 {
			return f, nil, errors.New("the log's JSON lines hold no PostgreSQL message start")
		}
		p, err := detectPrefix(texts, append(append([]string{}, knownPrefixes...), carriedPrefixes...), string(f)+" log's messages")
		return f, p, err
	}
	if looksCSV(head) {
		return CSV, nil, nil
	}
	if looksBouncer(first) {
		return PgBouncer, nil, nil
	}
	format, candidates := Stderr, knownPrefixes
	if texts, ok := logplexTexts(first); ok {
		format, first, candidates = Logplex, texts, append(append([]string{}, knownPrefixes...), carriedPrefixes...)
	} else if texts, ok := syslogTexts(first); ok {
		// syslog's header says the time and the process: servers that
		// log to syslog often keep only the session fields in the prefix,
		// or none.
		format, first, candidates = Syslog, texts, append(append([]string{}, knownPrefixes...), syslogPrefixes...)
		if len(first) == 0 {
			return Syslog, nil, errors.New("the syslog lines hold no PostgreSQL message start")
		}
	}
	what := "log"
	if format == Syslog {
		what = "syslog file's messages"
	}
	p, err := detectPrefix(first, candidates, what)
	return format, p, err
}

// headLines are the first 200 lines of a log's head that can start an
// entry (not blank, not a continuation).
func headLines(head []byte) []string {
	lines := strings.Split(strings.ReplaceAll(string(head), "\r\n", "\n"), "\n")
	if len(lines) > 1 {
		lines = lines[:len(lines)-1] // the last may be cut
	}
	var first []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "\t") {
			first = append(first, l)
		}
		if len(first) == 200 {
			break
		}
	}
	return first
}

// needsPrefix says whether a format carries PostgreSQL's stderr lines,
// whose log_line_prefix must be known to read them.
func needsPrefix(f Format) bool { return rowOf(f).texts != nil }

// prefixFor detects the log_line_prefix of a log read as format f (named
// with --format-in).
func prefixFor(f Format, head []byte) (*Prefix, error) {
	first := headLines(head)
	var texts []string
	if row := rowOf(f); row.texts != nil {
		texts = row.texts(f, first)
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("no line of this log reads as %s", f)
	}
	candidates := append(append(append([]string{}, knownPrefixes...), syslogPrefixes...), carriedPrefixes...)
	return detectPrefix(texts, candidates, string(f)+" log")
}

// detectPrefix picks the log_line_prefix that parses most of the lines
// (known ones first, then one inferred from the lines themselves).
func detectPrefix(first, candidates []string, what string) (*Prefix, error) {
	if len(first) == 0 {
		return nil, fmt.Errorf("this %s holds no PostgreSQL message start", what)
	}
	best, bestN := (*Prefix)(nil), 0
	for _, text := range candidates {
		p, err := CompilePrefix(text)
		if err != nil {
			continue
		}
		n := 0
		for _, l := range first {
			if _, ok := p.parse(l); ok {
				n++
			}
		}
		if n > bestN {
			best, bestN = p, n
		}
	}
	if best == nil || bestN*2 < len(first) {
		if p := inferPrefix(first); p != nil {
			return p, nil
		}
		// The format is said even so: a --prefix applies to it.
		return nil, fmt.Errorf("no known log_line_prefix matches this %s (first: %.120q); give it with --prefix (SHOW log_line_prefix)", what, first[0])
	}
	return best, nil
}

// looksCSV: a csvlog record starts with a timestamp (bare as PostgreSQL
// writes it, quoted by some exports) and has at least 22 fields (23 up to
// PostgreSQL 12, 24 in 13 with backend_type, 26 from 14 with leader_pid
// and query_id). The first record is read as CSV, not
// as a line: its message may hold quoted newlines.
func looksCSV(head []byte) bool {
	start := strings.TrimLeft(string(head[:min(len(head), 40)]), "\"")
	if len(start) < 20 || start[4] != '-' || start[10] != ' ' {
		return false
	}
	r := csv.NewReader(bytes.NewReader(head))
	r.LazyQuotes = true
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	return err == nil && len(rec) >= 22 && !parseTime(rec[0]).IsZero()
}

// Read parses a whole log of one format, calling fn for each entry once it
// is complete (its continuation and DETAIL/STATEMENT lines attached).
func Read(r io.Reader, f Format, p *Prefix, fn func(Entry)) (Stats, error) {
	row := rowOf(f)
	if row.read == nil {
		return Stats{}, fmt.Errorf("%q is not a log format pgmedic reads", f)
	}
	if row.texts != nil && p == nil {
		return Stats{}, fmt.Errorf("a %s log needs a log_line_prefix", f)
	}
	return row.read(r, f, p, fn)
}

// readStderr joins continuation lines (PostgreSQL starts them with a tab)
// to their entry, and a DETAIL, HINT, CONTEXT or STATEMENT line to the
// message before it from the same process.
func readStderr(r io.Reader, p *Prefix, fn func(Entry)) (Stats, error) {
	var st Stats
	a := newAssembler(p, &st, fn)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	for sc.Scan() {
		st.Lines++
		a.line(strings.TrimSuffix(sc.Text(), "\r"), time.Time{}, 0)
	}
	a.close()
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading line %d: %w", st.Lines+1, err)
	}
	return st, nil
}

// assembler turns the lines of a stderr log (or the messages a syslog
// carried, put back together) into entries.
type assembler struct {
	p  *Prefix
	st *Stats
	fn func(Entry)
	// pending is the last message of each process, not yet emitted,
	// with when it came (to emit the rest in order at the end).
	pending   map[int]*pendingEntry
	free      []*pendingEntry // emitted ones, reused: a message per line would be an allocation per line
	seq       int
	last      *pendingEntry // the message the next continuation line belongs to
	lastLevel string        // and to which of its parts ("" the message, DETAIL, ...)
}

// pendingEntry is a message waiting for the lines that belong to it.
// Continuation lines are collected in more and joined once (a plan of a
// thousand lines added one by one would copy the message a thousand
// times).
type pendingEntry struct {
	Entry
	seq       int
	more      []string
	moreLevel string
}

// settle joins the collected continuation lines into the part they
// continue.
func (pe *pendingEntry) settle() {
	if len(pe.more) == 0 {
		return
	}
	if pe.moreLevel == "" {
		// One allocation for the message and all its lines.
		n := len(pe.Message)
		for _, l := range pe.more {
			n += 1 + len(l)
		}
		var b strings.Builder
		b.Grow(n)
		b.WriteString(pe.Message)
		for _, l := range pe.more {
			b.WriteByte('\n')
			b.WriteString(l)
		}
		pe.Message = b.String()
	} else {
		pe.attach(pe.moreLevel, strings.Join(pe.more, "\n"))
	}
	clear(pe.more) // the lines are not kept alive by the reused slice
	pe.more = pe.more[:0]
}

// continueWith adds a continuation line to a part of the message.
func (pe *pendingEntry) continueWith(level, line string) {
	if level != pe.moreLevel {
		pe.settle()
		pe.moreLevel = level
	}
	pe.more = append(pe.more, line)
}

func newAssembler(p *Prefix, st *Stats, fn func(Entry)) *assembler {
	if p != nil {
		p = p.forReader()
	}
	return &assembler{p: p, st: st, fn: fn, pending: map[int]*pendingEntry{}}
}

func (a *assembler) flush(pid int) {
	if pe := a.pending[pid]; pe != nil {
		pe.settle()
		a.fn(pe.Entry)
		a.st.Entries++
		delete(a.pending, pid)
		if a.last == pe {
			a.last = nil
		}
		pe.Entry, pe.moreLevel = Entry{}, ""
		a.free = append(a.free, pe)
	}
}

// serverTool says whether a line is the output of a program that starts
// or stops the server into the same file (pg_ctl -l writes its own
// messages there; so do pg_ctlcluster and initdb when a script redirects
// them): not the server's, so not a line pgmedic failed to read.
func serverTool(line string) bool {
	for _, p := range []string{"pg_ctl: ", "pg_ctlcluster: ", "initdb: ", "postgres: ", "waiting for server to ", "server started", "server stopped",
		"server starting", "stopped waiting", "Examine the log output.", "done", " done"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// line takes one line; at and pid stand in for what a prefix without %m
// or %p does not say (syslog's own header says it).
func (a *assembler) line(line string, at time.Time, pid int) {
	if strings.HasPrefix(line, "\t") && a.last != nil {
		a.last.continueWith(a.lastLevel, line[1:])
		return
	}
	e, ok := a.p.parse(line)
	if !ok {
		// A line without the prefix right after a message of several
		// lines belongs to it (auto_explain writes a text plan's JIT
		// block so); anywhere else it is not understood.
		if a.last != nil && strings.TrimSpace(line) != "" && carriesSQL(a.last, a.lastLevel) {
			a.last.continueWith(a.lastLevel, line)
			return
		}
		switch {
		case serverTool(line):
			a.st.Other++
		case strings.TrimSpace(line) != "":
			a.st.unrecognised(line)
		}
		return
	}
	if e.Time.IsZero() {
		e.Time = at
	}
	if e.PID == 0 {
		e.PID = pid
	}
	if detailLevels()[e.Level] {
		if prev := a.pending[e.PID]; prev != nil {
			prev.settle()
			prev.attach(e.Level, e.Message)
			a.last, a.lastLevel = prev, e.Level
			return
		}
	}
	a.flush(e.PID)
	// Bound what waits: processes that log once and go away. The new
	// message is not among those emitted, so its own next lines still
	// find it.
	if len(a.pending) >= 10000 {
		a.close()
	}
	var pe *pendingEntry
	if n := len(a.free); n > 0 {
		pe, a.free = a.free[n-1], a.free[:n-1]
	} else {
		pe = new(pendingEntry)
	}
	a.seq++
	pe.Entry, pe.seq = e, a.seq
	a.pending[e.PID] = pe
	a.last, a.lastLevel = pe, ""
}

// carriesSQL says whether a line without the prefix after this message
// continues it: a message already of several lines (auto_explain writes a
// text plan's JIT block so), or one that ends in a statement's text,
// whose later lines a client may have indented with spaces rather than
// the tab PostgreSQL puts before each of its own.
func carriesSQL(pe *pendingEntry, level string) bool {
	switch level {
	case "STATEMENT", "QUERY", "CONTEXT", "DETAIL":
		return true
	}
	if len(pe.more) > 0 && pe.moreLevel == "" {
		return true
	}
	m := pe.Message
	return strings.Contains(m, "\n") || strings.Contains(m, "statement: ") || strings.Contains(m, "execute ") || strings.Contains(m, "plan:")
}

// close emits every message still waiting, in the order they came.
func (a *assembler) close() {
	pids := make([]int, 0, len(a.pending))
	for pid := range a.pending {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return a.pending[pids[i]].seq < a.pending[pids[j]].seq })
	for _, pid := range pids {
		a.flush(pid)
	}
}

// csvColumns are csvlog's columns (PostgreSQL 15; earlier versions have a
// prefix of them).
const (
	csvTime = iota
	csvUser
	csvDB
	csvPID
	csvClient
	csvSession
	csvLine
	csvTag
	csvSessionStart
	csvVXID
	csvXID
	csvLevel
	csvState
	csvMessage
	csvDetail
	csvHint
	csvInternalQuery
	csvInternalPos
	csvContext
	csvQuery
	csvQueryPos
	csvLocation
	csvApp
)

func readCSV(r io.Reader, fn func(Entry)) (Stats, error) {
	var st Stats
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = true
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return st, nil
		}
		st.Lines++
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			st.unrecognised(fmt.Sprintf("line %d: %v", pe.StartLine, pe.Err))
			continue
		}
		if err != nil {
			return st, fmt.Errorf("reading the csv log: %w", err)
		}
		if len(rec) <= csvMessage {
			st.unrecognised(strings.Join(rec, ","))
			continue
		}
		get := func(i int) string {
			if i < len(rec) {
				return rec[i]
			}
			return ""
		}
		pid, _ := strconv.Atoi(get(csvPID))
		e := Entry{Time: parseTime(get(csvTime)), User: get(csvUser), Database: get(csvDB), PID: pid, Client: hostOf(get(csvClient)),
			Level: get(csvLevel), SQLState: get(csvState), Message: get(csvMessage), Detail: get(csvDetail), Hint: get(csvHint),
			Context: get(csvContext), Statement: get(csvQuery), App: get(csvApp), Session: get(csvSession)}
		fn(e)
		st.Entries++
	}
}

func hostOf(s string) string {
	if i := strings.LastIndexByte(s, ':'); i > 0 && !strings.Contains(s[i:], "]") {
		return s[:i]
	}
	return s
}

// readJSON reads a log whose lines are JSON objects that took
// PostgreSQL's line apart: jsonlog, CloudNativePG's records, Azure's
// export.
func readJSON(r io.Reader, fn func(Entry)) (Stats, error) {
	var st Stats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		st.Lines++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var j jsonLine
		if err := json.Unmarshal(line, &j); err != nil {
			st.unrecognised(string(line))
			continue
		}
		e, kind := j.entry()
		switch kind {
		case other:
			st.Other++
		case notRecognised:
			st.unrecognised(string(line))
		default:
			fn(e)
			st.Entries++
		}
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading line %d: %w", st.Lines+1, err)
	}
	return st, nil
}
