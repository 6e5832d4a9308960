package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Conn is what the recorder wraps and the replayer stands in for: the one
// connection seam of pgmedic (envelope.Conn), repeated here so that
// testkit does not import envelope, whose own tests use testkit.
type Conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Call is one statement sent on a connection and what the server
// answered: an Exec's command tag, a QueryRow's scanned values (Query),
// or a Query's rows (Many), or the error.
type Call struct {
	SQL   string
	Args  json.RawMessage     `json:",omitempty"`
	Query bool                `json:",omitempty"`
	Many  bool                `json:",omitempty"`
	Row   []json.RawMessage   `json:",omitempty"`
	Rows  [][]json.RawMessage `json:",omitempty"`
	Tag   string              `json:",omitempty"`
	Err   *CallErr            `json:",omitempty"`
	// MS is how long the server took to answer an Exec or a QueryRow,
	// as recorded; a replay's clock may advance by it (Replayer.Elapsed),
	// so that what an experiment times comes out as it was measured.
	MS float64 `json:",omitempty"`
}

// CallErr is an error as a tape keeps it: a server error's SQLSTATE and
// message, no rows, or a client-side message.
type CallErr struct {
	Code    string `json:",omitempty"`
	Message string
	NoRows  bool `json:",omitempty"`
}

// ErrOf is err as a tape keeps it (nil for nil): a refused connection's
// too, which no session's calls hold.
func ErrOf(err error) *CallErr { return errOf(err) }

func errOf(err error) *CallErr {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &CallErr{Message: err.Error(), NoRows: true}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &CallErr{Code: pgErr.Code, Message: pgErr.Message}
	}
	return &CallErr{Message: err.Error()}
}

// Err is the error the call returned.
func (c *CallErr) Err() error {
	switch {
	case c == nil:
		return nil
	case c.NoRows:
		return pgx.ErrNoRows
	case c.Code != "":
		return &pgconn.PgError{Severity: "ERROR", Code: c.Code, Message: c.Message}
	}
	return errors.New(c.Message)
}

func argsJSON(args []any) json.RawMessage {
	if len(args) == 0 {
		return nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return b
}

// Recorder passes every call to a real connection and keeps it.
type Recorder struct {
	Conn  Conn
	Calls []Call
}

func (r *Recorder) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t0 := time.Now()
	tag, err := r.Conn.Exec(ctx, sql, args...)
	r.Calls = append(r.Calls, Call{SQL: sql, Args: argsJSON(args), Tag: tag.String(), Err: errOf(err), MS: msSince(t0)})
	return tag, err
}

func (r *Recorder) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t0 := time.Now()
	return &recordedRow{r: r, sql: sql, args: args, row: r.Conn.QueryRow(ctx, sql, args...), t0: t0}
}

// msSince is the milliseconds since t0, to the microsecond.
func msSince(t0 time.Time) float64 { return float64(time.Since(t0).Microseconds()) / 1000 }

// Query records the rows as the caller scans them; the call is kept when
// the rows are closed.
func (r *Recorder) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := r.Conn.Query(ctx, sql, args...)
	c := &Call{SQL: sql, Args: argsJSON(args), Query: true, Many: true, Rows: [][]json.RawMessage{}}
	if err != nil {
		c.Err = errOf(err)
		r.Calls = append(r.Calls, *c)
		return rows, err
	}
	return &recordedRows{Rows: rows, r: r, c: c}, nil
}

type recordedRow struct {
	r    *Recorder
	sql  string
	args []any
	row  pgx.Row
	t0   time.Time
}

func (w *recordedRow) Scan(dest ...any) error {
	err := w.row.Scan(dest...)
	c := Call{SQL: w.sql, Args: argsJSON(w.args), Query: true, Err: errOf(err), MS: msSince(w.t0)}
	if err == nil {
		c.Row = encodeAll(dest)
	}
	w.r.Calls = append(w.r.Calls, c)
	return err
}

type recordedRows struct {
	pgx.Rows
	r      *Recorder
	c      *Call
	closed bool
}

func (w *recordedRows) Scan(dest ...any) error {
	err := w.Rows.Scan(dest...)
	if err == nil {
		w.c.Rows = append(w.c.Rows, encodeAll(dest))
	}
	return err
}

func (w *recordedRows) Close() {
	w.Rows.Close()
	if !w.closed {
		w.closed = true
		if err := w.Rows.Err(); err != nil {
			w.c.Err = errOf(err)
		}
		w.r.Calls = append(w.r.Calls, *w.c)
	}
}

func (w *recordedRows) Next() bool {
	if w.Rows.Next() {
		return true
	}
	w.Close()
	return false
}

func encodeAll(dest []any) []json.RawMessage {
	out := make([]json.RawMessage, len(dest))
	for i, d := range dest {
		out[i] = encodeValue(d)
	}
	return out
}

// encodeValue keeps a scanned value as JSON; bytes that are JSON already
// (EXPLAIN output) are kept as they are, so tapes stay readable.
func encodeValue(dest any) json.RawMessage {
	v := reflect.ValueOf(dest).Elem().Interface()
	if b, ok := v.([]byte); ok && json.Valid(b) {
		return json.RawMessage(b)
	}
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

func decodeValue(raw json.RawMessage, dest any) error {
	if b, ok := dest.(*[]byte); ok {
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			*b = []byte(s)
			return nil
		}
		*b = append([]byte(nil), raw...)
		return nil
	}
	return json.Unmarshal(raw, dest)
}

// Replayer answers from recorded calls and writes the transcript: each
// statement sent (without Strip, pgmedic's tag) and a short form of the
// answer (Show, else the value on one line). A statement that differs
// from the recorded one fails the test: the behaviour changed, and the
// tape must be recorded again (Rerecord says how) to accept it.
type Replayer struct {
	T        *testing.T
	Name     string
	Calls    []Call
	Strip    string
	Rerecord string
	Show     func(json.RawMessage) string
	next     int
	elapsed  float64 // ms: the recorded MS of the calls replayed so far
	out      strings.Builder
}

// Transcript is what was sent and answered so far.
func (r *Replayer) Transcript() string { return r.out.String() }

// Done says whether every recorded call was replayed.
func (r *Replayer) Done() bool { return r.next == len(r.Calls) }

// Sent is how many calls were replayed so far.
func (r *Replayer) Sent() int { return r.next }

// LastMS is the server time the last call replayed took when it was
// recorded (ms; 0 before the first, or for a tape recorded without it).
func (r *Replayer) LastMS() float64 {
	if r.next == 0 {
		return 0
	}
	return r.Calls[r.next-1].MS
}

// Elapsed is the server time the calls replayed so far took when they
// were recorded (Call.MS; nothing for a tape recorded without it).
func (r *Replayer) Elapsed() time.Duration {
	return time.Duration(r.elapsed * float64(time.Millisecond))
}

func (r *Replayer) take(sql string, args []any, query, many bool) Call {
	r.T.Helper()
	if r.next >= len(r.Calls) {
		r.T.Fatalf("%s: more was sent than the tape holds; call %d: %s\n(%s)", r.Name, r.next+1, sql, r.Rerecord)
	}
	c := r.Calls[r.next]
	r.next++
	r.elapsed += c.MS
	if c.SQL != sql || compact(c.Args) != string(argsJSON(args)) || c.Query != query || c.Many != many {
		r.T.Fatalf("%s: call %d differs from the tape\n sent:     %s %s\n recorded: %s %s\n(%s)",
			r.Name, r.next, sql, argsJSON(args), c.SQL, compact(c.Args), r.Rerecord)
	}
	fmt.Fprintf(&r.out, "> %s%s\n", printable.OneLine(strings.TrimPrefix(sql, r.Strip)), argsText(args))
	if c.Err != nil {
		code := c.Err.Code
		if code == "" {
			code = "client"
		}
		fmt.Fprintf(&r.out, "! %s: %s\n", code, c.Err.Message)
	}
	return c
}

func (r *Replayer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c := r.take(sql, args, false, false)
	return pgconn.NewCommandTag(c.Tag), c.Err.Err()
}

func (r *Replayer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &replayedRow{r: r, sql: sql, args: args}
}

func (r *Replayer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c := r.take(sql, args, true, true)
	if c.Err != nil && len(c.Rows) == 0 {
		return nil, c.Err.Err()
	}
	fmt.Fprintf(&r.out, "< %d rows\n", len(c.Rows))
	return &replayedRows{r: r, c: c, at: -1}, nil
}

type replayedRow struct {
	r    *Replayer
	sql  string
	args []any
}

func (w *replayedRow) Scan(dest ...any) error {
	c := w.r.take(w.sql, w.args, true, false)
	if c.Err != nil {
		return c.Err.Err()
	}
	shown, err := w.r.scan(c.Row, dest, w.sql)
	if err != nil {
		return err
	}
	fmt.Fprintf(&w.r.out, "< %s\n", strings.Join(shown, " | "))
	return nil
}

func (r *Replayer) scan(row []json.RawMessage, dest []any, sql string) ([]string, error) {
	if len(row) != len(dest) {
		r.T.Fatalf("%s: the tape holds %d values for %d destinations: %s", r.Name, len(row), len(dest), sql)
	}
	var shown []string
	for i, d := range dest {
		if err := decodeValue(row[i], d); err != nil {
			r.T.Fatalf("%s: replaying a value of %s: %v", r.Name, sql, err)
		}
		show := r.Show
		if show == nil {
			show = func(raw json.RawMessage) string { return clipLine(printable.OneLine(string(raw)), 100) }
		}
		shown = append(shown, show(row[i]))
	}
	return shown, nil
}

// replayedRows plays a Query's recorded rows back; it implements the
// parts of pgx.Rows pgmedic uses (Next, Scan, Err, Close).
type replayedRows struct {
	r  *Replayer
	c  Call
	at int
}

func (w *replayedRows) Close()                                       {}
func (w *replayedRows) Err() error                                   { return w.c.Err.Err() }
func (w *replayedRows) CommandTag() pgconn.CommandTag                { return pgconn.NewCommandTag(w.c.Tag) }
func (w *replayedRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (w *replayedRows) Next() bool                                   { w.at++; return w.at < len(w.c.Rows) }
func (w *replayedRows) RawValues() [][]byte                          { return nil }
func (w *replayedRows) Conn() *pgx.Conn                              { return nil }
func (w *replayedRows) TypeMap() *pgtype.Map                         { return nil }
func (w *replayedRows) Values() ([]any, error) {
	return nil, errors.New("replayed rows hold scanned values only")
}

func (w *replayedRows) Scan(dest ...any) error {
	if w.at < 0 || w.at >= len(w.c.Rows) {
		return errors.New("Scan outside a row")
	}
	_, err := w.r.scan(w.c.Rows[w.at], dest, w.c.SQL)
	return err
}

func argsText(args []any) string {
	if len(args) == 0 {
		return ""
	}
	b, _ := json.Marshal(args)
	return "   -- args " + clipLine(string(b), 120)
}

func clipLine(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
