package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/verify"
)

// A tape is what one experiment run sent to PostgreSQL 15 and what the
// server answered, with the engine's inputs: the snapshot and the findings
// the rules produced. Recorded once from a lab scenario (-record), it
// replays the run without a server, so a test sees every statement the
// engine sends and every figure it judges.
type tape struct {
	Scenario string
	Snapshot *model.Snapshot
	Findings []tapedFinding
	Calls    []call
}

type tapedFinding struct {
	Finding    model.Finding
	Experiment *model.Experiment
}

// call is one Exec or QueryRow(...).Scan.
type call struct {
	SQL  string
	Args json.RawMessage `json:",omitempty"`
	// Row holds the scanned values of a QueryRow; Exec calls have none.
	Query bool              `json:",omitempty"`
	Row   []json.RawMessage `json:",omitempty"`
	Tag   string            `json:",omitempty"`
	Err   *callErr          `json:",omitempty"`
}

type callErr struct {
	Code    string `json:",omitempty"` // SQLSTATE of a server error
	Message string
	NoRows  bool `json:",omitempty"`
}

func errOf(err error) *callErr {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &callErr{Message: err.Error(), NoRows: true}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return &callErr{Code: pgErr.Code, Message: pgErr.Message}
	}
	return &callErr{Message: err.Error()}
}

func (c *callErr) err() error {
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

// recorder passes every call to a real connection and keeps it.
type recorder struct {
	conn  verify.Conn
	calls []call
}

func (r *recorder) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := r.conn.Exec(ctx, sql, args...)
	r.calls = append(r.calls, call{SQL: sql, Args: argsJSON(args), Tag: tag.String(), Err: errOf(err)})
	return tag, err
}

func (r *recorder) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &recordedRow{r: r, sql: sql, args: args, row: r.conn.QueryRow(ctx, sql, args...)}
}

type recordedRow struct {
	r    *recorder
	sql  string
	args []any
	row  pgx.Row
}

func (w *recordedRow) Scan(dest ...any) error {
	err := w.row.Scan(dest...)
	c := call{SQL: w.sql, Args: argsJSON(w.args), Query: true, Err: errOf(err)}
	if err == nil {
		for _, d := range dest {
			c.Row = append(c.Row, encodeValue(d))
		}
	}
	w.r.calls = append(w.r.calls, c)
	return err
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

// replayer answers from a tape and writes the transcript: each statement
// sent (without pgmedic's tag) and a short form of the answer. A statement
// that differs from the recorded one fails the test: the engine's
// behaviour changed, and the tape must be recorded again to accept it.
type replayer struct {
	t     *testing.T
	name  string
	calls []call
	next  int
	out   strings.Builder
}

func (r *replayer) take(sql string, args []any, query bool) call {
	r.t.Helper()
	if r.next >= len(r.calls) {
		r.t.Fatalf("%s: the engine sent more than the tape holds; call %d: %s\n(re-record: go test ./internal/verify -run Transcripts -record)", r.name, r.next+1, sql)
	}
	c := r.calls[r.next]
	r.next++
	if c.SQL != sql || compact(c.Args) != string(argsJSON(args)) || c.Query != query {
		r.t.Fatalf("%s: call %d differs from the tape\n sent:     %s %s\n recorded: %s %s\n(re-record: go test ./internal/verify -run Transcripts -record)",
			r.name, r.next, sql, argsJSON(args), c.SQL, compact(c.Args))
	}
	fmt.Fprintf(&r.out, "> %s%s\n", oneLine(strings.TrimPrefix(sql, envelope.Tag)), argsText(args))
	if c.Err != nil {
		code := c.Err.Code
		if code == "" {
			code = "client"
		}
		fmt.Fprintf(&r.out, "! %s: %s\n", code, c.Err.Message)
	}
	return c
}

func (r *replayer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c := r.take(sql, args, false)
	return pgconn.NewCommandTag(c.Tag), c.Err.err()
}

func (r *replayer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &replayedRow{r: r, sql: sql, args: args}
}

type replayedRow struct {
	r    *replayer
	sql  string
	args []any
}

func (w *replayedRow) Scan(dest ...any) error {
	c := w.r.take(w.sql, w.args, true)
	if c.Err != nil {
		return c.Err.err()
	}
	if len(c.Row) != len(dest) {
		w.r.t.Fatalf("%s: the tape holds %d values for %d destinations: %s", w.r.name, len(c.Row), len(dest), w.sql)
	}
	var shown []string
	for i, d := range dest {
		if err := decodeValue(c.Row[i], d); err != nil {
			w.r.t.Fatalf("%s: replaying a value of %s: %v", w.r.name, w.sql, err)
		}
		shown = append(shown, valueText(c.Row[i]))
	}
	fmt.Fprintf(&w.r.out, "< %s\n", strings.Join(shown, " | "))
	return nil
}

// valueText is a short form of an answer: an EXPLAIN's root node and
// times, else the value itself cut to a line.
func valueText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '[' {
		if ex, err := plan.ParseJSON(raw); err == nil {
			s := "plan: " + ex.Plan.NodeType
			if ex.Plan.RelationName != "" {
				s += " on " + ex.Plan.RelationName
			}
			s += fmt.Sprintf(", cost %.2f", ex.Plan.TotalCost)
			if ex.ExecutionMS > 0 {
				s += fmt.Sprintf(", %.3f ms", ex.PlanningMS+ex.ExecutionMS)
			}
			if b := ex.Plan.Buffers; b.SharedHit+b.SharedRead+b.LocalHit+b.LocalRead > 0 {
				s += fmt.Sprintf(", buffers shared %d/%d local %d/%d", b.SharedHit, b.SharedRead, b.LocalHit, b.LocalRead)
			}
			if ex.JIT != nil && ex.JIT.Functions > 0 {
				s += fmt.Sprintf(", JIT %d functions", ex.JIT.Functions)
			}
			return s
		}
	}
	s := oneLine(string(raw))
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return s
}

func argsText(args []any) string {
	if len(args) == 0 {
		return ""
	}
	b, _ := json.Marshal(args)
	s := string(b)
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return "   -- args " + s
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func readTape(path string) (*tape, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tp tape
	if err := json.Unmarshal(b, &tp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &tp, nil
}

func writeTape(path string, tp *tape) error {
	b, err := json.MarshalIndent(tp, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
