package logs

import (
	"math/rand"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Summary is what a set of logs says, aggregated.
type Summary struct {
	Files      []FileStats       `json:"files"`
	First      time.Time         `json:"first,omitempty"`
	Last       time.Time         `json:"last,omitempty"`
	Statements []*StatementStats `json:"statements"`
	Errors     []*ErrorStats     `json:"errors"`
	Events     map[string]int64  `json:"events"`
	LockWaitMS float64           `json:"lock_wait_ms"`
	TempBytes  int64             `json:"temp_file_bytes"`
	Checkpoint map[string]int64  `json:"checkpoints_by_reason"`
	// Checkpoints is what the checkpointer logged (log_checkpoints).
	Checkpoints Checkpoints      `json:"checkpoints"`
	Autovacuum  map[string]int64 `json:"autovacuum_by_table"`
	// Tables is autovacuum and autoanalyze per table
	// (log_autovacuum_min_duration).
	Tables    map[string]*TableMaintenance `json:"maintenance_by_table"`
	PerMinute map[string]*Minute           `json:"per_minute"`
	// Wraparound is what the server warned and refused about its
	// wraparound limits, by limit.
	Wraparound map[string]*model.WraparoundLogged `json:"wraparound,omitempty"`
	// ShowLiterals keeps an example of each statement with its values
	// (the slowest call) and of each error message; without it the report
	// holds normalised texts only.
	ShowLiterals bool `json:"-"`
	stmts        map[string]*StatementStats
	errs         map[string]*ErrorStats
	errPatterns  map[string]string
	plans        map[string][]*Plan
	shapes       *ShapeCache
	lastAt       time.Time
	lastMinute   *Minute
	// logged are statements log_statement wrote, by process, waiting for
	// the duration line that log_duration writes without the text.
	logged map[int]loggedStatement
	// ownPIDs are the processes seen running pgmedic's statements, with
	// when: what else they log (lock waits, errors, plans without the tag)
	// in that span is pgmedic's too.
	ownPIDs map[int]*ownSpan
}

// FileStats is one file's read.
type FileStats struct {
	Name   string `json:"name"`
	Format Format `json:"format"`
	Prefix string `json:"prefix,omitempty"`
	Stats
	// Partial: more than 1% of the lines were not recognised, so the
	// counts are not the whole log's.
	Partial bool   `json:"partial,omitempty"`
	Error   string `json:"error,omitempty"`
	prefix  *Prefix
}

// StatementStats is one statement fingerprint's durations.
type StatementStats struct {
	Fingerprint string `json:"fingerprint"`
	Query       string `json:"query"`
	Count       int64  `json:"count"`
	// Untimed are the calls logged without a duration (log_statement
	// without log_duration or log_min_duration_statement): counted, but
	// in no time or percentile.
	Untimed int64   `json:"untimed,omitempty"`
	TotalMS float64 `json:"total_ms"`
	MaxMS   float64 `json:"max_ms"`
	// Example is the slowest call's text with its values (ShowLiterals).
	Example string `json:"example,omitempty"`
	// literal is the slowest call's text with its values, kept whatever
	// ShowLiterals says: never printed, it gives check's re-runs the
	// values the application sent (Literals).
	literal       string
	P50, P95, P99 float64   `json:"-"`
	First, Last   time.Time `json:"-"`
	sample        []float64
	rng           *rand.Rand
}

// ErrorStats is one kind of error: its SQLSTATE and message pattern.
type ErrorStats struct {
	Level    string `json:"level"`
	SQLState string `json:"sqlstate,omitempty"`
	Pattern  string `json:"pattern"`
	Count    int64  `json:"count"`
	// Example is the first message with its values (ShowLiterals).
	Example string `json:"example,omitempty"`
}

// Checkpoints is what log_checkpoints said: when each checkpoint started
// and the WAL written since the one before (distance).
type Checkpoints struct {
	TooFrequent int64   `json:"too_frequent_warnings"`
	Completed   int64   `json:"completed"`
	DistanceKB  float64 `json:"distance_kb_total"`
	// MedianIntervalS is the median time between consecutive starts.
	MedianIntervalS float64 `json:"median_interval_s"`
	// SpanS is the time from the first start to the last.
	SpanS  float64     `json:"span_s"`
	starts []time.Time // bounded by maxCheckpointStarts
}

// maxCheckpointStarts bounds the start times kept: a checkpoint a second
// for a day is 86,400.
const maxCheckpointStarts = 100000

// TableMaintenance is one table's autovacuum and autoanalyze runs.
type TableMaintenance struct {
	Vacuums  int64 `json:"vacuums"`
	Analyzes int64 `json:"analyzes"`
	// Removed is the dead rows vacuum removed, over all runs.
	Removed int64 `json:"dead_rows_removed"`
	// NotRemovable is the most dead rows a run found but could not
	// remove (an older snapshot still saw them), and RemainAt the rows the
	// table had then; LastNotRemovable is the last run's figure.
	NotRemovable     int64 `json:"max_dead_not_removable"`
	RemainAt         int64 `json:"rows_remaining_then"`
	LastNotRemovable int64 `json:"last_dead_not_removable"`
	// Truncations are the runs that gave the table's empty end back
	// (pages removed, under ACCESS EXCLUSIVE), PagesRemoved their pages.
	Truncations  int64     `json:"truncations"`
	PagesRemoved int64     `json:"pages_removed"`
	lastVacuum   time.Time // orders the last run across merged parts
}

// Minute is the per-minute series for charts.
type Minute struct {
	Statements  int64   `json:"statements"`
	DurationMS  float64 `json:"duration_ms"`
	Errors      int64   `json:"errors"`
	Connections int64   `json:"connections"`
	LockWaits   int64   `json:"lock_waits"`
}

// NewSummary is an empty summary.
func NewSummary() *Summary {
	return &Summary{Events: map[string]int64{}, Checkpoint: map[string]int64{}, Autovacuum: map[string]int64{}, Tables: map[string]*TableMaintenance{},
		PerMinute: map[string]*Minute{}, Wraparound: map[string]*model.WraparoundLogged{}, ownPIDs: map[int]*ownSpan{}, logged: map[int]loggedStatement{}, stmts: map[string]*StatementStats{}, errs: map[string]*ErrorStats{}, errPatterns: map[string]string{}, plans: map[string][]*Plan{}, shapes: NewShapeCache()}
}

// sampleSize bounds the durations kept per statement for percentiles
// (reservoir sampling: memory stays flat however long the log).
const sampleSize = 2048

var (
	lockWaitRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^process \d+ (?:still waiting|acquired) for (\w+) on (\w+) .* after ([0-9.]+) ms`)
	})
	tempRe     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^temporary file: path ".*", size (\d+)`) })
	ckptRe     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^checkpoint starting: (.*)$`) })
	ckptDoneRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`distance=(\d+) kB`) })
	autovacRe  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^automatic (?:aggressive )?(vacuum|analyze)(?: to prevent wraparound)? of table "([^"]+)"`)
	})
	pagesRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`pages: (\d+) removed, \d+ remain`) })
	tuplesRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable`)
	})
	numbersRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b\d+(\.\d+)?\b`) })
	quotedRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"[^"]*"|'[^']*'`) })
)

// PostgreSQL's words for its wraparound limits (varsup.c, multixact.c):
// once close it warns with every assignment that a database must be
// vacuumed within so many transactions, or before so many more
// MultiXactIds or multixact members are used (by name, or by OID when it
// cannot read the name), and at the limit it refuses the commands that
// would assign one ("to avoid wraparound data loss"; 16 says "assign"
// where 13 to 15 say "generate" for MultiXactIds and say nothing of
// transaction ids) or the multixact that would not fit.
var (
	wrapWarnRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^database (?:"([^"]*)"|with OID (\d+)) must be vacuumed (?:within (\d+) transactions|before (\d+) more (MultiXactIds?|multixact members?) (?:is|are) used)`)
	})
	wrapRefusedRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^database is not accepting commands (?:that (?:generate|assign) new (MultiXactIds|transaction IDs) )?to avoid wraparound data loss in database (?:"([^"]*)"|with OID (\d+))`)
	})
)

// addWraparound counts a warning or a refusal about a wraparound limit.
func (s *Summary) addWraparound(msg string) {
	limit := func(name string) *model.WraparoundLogged {
		w := s.Wraparound[name]
		if w == nil {
			w = &model.WraparoundLogged{Limit: name, Least: -1}
			s.Wraparound[name] = w
		}
		return w
	}
	if strings.HasPrefix(msg, `multixact "members" limit exceeded`) {
		limit(model.LimitMembers).Refusals++
		return
	}
	if m := wrapWarnRe().FindStringSubmatch(msg); m != nil {
		name, left := model.LimitXIDs, m[3]
		switch {
		case strings.HasPrefix(m[5], "MultiXactId"):
			name, left = model.LimitMultis, m[4]
		case m[5] != "":
			name, left = model.LimitMembers, m[4]
		}
		w := limit(name)
		w.Warnings++
		if n, err := strconv.ParseInt(left, 10, 64); err == nil && (w.Least < 0 || n < w.Least) {
			w.Least, w.Database = n, wrapDatabase(m[1], m[2])
		}
		return
	}
	if m := wrapRefusedRe().FindStringSubmatch(msg); m != nil {
		name := model.LimitXIDs
		if m[1] == "MultiXactIds" {
			name = model.LimitMultis
		}
		w := limit(name)
		w.Refusals++
		if w.Database == "" {
			w.Database = wrapDatabase(m[2], m[3])
		}
	}
}

func wrapDatabase(name, oid string) string {
	if name != "" {
		return name
	}
	if oid != "" {
		return "the database with OID " + oid
	}
	return ""
}

// ownEntries is the event that counts the entries left out as pgmedic's.
const ownEntries = "pgmedic's own entries (left out)"

// own says whether an entry comes from pgmedic: its session's application
// name, its tagged statement text (in the message, an auto_explain plan's
// Query Text, or the STATEMENT line), a process seen doing either, or a
// lock wait behind such a process. pgmedic's experiments run the
// application's statements with values of pgmedic's choosing; they are
// never evidence about the application.
// durationLine is a "duration: ..." message read once: its time, its kind
// (statement, execute, plan, ...), its text, and for a plan the query.
type durationLine struct {
	ms          float64
	kind, text  string
	query, head string // head: "execute <name>" for an execute
	ok          bool
}

func readDuration(msg string) durationLine {
	var d durationLine
	if !strings.HasPrefix(msg, "duration: ") {
		return d
	}
	d.ms, d.kind, d.text, d.ok = parseDuration(msg)
	switch d.kind {
	case "plan":
		d.query = queryText(d.text)
	case "execute":
		if _, rest, ok := strings.Cut(msg, " ms  "); ok {
			d.head, _, _ = strings.Cut(rest, ":")
		}
	}
	return d
}

func (s *Summary) own(e Entry, d durationLine) bool {
	if e.PID != 0 && s.ownedAt(e.PID, e.Time) {
		// The pid is pgmedic's until it disconnects, or until the prefix
		// names another application (a new backend got the pid of one that
		// left without log_disconnections).
		if e.App == "" || e.App == envelope.AppName {
			if strings.HasPrefix(e.Message, "disconnection: ") {
				s.ownPIDs[e.PID].to = e.Time
			}
			return true
		}
		s.ownPIDs[e.PID].to = e.Time
	}
	tagged := e.App == envelope.AppName || envelope.Own(e.Statement)
	switch {
	case tagged:
	case d.ok:
		// "duration: 1.2 ms  statement: ..." or an auto_explain plan,
		// whose Query Text is the statement; "execute pgmedic_verify: ..."
		// names the statement before its text.
		tagged = envelope.Own(d.text) || (d.kind == "plan" && envelope.Own(d.query)) || (d.kind == "execute" && envelope.Own(d.head))
	case strings.HasPrefix(e.Message, "connection authorized: "):
		tagged = strings.Contains(e.Message, "application_name="+envelope.AppName)
	}
	if tagged {
		if e.PID != 0 {
			sp := s.ownPIDs[e.PID]
			if sp == nil || (!sp.to.IsZero() && !e.Time.IsZero() && e.Time.After(sp.to)) {
				sp = &ownSpan{from: e.Time}
				s.ownPIDs[e.PID] = sp
			}
			if strings.HasPrefix(e.Message, "disconnection: ") {
				sp.to = e.Time
			}
		}
		return true
	}
	// A lock wait whose holder is pgmedic: "Process holding the lock: N."
	if strings.HasPrefix(e.Message, "process ") && len(s.ownPIDs) > 0 {
		if _, rest, ok := strings.Cut(e.Detail, "Process holding the lock: "); ok {
			holder, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, ".", 2)[0]))
			return s.ownedAt(holder, e.Time)
		}
	}
	return false
}

// ownSpan is when a process was pgmedic's: from its first tagged entry
// to its disconnection (zero: not seen to end). Entries of different
// processes reach Add out of time order (each waits for its DETAIL and
// STATEMENT lines), so a lock wait is judged by its own time.
type ownSpan struct{ from, to time.Time }

// ownedAt says whether pid was pgmedic's at t (any time, when the log has
// no timestamps).
func (s *Summary) ownedAt(pid int, t time.Time) bool {
	sp := s.ownPIDs[pid]
	if sp == nil {
		return false
	}
	if t.IsZero() {
		return sp.to.IsZero()
	}
	return !t.Before(sp.from) && (sp.to.IsZero() || !t.After(sp.to))
}

// Add counts one entry.
func (s *Summary) Add(e Entry) {
	if e.Source == PgBouncer {
		s.addTime(e.Time)
		s.addBouncer(e)
		return
	}
	d := readDuration(e.Message)
	if s.own(e, d) {
		s.Events[ownEntries]++
		return
	}
	s.addTime(e.Time)
	min := s.minute(e.Time)
	msg := e.Message
	switch e.Level {
	case "ERROR", "FATAL", "PANIC":
		s.addError(e)
		min.Errors++
	}
	switch {
	case strings.HasPrefix(msg, "duration: "):
		ms, kind, text := d.ms, d.kind, d.text
		if !d.ok {
			return
		}
		if text == "" {
			text = e.Statement
		}
		if text == "" && kind == "" {
			// log_duration's line: the text is the one log_statement
			// wrote for this process just before.
			l, ok := s.logged[e.PID]
			if !ok {
				return
			}
			delete(s.logged, e.PID)
			text = l.text
		}
		if kind == "parse" || kind == "bind" {
			return // parse and bind are steps of the execute that follows
		}
		if kind == "plan" {
			s.Events["auto_explain plans"]++
			query := d.query
			if d.text == "" {
				query = queryText(text)
			}
			s.addPlan(query, text, ms, e.Database)
			return
		}
		s.addStatement(text, ms, e.Time)
		min.Statements++
		min.DurationMS += ms
		return // a statement's line is no maintenance line
	case strings.HasPrefix(msg, "statement: "), strings.HasPrefix(msg, "execute ") && strings.Contains(msg, ": "):
		// log_statement: the text now, its duration (if logged) next.
		text := msg[strings.Index(msg, ": ")+2:]
		s.untimed(e.PID)
		s.logged[e.PID] = loggedStatement{text: text, at: e.Time}
		min.Statements++
	case strings.HasPrefix(msg, "connection authorized: "):
		s.Events["connections"]++
		min.Connections++
	case strings.HasPrefix(msg, "disconnection: "):
		s.Events["disconnections"]++
	// 53300 is too_many_connections: max_connections reached ("sorry, too
	// many clients already"), or only the slots reserved for superusers
	// (and, from 16, for pg_use_reserved_connections) left.
	case strings.Contains(msg, "too many clients already") || strings.HasPrefix(msg, "remaining connection slots are reserved") || e.SQLState == "53300":
		s.Events["too many clients"]++
	case strings.HasPrefix(msg, "canceling statement due to statement timeout"):
		s.Events["statement timeouts"]++
	case strings.HasPrefix(msg, "canceling statement due to user request"):
		s.Events["cancelled by the client"]++
	case strings.HasPrefix(msg, "deadlock detected"):
		s.Events["deadlocks"]++
	case strings.Contains(msg, "connection to client lost"), strings.Contains(msg, "unexpected EOF on client connection"),
		strings.HasPrefix(msg, "could not receive data from client"):
		s.Events["client connections lost"]++
	case strings.HasPrefix(msg, "duplicate key value violates unique constraint"):
		s.Events["duplicate keys"]++
	case strings.HasPrefix(msg, "database "), strings.HasPrefix(msg, `multixact "members" limit exceeded`):
		s.addWraparound(msg)
	}
	s.addMaintenanceLine(e, min)
}

// addTime widens the span the logs cover.
func (s *Summary) addTime(t time.Time) {
	if t.IsZero() {
		return
	}
	if s.First.IsZero() || t.Before(s.First) {
		s.First = t
	}
	if t.After(s.Last) {
		s.Last = t
	}
}

// addMaintenanceLine counts the lines about lock waits, temporary files,
// checkpoints and autovacuum. The patterns are anchored on their first
// words: those are tested first, so the entries that are none of them
// (most) pay no regexp.
func (s *Summary) addMaintenanceLine(e Entry, min *Minute) {
	msg := e.Message
	switch {
	case strings.HasPrefix(msg, "process "):
		if m := lockWaitRe().FindStringSubmatch(msg); m != nil && strings.Contains(msg, "still waiting") {
			ms, _ := strconv.ParseFloat(m[3], 64)
			s.Events["lock waits"]++
			// A wait on a relation's lock is a schema change's queue: the
			// change waiting for ACCESS EXCLUSIVE, or the sessions queued
			// behind it. A wait on a transaction or a tuple is for a row.
			if m[2] == "relation" {
				s.Events["lock waits on a relation"]++
			}
			s.LockWaitMS += ms
			min.LockWaits++
		}
	case strings.HasPrefix(msg, "temporary file: "):
		if m := tempRe().FindStringSubmatch(msg); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			s.Events["temporary files"]++
			s.TempBytes += n
		}
	case strings.HasPrefix(msg, "checkpoint starting: "):
		if m := ckptRe().FindStringSubmatch(msg); m != nil {
			s.Checkpoint[strings.TrimSpace(m[1])]++
			if !e.Time.IsZero() && len(s.Checkpoints.starts) < maxCheckpointStarts {
				s.Checkpoints.starts = append(s.Checkpoints.starts, e.Time)
			}
		}
	case strings.HasPrefix(msg, "checkpoint complete: "):
		s.Checkpoints.Completed++
		if m := ckptDoneRe().FindStringSubmatch(msg); m != nil {
			kb, _ := strconv.ParseFloat(m[1], 64)
			s.Checkpoints.DistanceKB += kb
		}
	case strings.HasPrefix(msg, "checkpoints are occurring too frequently"):
		s.Checkpoints.TooFrequent++
	case strings.HasPrefix(msg, "automatic "):
		if m := autovacRe().FindStringSubmatch(msg); m != nil {
			s.Autovacuum[m[1]+" "+m[2]]++
			s.addMaintenance(m[1], m[2], msg, e.Time)
		}
	}
}

// addMaintenance counts an autovacuum or autoanalyze run of a table, with
// the dead rows vacuum removed and those it had to leave.
func (s *Summary) addMaintenance(kind, table, msg string, at time.Time) {
	t := s.Tables[table]
	if t == nil {
		t = &TableMaintenance{}
		s.Tables[table] = t
	}
	if kind == "analyze" {
		t.Analyzes++
		return
	}
	t.Vacuums++
	if m := pagesRe().FindStringSubmatch(msg); m != nil {
		if n, _ := strconv.ParseInt(m[1], 10, 64); n > 0 {
			t.Truncations++
			t.PagesRemoved += n
		}
	}
	m := tuplesRe().FindStringSubmatch(msg)
	if m == nil {
		return
	}
	removed, _ := strconv.ParseInt(m[1], 10, 64)
	remain, _ := strconv.ParseInt(m[2], 10, 64)
	stuck, _ := strconv.ParseInt(m[3], 10, 64)
	t.Removed += removed
	if stuck > t.NotRemovable {
		t.NotRemovable, t.RemainAt = stuck, remain
	}
	if !at.Before(t.lastVacuum) {
		t.LastNotRemovable, t.lastVacuum = stuck, at
	}
}

// ParseDuration reads a "duration: ..." message: the milliseconds, the
// kind of what was timed (statement, execute, bind, parse, plan; "" when
// the text was logged before, by log_statement) and its text.
func ParseDuration(msg string) (ms float64, kind, text string, ok bool) {
	if !strings.HasPrefix(msg, "duration: ") {
		return 0, "", "", false
	}
	return parseDuration(msg)
}

// parseDuration reads "duration: 12.345 ms", alone or followed by
// "  statement: ", "  execute <name>: ", "  bind <name>: ", "  parse
// <name>: " or auto_explain's "  plan:" and the text. kind is statement,
// execute, bind, parse or plan ("" for a duration alone, whose statement
// is on its STATEMENT line).
func parseDuration(msg string) (ms float64, kind, text string, ok bool) {
	rest := msg[len("duration: "):]
	num, rest, found := strings.Cut(rest, " ms")
	if !found {
		return 0, "", "", false
	}
	ms, err := strconv.ParseFloat(num, 64)
	if err != nil || ms < 0 {
		return 0, "", "", false
	}
	if rest == "" {
		return ms, "", "", true
	}
	if !strings.HasPrefix(rest, "  ") {
		return 0, "", "", false
	}
	rest = rest[2:]
	head, body, found := strings.Cut(rest, ":")
	if !found {
		return 0, "", "", false
	}
	kind, _, _ = strings.Cut(head, " ")
	switch kind {
	case "statement", "plan":
		if head != kind {
			return 0, "", "", false
		}
	case "execute", "bind", "parse":
	default:
		return 0, "", "", false
	}
	// One space (or the plan's newline) separates the colon from the text.
	if strings.HasPrefix(body, " ") || strings.HasPrefix(body, "\n") {
		body = body[1:]
	}
	return ms, kind, body, true
}

func (s *Summary) minute(t time.Time) *Minute {
	t = t.Truncate(time.Minute)
	// Entries come in time order: the minute is usually the last one's.
	if s.lastMinute != nil && t.Equal(s.lastAt) {
		return s.lastMinute
	}
	k := "unknown"
	if !t.IsZero() {
		k = t.Format("2006-01-02T15:04Z")
	}
	m := s.PerMinute[k]
	if m == nil {
		m = &Minute{}
		s.PerMinute[k] = m
	}
	s.lastAt, s.lastMinute = t, m
	return m
}

// queryText is the Query Text of an auto_explain plan (text or JSON).
func queryText(plan string) string {
	plan = strings.TrimSpace(plan)
	if strings.HasPrefix(plan, "Query Text: ") {
		first, _, _ := strings.Cut(plan[len("Query Text: "):], "\n")
		return first
	}
	if i := strings.Index(plan, `"Query Text": "`); i >= 0 {
		rest := plan[i+len(`"Query Text": "`):]
		if j := strings.Index(rest, `",`); j >= 0 {
			return strings.ReplaceAll(rest[:j], `\"`, `"`)
		}
	}
	return plan
}

// shapeCache bounds the statement shapes whose fingerprints are kept.
const shapeCache = 200000

// fingerprint is the statement's fingerprint through the reader's cache
// (see ShapeCache).
func (s *Summary) fingerprint(text string) (string, string) { return s.shapes.Fingerprint(text) }

// shapeKey blanks out numbers and quoted strings, and folds whitespace:
// texts that differ only in literals share a key. The key is a 64-bit
// FNV-1a hash of that blanked text, computed as it is read (no copy of a
// long statement is made per call); two shapes meeting on one hash is a
// one-in-billions chance for the cache's 200,000 shapes.
func shapeKey(text string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch shapeClass[c] {
		case shapePlain:
			h = (h ^ uint64(c)) * prime
			continue
		case shapeQuote:
			j := i + 1
			for j < len(text) {
				if text[j] == '\'' {
					if j+1 < len(text) && text[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			c, i = '?', j
		case shapeDigit:
			// A digit inside a name (t1, col2) is plain text; the byte
			// before it is what the blanked text ends with, since what
			// is blanked ends in a quote, a digit or a space.
			if i > 0 && isIdent(text[i-1]) {
				break
			}
			for i+1 < len(text) && (text[i+1] >= '0' && text[i+1] <= '9' || text[i+1] == '.') {
				i++
			}
			c = '?'
		case shapeSpace:
			for i+1 < len(text) && shapeClass[text[i+1]] == shapeSpace {
				i++
			}
			c = ' '
		}
		h = (h ^ uint64(c)) * prime
	}
	return h
}

// The classes of bytes shapeKey tells apart.
const (
	shapePlain = iota
	shapeQuote
	shapeDigit
	shapeSpace
)

var shapeClass = func() (t [256]byte) {
	t['\''] = shapeQuote
	for c := '0'; c <= '9'; c++ {
		t[c] = shapeDigit
	}
	for _, c := range []byte(" \t\n\r") {
		t[c] = shapeSpace
	}
	return t
}()

func isIdent(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Plan is an executed plan auto_explain logged, with its statement.
type Plan struct {
	Fingerprint string  `json:"fingerprint"`
	Query       string  `json:"query"`
	DurationMS  float64 `json:"duration_ms"`
	Text        string  `json:"-"`
	// Literal is the statement as auto_explain printed it, with its
	// values (never printed; see Literals), and Database the database it
	// ran in, when the log's lines name it ("" otherwise).
	Literal  string `json:"-"`
	Database string `json:"-"`
}

// maxPlans bounds the plans kept per fingerprint (the slowest are kept).
const maxPlans = 3

func (s *Summary) addPlan(query, plan string, ms float64, database string) {
	fp, norm := s.fingerprint(query)
	s.addPlanRecord(fp, &Plan{Fingerprint: fp, Query: norm, DurationMS: ms, Text: plan, Literal: query, Database: database})
}

// Literals are, by fingerprint, statements as the log wrote them with
// their values: the slowest plan's query text, else the slowest logged
// call's. pg_stat_statements keeps neither; a re-run with these values
// runs the plan the application got, not one for a value of pgmedic's.
func (s *Summary) Literals() map[string]string {
	out := map[string]string{}
	for fp, st := range s.stmts {
		if st.literal != "" {
			out[fp] = st.literal
		}
	}
	for fp, list := range s.plans {
		slowest := 0.0
		for _, p := range list {
			if p.Literal != "" && p.DurationMS >= slowest {
				out[fp], slowest = p.Literal, p.DurationMS
			}
		}
	}
	return out
}

// addPlanRecord keeps the slowest maxPlans plans of a fingerprint.
func (s *Summary) addPlanRecord(fp string, p *Plan) {
	ms := p.DurationMS
	list := s.plans[fp]
	if len(list) < maxPlans {
		s.plans[fp] = append(list, p)
		return
	}
	fastest := 0
	for i, q := range list {
		if q.DurationMS < list[fastest].DurationMS {
			fastest = i
		}
	}
	if ms > list[fastest].DurationMS {
		list[fastest] = p
	}
}

// addStatement counts a duration under the statement's fingerprint.
// Statements that do not parse (cut by the log's line length, another
// dialect) are counted under their literal-free text.
func (s *Summary) addStatement(text string, ms float64, at time.Time) {
	fp, norm := s.fingerprint(text)
	st := s.stmts[fp]
	if st == nil {
		st = &StatementStats{Fingerprint: fp, Query: norm, rng: rand.New(rand.NewSource(int64(len(s.stmts))))}
		s.stmts[fp] = st
	}
	if ms >= st.MaxMS {
		st.literal = text
		if s.ShowLiterals {
			st.Example = text
		}
	}
	st.add(ms, at)
}

// loggedStatement is a statement log_statement wrote.
type loggedStatement struct {
	text string
	at   time.Time
}

// untimed counts the statement a process logged without its duration
// (no duration line came for it).
func (s *Summary) untimed(pid int) {
	l, ok := s.logged[pid]
	if !ok {
		return
	}
	delete(s.logged, pid)
	fp, norm := s.fingerprint(l.text)
	st := s.stmts[fp]
	if st == nil {
		st = &StatementStats{Fingerprint: fp, Query: norm, rng: rand.New(rand.NewSource(int64(len(s.stmts))))}
		s.stmts[fp] = st
	}
	if st.literal == "" {
		st.literal = l.text
	}
	if s.ShowLiterals && st.Example == "" {
		st.Example = l.text
	}
	st.Count++
	st.Untimed++
	if st.First.IsZero() || (!l.at.IsZero() && l.at.Before(st.First)) {
		st.First = l.at
	}
	if l.at.After(st.Last) {
		st.Last = l.at
	}
}

// flushLogged counts every statement still waiting for a duration.
func (s *Summary) flushLogged() {
	for pid := range s.logged {
		s.untimed(pid)
	}
}

func (st *StatementStats) add(ms float64, at time.Time) {
	st.Count++
	st.TotalMS += ms
	st.MaxMS = max(st.MaxMS, ms)
	if st.First.IsZero() || (!at.IsZero() && at.Before(st.First)) {
		st.First = at
	}
	if at.After(st.Last) {
		st.Last = at
	}
	if len(st.sample) < sampleSize {
		st.sample = append(st.sample, ms)
	} else if i := st.rng.Int63n(st.Count); i < sampleSize {
		st.sample[i] = ms
	}
}

func (s *Summary) addError(e Entry) {
	pattern, ok := s.errPatterns[e.Message]
	if !ok {
		pattern = quotedRe().ReplaceAllString(e.Message, `"…"`)
		pattern = numbersRe().ReplaceAllString(pattern, "N")
		if len(pattern) > 200 {
			pattern = pattern[:200]
		}
		// The same message comes again and again (a timeout, a missing
		// relation): its pattern is worked out once, within a bound.
		if len(s.errPatterns) < 10000 {
			s.errPatterns[e.Message] = pattern
		}
	}
	k := e.Level + "|" + e.SQLState + "|" + pattern
	es := s.errs[k]
	if es == nil {
		es = &ErrorStats{Level: e.Level, SQLState: e.SQLState, Pattern: pattern}
		if s.ShowLiterals {
			es.Example = e.Message
		}
		s.errs[k] = es
	}
	es.Count++
}

// Merge adds another summary's counts (each file is read by its own
// worker).
func (s *Summary) Merge(o *Summary) {
	o.flushLogged()
	s.Files = append(s.Files, o.Files...)
	if !o.First.IsZero() && (s.First.IsZero() || o.First.Before(s.First)) {
		s.First = o.First
	}
	if o.Last.After(s.Last) {
		s.Last = o.Last
	}
	for fp, st := range o.stmts {
		if mine := s.stmts[fp]; mine != nil {
			mine.merge(st)
		} else {
			s.stmts[fp] = st
		}
	}
	for k, es := range o.errs {
		if mine := s.errs[k]; mine != nil {
			mine.Count += es.Count
		} else {
			s.errs[k] = es
		}
	}
	for k, v := range o.Events {
		s.Events[k] += v
	}
	for fp, list := range o.plans {
		for _, p := range list {
			s.addPlanRecord(fp, p)
		}
	}
	for k, v := range o.Checkpoint {
		s.Checkpoint[k] += v
	}
	for k, w := range o.Wraparound {
		mine := s.Wraparound[k]
		if mine == nil {
			s.Wraparound[k] = w
			continue
		}
		mine.Warnings += w.Warnings
		mine.Refusals += w.Refusals
		if w.Least >= 0 && (mine.Least < 0 || w.Least < mine.Least) {
			mine.Least, mine.Database = w.Least, w.Database
		} else if mine.Database == "" {
			mine.Database = w.Database
		}
	}
	for k, v := range o.Autovacuum {
		s.Autovacuum[k] += v
	}
	for k, t := range o.Tables {
		if mine := s.Tables[k]; mine != nil {
			mine.merge(t)
		} else {
			s.Tables[k] = t
		}
	}
	c := &s.Checkpoints
	c.TooFrequent += o.Checkpoints.TooFrequent
	c.Completed += o.Checkpoints.Completed
	c.DistanceKB += o.Checkpoints.DistanceKB
	for _, t := range o.Checkpoints.starts {
		if len(c.starts) < maxCheckpointStarts {
			c.starts = append(c.starts, t)
		}
	}
	s.LockWaitMS += o.LockWaitMS
	s.TempBytes += o.TempBytes
	for k, m := range o.PerMinute {
		mine := s.minute(time.Time{})
		if k != "unknown" {
			if mine = s.PerMinute[k]; mine == nil {
				mine = &Minute{}
				s.PerMinute[k] = mine
			}
		}
		mine.Statements += m.Statements
		mine.DurationMS += m.DurationMS
		mine.Errors += m.Errors
		mine.Connections += m.Connections
		mine.LockWaits += m.LockWaits
	}
}

// merge adds another part's calls of the same statement. The other's
// sample is folded in call by call; the calls it stands for beyond its
// sample are counted too.
func (mine *StatementStats) merge(st *StatementStats) {
	if st.MaxMS > mine.MaxMS && st.Example != "" {
		mine.Example = st.Example
	}
	if st.literal != "" && (mine.literal == "" || st.MaxMS > mine.MaxMS) {
		mine.literal = st.literal
	}
	for _, ms := range st.sample {
		mine.add(ms, time.Time{})
	}
	mine.Count += st.Count - int64(len(st.sample))
	mine.Untimed += st.Untimed
	mine.TotalMS += st.TotalMS - sum(st.sample)
	mine.MaxMS = max(mine.MaxMS, st.MaxMS)
	if !st.First.IsZero() && (mine.First.IsZero() || st.First.Before(mine.First)) {
		mine.First = st.First
	}
	if st.Last.After(mine.Last) {
		mine.Last = st.Last
	}
}

// merge adds another part's autovacuum runs of the same table; the last
// run is the later of the two parts'.
func (mine *TableMaintenance) merge(t *TableMaintenance) {
	mine.Vacuums += t.Vacuums
	mine.Analyzes += t.Analyzes
	mine.Removed += t.Removed
	mine.Truncations += t.Truncations
	mine.PagesRemoved += t.PagesRemoved
	if t.NotRemovable > mine.NotRemovable {
		mine.NotRemovable, mine.RemainAt = t.NotRemovable, t.RemainAt
	}
	if !t.lastVacuum.IsZero() && !t.lastVacuum.Before(mine.lastVacuum) {
		mine.LastNotRemovable, mine.lastVacuum = t.LastNotRemovable, t.lastVacuum
	}
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// Plans are the executed plans kept, the slowest first.
func (s *Summary) Plans() []*Plan {
	var out []*Plan
	for _, list := range s.plans {
		out = append(out, list...)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].DurationMS > out[j].DurationMS || out[i].DurationMS == out[j].DurationMS && out[i].Fingerprint < out[j].Fingerprint
	})
	return out
}

// Finish sorts the statements by total time and errors by count, and
// works out the percentiles.
func (s *Summary) Finish() {
	s.flushLogged()
	s.Statements = s.Statements[:0]
	for _, st := range s.stmts {
		sorted := append([]float64(nil), st.sample...)
		sort.Float64s(sorted)
		st.P50, st.P95, st.P99 = model.Percentile(sorted, 0.5), model.Percentile(sorted, 0.95), model.Percentile(sorted, 0.99)
		s.Statements = append(s.Statements, st)
	}
	sort.Slice(s.Statements, func(i, j int) bool {
		a, b := s.Statements[i], s.Statements[j]
		return a.TotalMS > b.TotalMS || a.TotalMS == b.TotalMS && a.Fingerprint < b.Fingerprint
	})
	s.Checkpoints.finish()
	s.Errors = s.Errors[:0]
	for _, es := range s.errs {
		s.Errors = append(s.Errors, es)
	}
	sort.Slice(s.Errors, func(i, j int) bool {
		a, b := s.Errors[i], s.Errors[j]
		return a.Count > b.Count || a.Count == b.Count && a.Pattern < b.Pattern
	})
}

// finish works out the intervals between checkpoint starts.
func (c *Checkpoints) finish() {
	if len(c.starts) < 2 {
		return
	}
	sort.Slice(c.starts, func(i, j int) bool { return c.starts[i].Before(c.starts[j]) })
	gaps := make([]float64, 0, len(c.starts)-1)
	for i := 1; i < len(c.starts); i++ {
		gaps = append(gaps, c.starts[i].Sub(c.starts[i-1]).Seconds())
	}
	sort.Float64s(gaps)
	c.MedianIntervalS = model.Round(model.Percentile(gaps, 0.5), 3)
	c.SpanS = model.Round(c.starts[len(c.starts)-1].Sub(c.starts[0]).Seconds(), 3)
}

// LogEvents is what the session rules judge from the log.
func (s *Summary) LogEvents() model.LogEvents {
	ev := model.LogEvents{Connections: s.Events["connections"], TooManyClients: s.Events["too many clients"],
		LockWaits: s.Events["lock waits"], RelationLockWaits: s.Events["lock waits on a relation"], LockWaitMS: s.LockWaitMS, Deadlocks: s.Events["deadlocks"],
		ClientsLost: s.Events["client connections lost"], DuplicateKeys: s.Events["duplicate keys"],
		StatementTimeouts: s.Events["statement timeouts"], CancelledByClients: s.Events["cancelled by the client"],
		PoolWaitTimeouts: s.Events["pgbouncer query_wait_timeout"], PoolLogins: s.Events["pgbouncer logins"]}
	if !s.First.IsZero() {
		ev.Seconds = s.Last.Sub(s.First).Seconds()
	}
	for _, m := range s.PerMinute {
		ev.PeakPerMinute = max(ev.PeakPerMinute, m.Connections)
	}
	for _, name := range []string{model.LimitXIDs, model.LimitMultis, model.LimitMembers} {
		if w := s.Wraparound[name]; w != nil {
			ev.Wraparound = append(ev.Wraparound, *w)
		}
	}
	for reason, n := range s.Checkpoint {
		// "wal", "immediate force wait wal", "time", "shutdown immediate", ...
		for _, w := range strings.Fields(reason) {
			switch w {
			case "wal":
				ev.CheckpointsByWAL += n
			case "time":
				ev.CheckpointsByTime += n
			}
		}
	}
	c := s.Checkpoints
	ev.CheckpointsTooFrequent, ev.CheckpointMedianIntervalS = c.TooFrequent, c.MedianIntervalS
	if c.Completed > 0 {
		ev.CheckpointMeanDistanceKB = c.DistanceKB / float64(c.Completed)
	}
	if c.SpanS > 0 {
		ev.WALKBPerSecond, ev.CheckpointSpanS = c.DistanceKB/c.SpanS, c.SpanS
	}
	for name, t := range s.Tables {
		ev.Tables = append(ev.Tables, model.TableMaintenance{Table: name, Vacuums: t.Vacuums, Analyzes: t.Analyzes,
			Removed: t.Removed, NotRemovable: t.NotRemovable, RemainAt: t.RemainAt, LastNotRemovable: t.LastNotRemovable,
			Truncations: t.Truncations, PagesRemoved: t.PagesRemoved})
	}
	sort.Slice(ev.Tables, func(i, j int) bool { return ev.Tables[i].Table < ev.Tables[j].Table })
	return ev
}

// ShapeCache fingerprints statement texts (sqlparse.Fingerprint) through
// a cache keyed by the text with its literals blanked out: a log repeats
// a few thousand statement shapes with different values, and pg_query
// parses each shape once.
type ShapeCache struct{ shapes map[uint64][2]string }

// NewShapeCache makes an empty cache.
func NewShapeCache() *ShapeCache { return &ShapeCache{shapes: map[uint64][2]string{}} }

// Fingerprint is the text's fingerprint and its normalised text.
func (c *ShapeCache) Fingerprint(text string) (string, string) {
	key := shapeKey(text)
	if v, ok := c.shapes[key]; ok {
		return v[0], v[1]
	}
	fp, norm := sqlparse.Fingerprint(text)
	if len(c.shapes) < shapeCache {
		c.shapes[key] = [2]string{fp, norm}
	}
	return fp, norm
}
