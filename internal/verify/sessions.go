package verify

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// The reproductions and replays on a twin run a statement the sampler saw
// from several sessions of their own. This file holds what they share:
// the statement made runnable on any session, and sessions timing it in
// a loop.

// sessionStmt is a statement the sessions run: as the sampler saw it, or,
// when the client sent it with $n placeholders, prepared as a name on
// each session and executed with values bind chose from the table. query
// is its runnable text and values the values as SQL, for sessions that
// cannot keep a prepared statement (behind a transaction-mode pool).
type sessionStmt struct {
	prepare, run, query string
	params, values      []string
	writes              bool
	// name and types are the prepared statement's, for binding other
	// values (onARow).
	name  string
	types []string
	stmt  *sqlparse.Statement
}

func (e *Engine) forSessions(ctx context.Context, text, name string) (sessionStmt, string) {
	st, err := sqlparse.Parse(text)
	if err != nil {
		return sessionStmt{}, "cannot parse it: " + err.Error()
	}
	writes := st.Shape().Command != "SELECT"
	if st.ParamCount() == 0 {
		return sessionStmt{run: text, query: text, writes: writes}, ""
	}
	query, err := st.Runnable()
	if err != nil {
		return sessionStmt{}, "it cannot be run: " + err.Error()
	}
	b, why := e.bind(ctx, st, nil)
	if why != "" {
		return sessionStmt{}, why
	}
	b.cleanup()
	return sessionStmt{
		prepare: "PREPARE " + name + "(" + strings.Join(b.types, ", ") + ") AS " + query,
		run:     "EXECUTE " + name + "(" + strings.Join(b.values, ", ") + ")",
		query:   query,
		params:  b.desc,
		values:  b.values,
		writes:  writes,
		name:    name,
		types:   b.types,
		stmt:    st,
	}, ""
}

// onARow binds the statement's parameters compared with columns of one
// table to the values of one row of that table on the twin, where the
// values bind chose (pg_stats' common values, a histogram bound) may
// match no row the twin holds: a write that matches nothing locks
// nothing, and no session queues behind it. ok is false when no
// parameter is compared with a column, or the table has no row.
func (e *Engine) onARow(ctx context.Context, s sessionStmt) (sessionStmt, bool) {
	if s.stmt == nil || s.name == "" {
		return s, false
	}
	type param struct {
		n   int
		col sqlparse.Column
	}
	var ps []param
	var table sqlparse.Column
	pc := s.stmt.ParamColumns()
	for _, n := range slices.Sorted(maps.Keys(pc)) {
		for _, c := range pc[n] {
			if table.Table == "" {
				table = c
			}
			if c.Schema == table.Schema && c.Table == table.Table {
				ps = append(ps, param{n, c})
				break
			}
		}
	}
	if len(ps) == 0 || len(ps) > len(s.values) {
		return s, false
	}
	var sel []string
	for _, p := range ps {
		sel = append(sel, "quote_nullable("+sqlparse.QuoteIdent(p.col.Column)+"::text)")
	}
	row := make([]string, len(ps))
	dest := make([]any, len(ps))
	for i := range row {
		dest[i] = &row[i]
	}
	q := envelope.Tag + "SELECT " + strings.Join(sel, ", ") + " FROM " + sqlparse.QuoteQualified(table.Schema, table.Table) + " LIMIT 1"
	if err := e.Conn.QueryRow(ctx, q).Scan(dest...); err != nil {
		return s, false
	}
	out := s
	out.values = slices.Clone(s.values)
	out.params = slices.Clone(s.params)
	for i, p := range ps {
		if p.n < 1 || p.n > len(out.values) {
			return s, false
		}
		out.values[p.n-1] = row[i] + "::" + s.types[p.n-1]
		desc := e.valueText(p.n, strings.Trim(row[i], "'"), s.types[p.n-1], "a row of "+table.Table+" on the twin", true)
		if len(out.params) == len(out.values) {
			out.params[p.n-1] = desc
		} else {
			out.params = append(out.params, desc)
		}
	}
	out.run = "EXECUTE " + s.name + "(" + strings.Join(out.values, ", ") + ")"
	return out, true
}

// prepareOn prepares q on each session ("" prepares nothing).
func prepareOn(ctx context.Context, conns []Session, q string) error {
	if q == "" {
		return nil
	}
	for _, c := range conns {
		if _, err := c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// loopTimed has each session call run until finish is called, and
// finish returns the latencies run reported (ms) and the first error
// that did not come from being stopped. A session stops at its first
// error.
func (e *Engine) loopTimed(ctx context.Context, conns []Session, run func(context.Context, Session) (float64, error)) (finish func() ([]float64, error)) {
	lctx, cancel := context.WithCancel(ctx)
	var stopping atomic.Bool
	var mu sync.Mutex
	var lat []float64
	var first error
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A session stops between runs, so its last run completes
			// (the locks it waited on are gone by then); a replayed one
			// runs what was recorded, however soon the replay stops it.
			more := func() bool { return !stopping.Load() && lctx.Err() == nil }
			if r, ok := c.(Replayed); ok {
				more = func() bool { return !r.Ended() }
			}
			for more() {
				ms, err := run(lctx, c)
				mu.Lock()
				if err != nil && lctx.Err() == nil && first == nil {
					first = err
				}
				if err == nil {
					lat = append(lat, ms)
				}
				mu.Unlock()
				if err != nil {
					return
				}
				e.sleep(lctx, loopPace)
			}
		}()
	}
	return func() ([]float64, error) {
		stopping.Store(true)
		// A run still held up after loopDrain is cancelled (its
		// statement is cancelled on the server).
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(loopDrain):
			cancel()
			<-done
		}
		cancel()
		return lat, first
	}
}

// loopDrain bounds how long loopTimed's finish waits for the runs under
// way to complete before it cancels them.
const loopDrain = 5 * time.Second

// execMS runs one statement and returns how long it took (ms): by the
// wall clock, or as recorded for a replayed session.
func execMS(ctx context.Context, c Session, q string) (float64, error) {
	t0 := time.Now()
	_, err := c.Exec(ctx, q)
	ms := float64(time.Since(t0).Microseconds()) / 1000
	if r, ok := c.(Replayed); ok {
		ms = r.LastMS()
	}
	return ms, err
}

// bothSides runs a reproduction's two sides, as it happened and with the
// fix, and returns each side's longest run (ms: the incident is in the
// few runs a lock held up, among thousands it did not) and how many runs
// it timed.
func bothSides(run func(fixed bool) ([]float64, error)) (worst [2]float64, runs [2]int, err error) {
	for side, fixed := range []bool{false, true} {
		lat, err := run(fixed)
		if err != nil {
			return worst, runs, err
		}
		if len(lat) > 0 {
			worst[side] = model.Round(slices.Max(lat), 1)
		}
		runs[side] = len(lat)
	}
	return worst, runs, nil
}

// loopPace is the pause between one session's runs in loopTimed: an
// application's sessions send statements at a pace, and sessions running
// flat out would take the cores from the server they measure (on a small
// machine, its longest run then measures the scheduler, not the lock).
const loopPace = 5 * time.Millisecond

// sleep is the engine's wait: Sleep, or the Sleep a test gives.
func (e *Engine) sleep(ctx context.Context, d time.Duration) {
	if e.Sleep != nil {
		e.Sleep(ctx, d)
		return
	}
	wait.For(ctx, d)
}
