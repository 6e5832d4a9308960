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
	"strconv"
	"strings"
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
// the log_line_prefix that matches most of its first lines; it says why
// when it cannot.
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
	best, bestN := (*Prefix)(nil), 0
	for _, text := range knownPrefixes {
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
		return "", nil, fmt.Errorf("no known log_line_prefix matches this log (first line: %.120q); give it with --prefix (SHOW log_line_prefix)", first[0])
	}
	return Stderr, best, nil
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
		return Stats{}, errors.New("a stderr log needs a log_line_prefix")
	}
	return readStderr(r, p, fn)
}

// readStderr joins continuation lines (PostgreSQL starts them with a tab)
// to their entry, and a DETAIL, HINT, CONTEXT or STATEMENT line to the
// message before it from the same process.
func readStderr(r io.Reader, p *Prefix, fn func(Entry)) (Stats, error) {
	var st Stats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	pending := map[int]*Entry{} // the last message of each process, not yet emitted
	var last *Entry
	var lastLevel string
	flush := func(pid int) {
		if e := pending[pid]; e != nil {
			fn(*e)
			st.Entries++
			delete(pending, pid)
		}
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		st.Lines++
		if strings.HasPrefix(line, "\t") && last != nil {
			last.attach(lastLevel, strings.TrimPrefix(line, "\t"))
			if lastLevel == "" || !detailLevels[lastLevel] {
				last.Message += "\n" + strings.TrimPrefix(line, "\t")
			}
			continue
		}
		e, ok := p.parse(line)
		if !ok {
			// A line without the prefix right after a message of several
			// lines belongs to it (auto_explain writes a text plan's JIT
			// block so); anywhere else it is not understood.
			if last != nil && strings.Contains(last.Message, "\n") && strings.TrimSpace(line) != "" {
				last.Message += "\n" + line
				continue
			}
			if strings.TrimSpace(line) != "" {
				st.unrecognised(line)
			}
			continue
		}
		if detailLevels[e.Level] {
			if prev := pending[e.PID]; prev != nil {
				prev.attach(e.Level, e.Message)
				last, lastLevel = prev, e.Level
				continue
			}
		}
		flush(e.PID)
		ne := e
		pending[e.PID] = &ne
		last, lastLevel = &ne, ""
		// Bound what waits: processes that log once and go away.
		if len(pending) > 10000 {
			for pid := range pending {
				flush(pid)
			}
		}
	}
	for pid := range pending {
		flush(pid)
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading line %d: %w", st.Lines+1, err)
	}
	return st, nil
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
