// Package capture turns a server log into a workload that can be run
// again: the sessions the log saw, each with its statements in order,
// their literal values and bind parameters, and when each was sent.
//
// PostgreSQL logs a statement in one of two ways, and a log may have both:
//   - log_statement = all writes "statement: SQL" (or "execute NAME: SQL"
//     for the extended protocol) when the statement arrives, then
//     log_duration or log_min_duration_statement = 0 writes a bare
//     "duration: X ms" when it ends;
//   - log_min_duration_statement = 0 alone writes "duration: X ms
//     statement: SQL" when it ends, so it was sent X ms before the line.
//
// The extended protocol's values are in the DETAIL line after an execute
// ("parameters: $1 = '42', $2 = NULL"). log_connections and
// log_disconnections mark where sessions begin and end; without them a
// session is a process from its first statement to its last.
package capture

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Kind is how a statement reached the server.
type Kind uint8

const (
	// Simple is the simple-query protocol: the text as sent, with its
	// values written in (it may hold several statements).
	Simple Kind = iota
	// Extended is the extended protocol: a text with $n and its values.
	Extended
	// CopyOut is COPY ... TO STDOUT: replayed, its rows discarded.
	CopyOut
)

// Statement is one statement a session sent.
type Statement struct {
	// At is when it was sent, from the capture's first event.
	At   time.Duration
	Kind Kind
	SQL  string
	// Params are an extended statement's values as text; nil is NULL.
	Params []*string `json:",omitempty"`
	// Name is the prepared statement an execute used ("" unnamed): a
	// replay prepares it once per session, as the application did, so
	// plan caching behaves alike.
	Name string `json:",omitempty"`
	// Took is how long it ran at capture (0 when the log did not say).
	Took time.Duration
	// Failed says it ended in an error at capture.
	Failed bool `json:",omitempty"`
	// Shape is the statement's index in Workload.Shapes.
	Shape int32
	// timed says a duration line has been paired with it; sent is At
	// before the capture's start is known.
	timed bool
	sent  time.Time
}

// Values are an extended statement's parameters as the protocol sends
// them: text, nil for NULL.
func (st *Statement) Values() [][]byte {
	out := make([][]byte, len(st.Params))
	for i, p := range st.Params {
		if p != nil {
			out[i] = []byte(*p)
		}
	}
	return out
}

// Session is one connection of the capture.
type Session struct {
	// ID is the session's identifier (%c) or "pid N".
	ID                  string
	User, Database, App string
	// Start and End are when it connected and disconnected, from the
	// capture's first event (its first and last statement when the log
	// has no connection lines).
	Start, End time.Duration
	Statements []Statement
	// anchored says the log saw it connect; open that it has not
	// disconnected yet.
	anchored, open bool
	began          time.Time
	ended          time.Time
	// pending is the index of a log_statement line waiting for its
	// duration (-1 none).
	pending int
}

// waiting is the statement log_statement logged that has no duration yet.
func (s *Session) waiting() *Statement {
	if s == nil || s.pending < 0 || s.pending >= len(s.Statements) {
		return nil
	}
	return &s.Statements[s.pending]
}

// Skip counts statements (or sessions) left out of a replay, for one
// reason, with an example.
type Skip struct {
	Reason  string `json:"reason"`
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"`
}

// Workload is what a replay runs.
type Workload struct {
	// Start is the capture's first event; Duration runs to its last.
	Start    time.Time
	Duration time.Duration
	Sessions []*Session
	// Statements counts those kept; Transactions the BEGINs among them;
	// Failed those that ended in an error at capture.
	Statements, Transactions, Failed, Extended int
	// Skipped says what is not replayed and why.
	Skipped []Skip
	// Shapes are the statements' fingerprints and normalised texts.
	Shapes []Shape
	// Databases counts sessions by database.
	Databases map[string]int
	// Notes say how the log limits the replay (no connection lines,
	// timestamps to the second).
	Notes []string
	Files []logs.FileStats
}

// maxSpan bounds the time a capture covers.
const maxSpan = 31 * 24 * time.Hour

// Shape is a statement's fingerprint (its text without literals, parsed)
// and its normalised text.
type Shape struct {
	Fingerprint string `json:"fingerprint"`
	Query       string `json:"query"`
}

// Options filter a capture.
type Options struct {
	// Database keeps only that database's sessions ("" all).
	Database string
	logs.Options
}

// Read captures the workload of the logs, read in order.
func Read(ctx context.Context, sources []logs.Source, opt Options) (*Workload, error) {
	b := newBuilder(opt)
	for _, src := range sources {
		fs, err := logs.Each(ctx, src, opt.Options, b.add)
		b.w.Files = append(b.w.Files, fs)
		if err != nil {
			return nil, fmt.Errorf("reading %w", err)
		}
		if fs.Entries == 0 {
			why := fmt.Sprintf("none of its %d lines reads as %s", fs.Lines, fs.Format)
			if fs.Prefix != "" {
				why += fmt.Sprintf(" with log_line_prefix %q", fs.Prefix)
			}
			return nil, fmt.Errorf("%s: nothing could be parsed (%s); check --prefix (SHOW log_line_prefix) and --format-in", src.Name, why)
		}
	}
	return b.finish()
}

// builder assembles sessions from entries.
type builder struct {
	opt Options
	w   *Workload
	// open are the sessions by key (session id, or pid).
	open map[string]*Session
	done []*Session
	// connections says the log has log_connections lines.
	connections bool
	first, last time.Time
	// times and wholeSeconds count entries, and those whose time has no
	// fraction: all of them means a prefix with %t.
	times, wholeSeconds int
	texts               map[string]string // one copy of each statement text
	skips               map[string]*Skip
	skipOrder           []string
	ownSkipped          int
}

func newBuilder(opt Options) *builder {
	return &builder{opt: opt, w: &Workload{Databases: map[string]int{}}, open: map[string]*Session{},
		texts: map[string]string{}, skips: map[string]*Skip{}}
}

// The reasons a statement or session is not replayed.
const (
	skipCopyIn      = "COPY ... FROM STDIN: its rows are not in the log"
	skipBefore      = "statements of sessions that began before the log (they may be inside a transaction the log does not show)"
	skipNoParams    = "failed extended-protocol statements without their values (log_parameter_max_length_on_error = -1 logs them, except for a value that fails its own type's input)"
	skipDatabase    = "statements of other databases (--database)"
	skipOwn         = "pgmedic's own statements"
	skipFetch       = "fetches from an open portal (the execute that opened it is replayed)"
	skipOrphanParam = "parameters without the execute they belong to"
)

func (b *builder) skip(reason, example string) {
	s := b.skips[reason]
	if s == nil {
		s = &Skip{Reason: reason}
		b.skips[reason] = s
		b.skipOrder = append(b.skipOrder, reason)
	}
	s.Count++
	if s.Example == "" && example != "" {
		s.Example = printable.Clip(example, 160)
	}
}

// intern keeps one copy of each text: a workload repeats a few shapes
// hundreds of thousands of times.
func (b *builder) intern(s string) string {
	if t, ok := b.texts[s]; ok {
		return t
	}
	b.texts[s] = s
	return s
}

func key(e logs.Entry) string {
	if e.Session != "" {
		return e.Session
	}
	return fmt.Sprintf("pid %d", e.PID)
}

// own says the entry is pgmedic's (its replays and its checks): a replay
// of a log that holds a replay must not run it twice.
func own(e logs.Entry) bool {
	return strings.HasPrefix(e.App, "pgmedic")
}

func (b *builder) add(e logs.Entry) {
	if e.Source != "" || e.Time.IsZero() {
		return
	}
	if b.first.IsZero() || e.Time.Before(b.first) {
		b.first = e.Time
	}
	if e.Time.After(b.last) {
		b.last = e.Time
	}
	b.times++
	if e.Time.Nanosecond() == 0 {
		b.wholeSeconds++
	}
	msg := e.Message
	k := key(e)
	switch {
	case strings.HasPrefix(msg, "connection authorized: "), strings.HasPrefix(msg, "connection authenticated: "):
		if strings.HasPrefix(msg, "connection authenticated: ") {
			return // PostgreSQL 17 writes both; authorized names the database
		}
		b.connections = true
		b.close(k, e.Time)
		s := &Session{ID: k, anchored: true, open: true, began: e.Time, pending: -1}
		s.User, s.Database, s.App = field(msg, "user="), field(msg, "database="), field(msg, "application_name=")
		if s.User == "" {
			s.User = e.User
		}
		if s.Database == "" {
			s.Database = e.Database
		}
		b.open[k] = s
		return
	case strings.HasPrefix(msg, "connection received: "):
		b.connections = true
		return
	case strings.HasPrefix(msg, "disconnection: "):
		b.connections = true
		b.close(k, e.Time)
		return
	}
	if e.Level == "ERROR" || e.Level == "FATAL" {
		b.failed(k, e)
		return
	}
	if e.Level != "LOG" {
		return
	}
	if ms, kind, text, ok := logs.ParseDuration(msg); ok {
		took := time.Duration(ms * float64(time.Millisecond))
		switch kind {
		case "":
			// log_statement wrote the text before; this is its end.
			if s := b.open[k]; s.waiting() != nil {
				st := s.waiting()
				st.Took, st.timed = took, true
				s.pending = -1
			}
		case "statement":
			b.statement(k, e, e.Time.Add(-took), Simple, text, "", took, true)
		case "execute":
			b.execute(k, e, e.Time.Add(-took), msg, text, took, true)
		}
		return
	}
	switch {
	case strings.HasPrefix(msg, "statement: "):
		b.statement(k, e, e.Time, Simple, msg[len("statement: "):], "", 0, false)
	case strings.HasPrefix(msg, "execute "):
		_, text, ok := strings.Cut(msg, ": ")
		if ok {
			b.execute(k, e, e.Time, "duration: 0 ms  "+msg, text, 0, false)
		}
	}
}

// field reads "name=value" from a connection line (values end at a space).
func field(msg, name string) string {
	i := strings.Index(msg, " "+name)
	if i < 0 {
		return ""
	}
	v := msg[i+1+len(name):]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// session is the open session of key k, made when the log did not see it
// connect.
func (b *builder) session(k string, e logs.Entry) *Session {
	s := b.open[k]
	if s == nil {
		s = &Session{ID: k, open: true, began: e.Time, User: e.User, Database: e.Database, App: e.App, pending: -1}
		b.open[k] = s
	}
	if s.App == "" {
		s.App = e.App
	}
	return s
}

// close ends the open session of key k.
func (b *builder) close(k string, at time.Time) {
	if s := b.open[k]; s != nil {
		s.open, s.ended = false, at
		b.done = append(b.done, s)
		delete(b.open, k)
	}
}

// statement adds a statement to its session, and returns it (nil when it
// is left out).
func (b *builder) statement(k string, e logs.Entry, sent time.Time, kind Kind, text, name string, took time.Duration, timed bool) *Statement {
	s := b.session(k, e)
	s.pending = -1
	if own(e) || strings.HasPrefix(s.App, "pgmedic") || envelope.Own(text) {
		b.skip(skipOwn, "")
		return nil
	}
	head := strings.ToUpper(strings.TrimSpace(text[:min(len(text), 200)]))
	if strings.HasPrefix(head, "COPY") {
		switch {
		case strings.Contains(head, "FROM STDIN"):
			b.skip(skipCopyIn, text)
			return nil
		case strings.Contains(head, "TO STDOUT"):
			kind = CopyOut
		}
	}
	s.Statements = append(s.Statements, Statement{sent: sent, Kind: kind, SQL: b.intern(text), Name: name, Took: took, timed: timed})
	if !timed {
		s.pending = len(s.Statements) - 1
	}
	return &s.Statements[len(s.Statements)-1]
}

// execute takes an extended-protocol execute: its prepared statement's
// name and the values of its DETAIL line.
func (b *builder) execute(k string, e logs.Entry, sent time.Time, msg, text string, took time.Duration, timed bool) {
	_, rest, _ := strings.Cut(msg, " ms  execute ")
	head, _, _ := strings.Cut(rest, ": ")
	if strings.HasPrefix(head, "fetch from ") {
		b.skip(skipFetch, text)
		return
	}
	name, _, _ := strings.Cut(head, "/") // statement/portal
	if name == "<unnamed>" {
		name = ""
	}
	params, _ := entryParams(e)
	if st := b.statement(k, e, sent, Extended, text, name, took, timed); st != nil {
		st.Params = params
	}
}

// entryParams are the values an entry gives its statement: its DETAIL
// line's, or on an error those its CONTEXT line names.
func entryParams(e logs.Entry) ([]*string, bool) {
	if params, ok := Parameters(e.Detail); ok {
		return params, true
	}
	return Parameters(afterPortal(e.Context))
}

// afterPortal is the list in a CONTEXT line "unnamed portal with
// parameters: ..." or `portal "p1" with parameters: ...`: with
// log_parameter_max_length_on_error (PostgreSQL 13+) an erroring
// statement's values are there.
func afterPortal(ctx string) string {
	i := strings.Index(ctx, "portal ")
	if i < 0 {
		return ""
	}
	if _, v, ok := strings.Cut(ctx[i:], " with parameters: "); ok {
		return "parameters: " + v
	}
	return ""
}

// failed takes an ERROR or FATAL: the statement it names failed. When
// log_statement logged it already, that one is marked; otherwise (only
// log_min_duration_statement, which times statements that succeed) it is
// added, since the application sent it and its failure is part of the
// workload: an aborted transaction, a deadlock, a timeout.
func (b *builder) failed(k string, e logs.Entry) {
	text := e.Statement
	if text == "" {
		return
	}
	s := b.open[k]
	if st := s.waiting(); st != nil && st.SQL == text {
		st.Failed = true
		s.pending = -1
		return
	}
	if s != nil && len(s.Statements) > 0 {
		last := &s.Statements[len(s.Statements)-1]
		if last.SQL == text && !last.timed && !last.Failed {
			last.Failed = true
			return
		}
	}
	params, ok := entryParams(e)
	kind := Simple
	if ok {
		kind = Extended
	} else if hasPlaceholder(text) {
		b.skip(skipNoParams, text)
		return
	}
	if st := b.statement(k, e, e.Time, kind, text, "", 0, true); st != nil {
		st.Failed, st.Params = true, params
	}
}

// hasPlaceholder says whether a text has $n outside quotes.
func hasPlaceholder(sql string) bool {
	quote := byte(0)
	for i := 0; i < len(sql)-1; i++ {
		c := sql[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '$' && sql[i+1] >= '1' && sql[i+1] <= '9' && (i == 0 || !isWord(sql[i-1])):
			return true
		}
	}
	return false
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// finish orders the sessions, makes times relative to the capture's
// start, and decides what to do with sessions the log did not see begin.
func (b *builder) finish() (*Workload, error) {
	for k := range b.open {
		s := b.open[k]
		s.ended = b.last
		b.done = append(b.done, s)
	}
	w := b.w
	// A replay runs as long as its capture: a span of weeks is a log of
	// many days or a clock that jumped, either way not one replay.
	if span := b.last.Sub(b.first); span > maxSpan {
		return nil, fmt.Errorf("the log's times span from %s to %s, more than %d days: replay a window of it (split the file, or keep the lines of the hours to replay)",
			b.first.Format(time.RFC3339), b.last.Format(time.RFC3339), int(maxSpan.Hours()/24))
	}
	w.Start = b.first
	w.Duration = b.last.Sub(b.first)
	cache := logs.NewShapeCache()
	byText := map[string]int32{}
	byPrint := map[string]int32{}
	shapeOf := func(text string) int32 {
		if i, ok := byText[text]; ok {
			return i
		}
		fp, norm := cache.Fingerprint(text)
		i, ok := byPrint[fp]
		if !ok {
			i = int32(len(w.Shapes))
			w.Shapes = append(w.Shapes, Shape{Fingerprint: fp, Query: norm})
			byPrint[fp] = i
		}
		byText[text] = i
		return i
	}
	for _, s := range b.done {
		if len(s.Statements) == 0 {
			continue
		}
		if b.connections && !s.anchored {
			for _, st := range s.Statements {
				b.skip(skipBefore, st.SQL)
			}
			continue
		}
		if b.opt.Database != "" && s.Database != b.opt.Database {
			for _, st := range s.Statements {
				b.skip(skipDatabase, st.SQL)
			}
			continue
		}
		for i := range s.Statements {
			st := &s.Statements[i]
			st.At = st.sent.Sub(b.first)
			st.Shape = shapeOf(st.SQL)
			if st.At < 0 {
				st.At = 0
			}
			w.Statements++
			if st.Failed {
				w.Failed++
			}
			if st.Kind == Extended {
				w.Extended++
			}
			if isBegin(st.SQL) {
				w.Transactions++
			}
		}
		// A session sends one statement at a time, so the log's order is
		// its order. A send time worked out from a line's time (to the
		// millisecond) minus the duration can fall before the previous
		// statement's; it is moved up to it.
		for i := 1; i < len(s.Statements); i++ {
			if s.Statements[i].At < s.Statements[i-1].At {
				s.Statements[i].At = s.Statements[i-1].At
			}
		}
		// A statement sent before its session connected (a log whose
		// times are to the second) is moved to the connection.
		if s.anchored {
			s.Start = s.began.Sub(b.first)
		} else {
			s.Start = s.Statements[0].At
		}
		if s.Start > s.Statements[0].At {
			s.Start = s.Statements[0].At
		}
		s.End = s.ended.Sub(b.first)
		last := s.Statements[len(s.Statements)-1]
		if s.End < last.At+last.Took {
			s.End = last.At + last.Took
		}
		w.Sessions = append(w.Sessions, s)
		w.Databases[s.Database]++
	}
	sort.SliceStable(w.Sessions, func(i, j int) bool { return w.Sessions[i].Start < w.Sessions[j].Start })
	for _, r := range b.skipOrder {
		w.Skipped = append(w.Skipped, *b.skips[r])
	}
	if !b.connections && len(w.Sessions) > 0 {
		w.Notes = append(w.Notes, "the log has no connection lines (log_connections is off): each process is taken as one session, from its first statement to its last")
	}
	if b.times >= 5 && b.wholeSeconds == b.times {
		w.Notes = append(w.Notes, "the log's times are to the second (%t): the pace within each second is not known; use %m in log_line_prefix")
	}
	if len(w.Databases) > 1 && b.opt.Database == "" {
		var names []string
		for d := range w.Databases {
			names = append(names, d)
		}
		sort.Strings(names)
		w.Notes = append(w.Notes, "the log holds sessions of several databases ("+strings.Join(names, ", ")+"); all are replayed into one unless --database names one")
	}
	if w.Statements == 0 {
		return w, fmt.Errorf("the log holds no statement that can be replayed%s: log them with log_min_duration_statement = 0 (or log_statement = all), log_connections and log_disconnections", skippedNote(w.Skipped))
	}
	return w, nil
}

func skippedNote(s []Skip) string {
	if len(s) == 0 {
		return ""
	}
	var parts []string
	for _, k := range s {
		parts = append(parts, fmt.Sprintf("%d %s", k.Count, k.Reason))
	}
	return " (left out: " + strings.Join(parts, "; ") + ")"
}

// Transaction control a session sends, by the statement's first word.
const (
	NoControl = iota
	Begins    // BEGIN, START TRANSACTION
	Ends      // COMMIT, ROLLBACK, END, ABORT (not ROLLBACK TO a savepoint)
)

// Control says whether a statement opens or ends a transaction block.
func Control(sql string) int {
	h := strings.ToUpper(strings.TrimSpace(sql[:min(len(sql), 32)]))
	word, rest, _ := strings.Cut(h, " ")
	word = strings.TrimSuffix(word, ";")
	switch word {
	case "BEGIN":
		return Begins
	case "START":
		if strings.HasPrefix(strings.TrimSpace(rest), "TRANSACTION") {
			return Begins
		}
	case "COMMIT", "END", "ABORT":
		return Ends
	case "ROLLBACK":
		if r := strings.TrimSpace(rest); !strings.HasPrefix(r, "TO ") && r != "TO" {
			return Ends
		}
	}
	return NoControl
}

// isBegin says a statement opens a transaction.
func isBegin(sql string) bool { return Control(sql) == Begins }

// Repeated is the workload played n times end to end: each session again
// with every time shifted so that a repeat's first statement follows the
// previous one's last after the mean pause between statements. A
// rehearsal needs traffic before, during and after a change that may
// last longer than the capture did, with no hole in it: the quiet lines a
// log holds before the application's first statement and after its last
// are not repeated.
func (w *Workload) Repeated(n int) *Workload {
	if n <= 1 {
		return w
	}
	out := *w
	period := w.Duration + w.Duration/10 + time.Millisecond
	if first, last, ok := w.StatementSpan(); ok && last > first {
		period = last - first + (last-first)/time.Duration(max(w.Statements, 1)) + time.Millisecond
	}
	out.Sessions = nil
	for k := 0; k < n; k++ {
		shift := time.Duration(k) * period
		for _, s := range w.Sessions {
			c := *s
			c.Start, c.End = s.Start+shift, s.End+shift
			if k > 0 {
				c.ID = fmt.Sprintf("%s (repeat %d)", s.ID, k+1)
			}
			c.Statements = make([]Statement, len(s.Statements))
			for i, st := range s.Statements {
				st.At += shift
				c.Statements[i] = st
			}
			out.Sessions = append(out.Sessions, &c)
		}
	}
	out.Duration = time.Duration(n-1)*period + w.Duration
	out.Statements, out.Transactions, out.Failed, out.Extended = n*w.Statements, n*w.Transactions, n*w.Failed, n*w.Extended
	return &out
}

// StatementSpan is when the workload's first statement is due and when
// its last one is; ok is false without statements.
func (w *Workload) StatementSpan() (first, last time.Duration, ok bool) {
	for _, s := range w.Sessions {
		if len(s.Statements) == 0 {
			continue
		}
		a, b := s.Statements[0].At, s.Statements[len(s.Statements)-1].At
		if !ok || a < first {
			first = a
		}
		if !ok || b > last {
			last = b
		}
		ok = true
	}
	return first, last, ok
}
