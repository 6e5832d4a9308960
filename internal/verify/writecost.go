package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// writeRows is how many of the table's rows the insert-cost measurement
// writes: enough that per-row index maintenance dominates the statement's
// fixed cost, few enough to take a fraction of a second.
const writeRows = 20000

// writeCost is what an index costs the writers: the same rows inserted
// into an empty table of the table's definition (its own indexes, unique
// ones included, so the rows do not collide), without and with the
// proposed index, in rows per second. Every index a row must enter is
// one more B-tree descent and leaf write per insert, which is the price
// an index adds to INSERT and to any UPDATE that cannot be HOT. It runs
// inside the experiment's transaction on a twin, which is rolled back
// (never on a target: its temporary copy is for the read alone).
type writeCost struct {
	rows          int64
	before, after float64 // rows per second
}

func (e *Engine) measureWriteCost(ctx context.Context, relation string, proposal *model.IndexProposal) (*writeCost, error) {
	steps := []string{
		fmt.Sprintf("CREATE TEMP TABLE pgmedic_write_rows ON COMMIT DROP AS SELECT * FROM %s LIMIT %d", relation, writeRows),
		"CREATE TEMP TABLE pgmedic_write_into (LIKE " + relation + " INCLUDING INDEXES) ON COMMIT DROP",
	}
	for _, q := range steps {
		if _, err := e.Conn.Exec(ctx, envelope.Tag+q); err != nil {
			return nil, err
		}
	}
	w := &writeCost{}
	if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT count(*) FROM pgmedic_write_rows").Scan(&w.rows); err != nil {
		return nil, err
	}
	if w.rows == 0 {
		return nil, fmt.Errorf("the table has no rows to insert")
	}
	rate := func() (float64, error) {
		var times []float64
		for i := 0; i <= e.Runs; i++ { // the first run warms the cache
			if _, err := e.Conn.Exec(ctx, envelope.Tag+"TRUNCATE pgmedic_write_into"); err != nil {
				return 0, err
			}
			ex, err := envelope.Explain(ctx, e.Conn, "ANALYZE, TIMING OFF", "INSERT INTO pgmedic_write_into SELECT * FROM pgmedic_write_rows")
			if err != nil {
				return 0, err
			}
			if i > 0 {
				times = append(times, ex.ExecutionMS)
			}
		}
		ms := median(times)
		if ms <= 0 {
			return 0, fmt.Errorf("the inserts took no measurable time")
		}
		return model.Round(float64(w.rows)/(ms/1000), 0), nil
	}
	var err error
	if w.before, err = rate(); err != nil {
		return nil, err
	}
	if _, err := e.Conn.Exec(ctx, envelope.Tag+proposal.On("pgmedic_write_into")); err != nil {
		return nil, err
	}
	if w.after, err = rate(); err != nil {
		return nil, err
	}
	return w, nil
}

// evidence adds the writers' side to an index finding: the insert rate
// without and with the index, and what share of it the index takes.
func (w *writeCost) evidence(f *model.Finding) {
	if w == nil {
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: fmt.Sprintf("inserts per second without the index (%d of the table's rows into an empty copy of its definition)", w.rows), Value: w.before, Unit: "rows/s"},
		model.Evidence{Label: "inserts per second with the index", Value: w.after, Unit: "rows/s"})
	if w.before > 0 {
		cost := 100 * (1 - w.after/w.before)
		f.Impact.Summary += fmt.Sprintf(" Writers pay for it: inserts measured %.0f rows/s without the index and %.0f with it (%+.0f%%).", w.before, w.after, -cost)
	}
}

// writesOf measures the writers' cost before the index is built on the
// table (an empty copy of its definition would include it), inside a
// savepoint: when it fails, the read's measurement goes on without it.
func (e *Engine) writesOf(ctx context.Context, runs *copyRuns, relation string, proposal *model.IndexProposal) {
	if proposal == nil {
		return
	}
	if _, err := e.Conn.Exec(ctx, envelope.Tag+"SAVEPOINT pgmedic_writes"); err != nil {
		runs.writesWhy = envelope.Message(err)
		return
	}
	w, err := e.measureWriteCost(ctx, relation, proposal)
	if err != nil {
		runs.writesWhy = envelope.Message(err)
		e.Conn.Exec(ctx, envelope.Tag+"ROLLBACK TO SAVEPOINT pgmedic_writes")
		return
	}
	runs.writes = w
	e.Conn.Exec(ctx, envelope.Tag+"RELEASE SAVEPOINT pgmedic_writes")
}
