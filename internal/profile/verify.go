package profile

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

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

// Measure runs the two sides in turn on conn (pgmedic's own session,
// inside the safety envelope: every run in a read-only transaction that
// is rolled back) for d while perf records conn's backend, and returns
// both sides. The sides alternate run by run inside one recording, so a
// moment when the machine is busy slows both alike; each perf sample
// counts for the side whose run it fell in (both are stamped on
// CLOCK_MONOTONIC), and samples between runs count for neither.
func Measure(ctx context.Context, perf *Perf, conn envelope.Conn, e *Experiment, d time.Duration, kindShare func(model.Profile) float64) (before, after Side, err error) {
	var pid int
	if err := conn.QueryRow(ctx, envelope.Tag+"SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return before, after, fmt.Errorf("reading pgmedic's backend pid: %w", err)
	}
	dir, err := os.MkdirTemp("", "pgmedic-perf-")
	if err != nil {
		return before, after, err
	}
	defer os.RemoveAll(dir)
	var data string
	var recErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); data, recErr = perf.Record(ctx, dir, []int{pid}, d, 499) }()
	type window struct {
		from, to float64 // CLOCK_MONOTONIC seconds
		side     int
	}
	var runs []window
	var times [2][]float64
	sides := [2]struct{ set, sql string }{{e.SetBefore, e.Before}, {e.SetAfter, e.After}}
	// The last runs end well before perf stops, so none is cut in two.
	deadline := time.Now().Add(d - 300*time.Millisecond)
	var runErr error
	for i := 0; time.Now().Before(deadline) && runErr == nil; i++ {
		side := sides[i%2]
		runErr = envelope.RolledBack(ctx, conn, envelope.ReadOnly, func() error {
			if side.set != "" {
				if _, err := conn.Exec(ctx, envelope.Tag+side.set); err != nil {
					return err
				}
			}
			start, from := time.Now(), monotonic()
			_, err := conn.Exec(ctx, envelope.Tag+side.sql)
			runs = append(runs, window{from: from, to: monotonic(), side: i % 2})
			times[i%2] = append(times[i%2], float64(time.Since(start).Microseconds())/1000)
			return err
		})
	}
	wg.Wait()
	if runErr != nil {
		return before, after, fmt.Errorf("running the statement: %s", envelope.Message(runErr))
	}
	if recErr != nil {
		return before, after, recErr
	}
	builders := [2]*Builder{NewBuilder("pgmedic's backend"), NewBuilder("pgmedic's backend")}
	_, err = perf.Script(ctx, data, func(smp Sample) {
		// Runs are in time order: the first that ends after the sample.
		i := sort.Search(len(runs), func(i int) bool { return runs[i].to >= smp.Time })
		if i < len(runs) && runs[i].from <= smp.Time {
			builders[runs[i].side].Add(smp)
		}
	})
	if err != nil {
		return before, after, err
	}
	var out [2]Side
	for k := range out {
		p := builders[k].Profile(d.Seconds() / 2)
		sort.Float64s(times[k])
		out[k] = Side{Runs: len(times[k]), Samples: p.Samples, Share: kindShare(p)}
		if len(times[k]) > 0 {
			out[k].MedianMS = model.Round(model.Percentile(times[k], 0.5), 3)
		}
	}
	return out[0], out[1], nil
}
