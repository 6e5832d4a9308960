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
	Entries      int64    `json:"entries"`
	Lines        int64    `json:"lines"`
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
	if len(first) == 0 {
		return "", nil, errors.New("the log is empty")
	}
	if strings.HasPrefix(first[0], "{") && json.Valid([]byte(first[0])) {
		return JSON, nil, nil
	}
	if looksCSV(first[0]) {
		return CSV, nil, nil
	}
	format, candidates := Stderr, knownPrefixes
	if texts, ok := syslogTexts(first); ok {
		// syslog's header says the time and the process: servers that
		// log to syslog often keep only the session fields in the prefix,
		// or none.
		format, first, candidates = Syslog, texts, append(append([]string{}, knownPrefixes...), syslogPrefixes...)
		if len(first) == 0 {
			return Syslog, nil, errors.New("the syslog lines hold no PostgreSQL message start")
		}
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
			return format, p, nil
		}
		// The format is said even so: a --prefix applies to it.
		what := "log"
		if format == Syslog {
			what = "syslog file's messages"
		}
		return format, nil, fmt.Errorf("no known log_line_prefix matches this %s (first: %.120q); give it with --prefix (SHOW log_line_prefix)", what, first[0])
	}
	return format, best, nil
}

// looksCSV: a csvlog line starts with a timestamp and has at least 20
// fields.
func looksCSV(line string) bool {
	if len(line) < 20 || line[4] != '-' || !strings.Contains(line, ",") {
		return false
	}
	r := csv.NewReader(strings.NewReader(line))
	r.LazyQuotes = true
	rec, err := r.Read()
	return err == nil && len(rec) >= 20
}

// Read parses a whole log of one format, calling fn for each entry once it
// is complete (its continuation and DETAIL/STATEMENT lines attached).
func Read(r io.Reader, f Format, p *Prefix, fn func(Entry)) (Stats, error) {
	switch f {
	case CSV:
		return readCSV(r, fn)
	case JSON:
		return readJSON(r, fn)
	}
	if p == nil {
		return Stats{}, fmt.Errorf("a %s log needs a log_line_prefix", f)
	}
	if f == Syslog {
		return readSyslog(r, p, fn)
	}
	return readStderr(r, p, fn)
}

// readStderr joins continuation lines (PostgreSQL starts them with a tab)
// to their entry, and a DETAIL, HINT, CONTEXT or STATEMENT line to the
// message before it from the same process.
func readStderr(r io.Reader, p *Prefix, fn func(Entry)) (Stats, error) {
	var st Stats
	a := newAssembler(p, &st, fn)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
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
	p         *Prefix
	st        *Stats
	fn        func(Entry)
	pending   map[int]*Entry // the last message of each process, not yet emitted
	arrived   map[int]int    // when each pending message came, to emit the rest in order
	seq       int
	last      *Entry
	lastLevel string
}

func newAssembler(p *Prefix, st *Stats, fn func(Entry)) *assembler {
	return &assembler{p: p, st: st, fn: fn, pending: map[int]*Entry{}, arrived: map[int]int{}}
}

func (a *assembler) flush(pid int) {
	if e := a.pending[pid]; e != nil {
		a.fn(*e)
		a.st.Entries++
		delete(a.pending, pid)
		delete(a.arrived, pid)
	}
}

// line takes one line; at and pid stand in for what a prefix without %m
// or %p does not say (syslog's own header says it).
func (a *assembler) line(line string, at time.Time, pid int) {
	if strings.HasPrefix(line, "\t") && a.last != nil {
		a.last.attach(a.lastLevel, strings.TrimPrefix(line, "\t"))
		if a.lastLevel == "" || !detailLevels[a.lastLevel] {
			a.last.Message += "\n" + strings.TrimPrefix(line, "\t")
		}
		return
	}
	e, ok := a.p.parse(line)
	if !ok {
		// A line without the prefix right after a message of several
		// lines belongs to it (auto_explain writes a text plan's JIT
		// block so); anywhere else it is not understood.
		if a.last != nil && strings.Contains(a.last.Message, "\n") && strings.TrimSpace(line) != "" {
			a.last.Message += "\n" + line
			return
		}
		if strings.TrimSpace(line) != "" {
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
	if detailLevels[e.Level] {
		if prev := a.pending[e.PID]; prev != nil {
			prev.attach(e.Level, e.Message)
			a.last, a.lastLevel = prev, e.Level
			return
		}
	}
	a.flush(e.PID)
	ne := e
	a.pending[e.PID] = &ne
	a.seq++
	a.arrived[e.PID] = a.seq
	a.last, a.lastLevel = &ne, ""
	// Bound what waits: processes that log once and go away.
	if len(a.pending) > 10000 {
		a.close()
	}
}

// close emits every message still waiting, in the order they came.
func (a *assembler) close() {
	pids := make([]int, 0, len(a.pending))
	for pid := range a.pending {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return a.arrived[pids[i]] < a.arrived[pids[j]] })
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
			Context: get(csvContext), Statement: get(csvQuery), App: get(csvApp)}
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

// jsonEntry is one jsonlog line (PostgreSQL 15).
type jsonEntry struct {
	Timestamp string `json:"timestamp"`
	User      string `json:"user"`
	DB        string `json:"dbname"`
	PID       int    `json:"pid"`
	Host      string `json:"remote_host"`
	Level     string `json:"error_severity"`
	State     string `json:"state_code"`
	Message   string `json:"message"`
	Detail    string `json:"detail"`
	Hint      string `json:"hint"`
	Context   string `json:"context"`
	Statement string `json:"statement"`
	App       string `json:"application_name"`
}

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
		var j jsonEntry
		if err := json.Unmarshal(line, &j); err != nil || j.Level == "" {
			st.unrecognised(string(line))
			continue
		}
		fn(Entry{Time: parseTime(j.Timestamp), User: j.User, Database: j.DB, PID: j.PID, Client: j.Host, Level: j.Level,
			SQLState: j.State, Message: j.Message, Detail: j.Detail, Hint: j.Hint, Context: j.Context, Statement: j.Statement, App: j.App})
		st.Entries++
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading line %d: %w", st.Lines+1, err)
	}
	return st, nil
}
