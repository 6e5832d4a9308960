package profile

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Experiment is a fix to measure: the statement as the application runs
// it and with the fix, each side with the settings it runs under.
type Experiment struct {
	Kind          string // the hot spot's kind (rules.HotKinds)
	Before, After string // the statement on each side
	SetBefore     string // SET LOCAL ... on each side ("" for none)
	SetAfter      string
	Change        string // the fix, as a person reads it
	Fixed         string // the fixed statement, normalised ("" for a setting)
}

// Side is one side's measurement: the kind's share of the samples of
// pgmedic's own backend while it ran the statement, and the statement's
// mean time.
type Side struct {
	Runs     int
	MedianMS float64
	Samples  int64
	Share    float64
}

// Columns lists a relation's columns of a type (for the time-zone fix:
// which columns are timestamp without time zone).
type Columns func(ctx context.Context, rel sqlparse.Name, typ string) ([]string, error)

// Plan designs the experiment for a hot spot of kind in a statement whose
// text (with its values) is raw; it says why when there is none. Only a
// SELECT that is safe to execute is re-run, and only fixes that change
// one setting or the statement itself: jit = off, and a timestamp column
// compared with timestamptz values moved to the column's type.
func Plan(ctx context.Context, kind, raw string, columns Columns) (*Experiment, string) {
	if raw == "" {
		return nil, "the statement's text was not seen in pg_stat_activity"
	}
	st, err := sqlparse.Parse(raw)
	if err != nil {
		return nil, "the statement's text does not parse (pg_stat_activity cuts it at track_activity_query_size)"
	}
	if ok, why := st.SafeToAnalyze(); !ok {
		return nil, "not re-run: " + why
	}
	if st.ParamCount() > 0 {
		return nil, "the statement has parameters ($1, ...) whose values pg_stat_activity does not show"
	}
	switch kind {
	case "jit":
		return &Experiment{Kind: kind, Before: raw, After: raw, SetBefore: "SET LOCAL jit TO DEFAULT", SetAfter: "SET LOCAL jit = off",
			Change: "SET jit = off"}, ""
	case "timezone":
		fixed, changed := st, 0
		for _, rel := range st.Relations() {
			cols, err := columns(ctx, rel, "timestamp without time zone")
			if err != nil {
				return nil, "reading the columns' types: " + err.Error()
			}
			for _, c := range cols {
				next, n, err := fixed.CastToColumnOnce(c, "timestamp without time zone")
				if err == nil && n > 0 {
					fixed, changed = next, changed+n
				}
			}
		}
		if changed == 0 {
			return nil, "no comparison of a timestamp column to rewrite was found in the statement"
		}
		// The change is said without the statement's values.
		_, norm := sqlparse.Fingerprint(fixed.Text())
		return &Experiment{Kind: kind, Before: raw, After: fixed.Text(), SetBefore: "SET LOCAL jit = off", SetAfter: "SET LOCAL jit = off",
			Change: "the timestamptz bound computed once and cast to the column's type (" + printable.Clip(norm, 200) + ")", Fixed: norm}, ""
	case "numeric-float":
		return nil, "the conversion comes from the expression's types (a float8 operand beside a numeric one); pgmedic does not rewrite expressions"
	}
	return nil, "the fix is not a change to one statement or setting"
}

// Measure runs each side for d on conn (pgmedic's own session, inside the
// safety envelope: every run in a read-only transaction that is rolled
// back) while perf records conn's backend, and returns both sides.
func Measure(ctx context.Context, perf *Perf, conn *pgx.Conn, e *Experiment, d time.Duration, kindShare func(model.Profile) float64) (before, after Side, err error) {
	var pid int
	if err := conn.QueryRow(ctx, envelope.Tag+"SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return before, after, fmt.Errorf("reading pgmedic's backend pid: %w", err)
	}
	side := func(set, sql string) (Side, error) {
		dir, err := os.MkdirTemp("", "pgmedic-perf-")
		if err != nil {
			return Side{}, err
		}
		defer os.RemoveAll(dir)
		var s Side
		var times []float64
		var data string
		var recErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); data, recErr = perf.Record(ctx, dir, []int{pid}, d, 499) }()
		time.Sleep(150 * time.Millisecond) // perf attaches
		deadline := time.Now().Add(d - 300*time.Millisecond)
		var runErr error
		for time.Now().Before(deadline) && runErr == nil {
			runErr = envelope.RolledBack(ctx, conn, envelope.ReadOnly, func() error {
				if set != "" {
					if _, err := conn.Exec(ctx, envelope.Tag+set); err != nil {
						return err
					}
				}
				start := time.Now()
				_, err := conn.Exec(ctx, envelope.Tag+sql)
				times = append(times, float64(time.Since(start).Microseconds())/1000)
				return err
			})
		}
		wg.Wait()
		if runErr != nil {
			return s, fmt.Errorf("running the statement: %s", envelope.Message(runErr))
		}
		if recErr != nil {
			return s, recErr
		}
		b := NewBuilder("pgmedic's backend")
		if _, err := perf.Script(ctx, data, b.Add); err != nil {
			return s, err
		}
		p := b.Profile(d.Seconds())
		sort.Float64s(times)
		s.Runs, s.Samples, s.Share = len(times), p.Samples, kindShare(p)
		if len(times) > 0 {
			s.MedianMS = model.Round(model.Percentile(times, 0.5), 3)
		}
		return s, nil
	}
	if before, err = side(e.SetBefore, e.Before); err != nil {
		return before, after, err
	}
	after, err = side(e.SetAfter, e.After)
	return before, after, err
}
