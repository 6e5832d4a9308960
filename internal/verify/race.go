package verify

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// The race: raceWorkers sessions claim together, raceRounds times, each
// holding its claim raceHold before COMMIT, as a worker does while it
// processes its rows. Pollers woken by the same tick are what makes the
// race: every round starts all workers at once.
const (
	raceWorkers = 4
	raceRounds  = 8
	raceHold    = 20 * time.Millisecond
)

// raceSide is one side of the race: claims made, rows they updated, and
// how many distinct rows that was.
type raceSide struct {
	claims, rows, distinct int64
	seconds                float64
}

func (r raceSide) duplicates() int64 { return r.rows - r.distinct }

// claimRace proves a queue-claim-race finding on a throwaway database
// (the twin, or a lab database): the application's claim statement run by
// concurrent workers as written, then the fix (FOR UPDATE SKIP LOCKED in
// its subquery), counting rows updated by more than one claim. The second
// side claims the rows the first left, so no reset is needed between
// them. On a target it never runs: Workers is set only for a twin.
func (e *Engine) claimRace(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil {
		f.Verification = model.NotRunBecause("a race needs concurrent writers and pgmedic does not write to a target: check --twin runs it on a twin of the table")
		return
	}
	stmt, err := statement(exp)
	if err != nil {
		f.Verification = model.NotRunBecause("cannot parse the statement: " + err.Error())
		return
	}
	fixed, err := sqlparse.Parse(exp.Rewrite)
	if err != nil {
		f.Verification = model.NotRunBecause("cannot parse the fixed statement: " + err.Error())
		return
	}
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	b.cleanup()
	table := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	var sides [2]raceSide
	for i, st := range []*sqlparse.Statement{stmt, fixed} {
		text, err := st.Runnable()
		if err == nil {
			sides[i], err = e.race(ctx, text, b, table)
		}
		if err != nil {
			f.Verification = model.NotRunBecause("the race on the twin failed: " + envelope.Message(err))
			return
		}
	}
	before, after := sides[0], sides[1]
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "claims of rows another worker also claimed, as written", Value: float64(before.duplicates())},
		model.Evidence{Label: "claims of rows another worker also claimed, with FOR UPDATE SKIP LOCKED", Value: float64(after.duplicates())},
		model.Evidence{Label: "claims per second, as written", Value: model.Round(float64(before.claims)/before.seconds, 1)},
		model.Evidence{Label: "claims per second, with FOR UPDATE SKIP LOCKED", Value: model.Round(float64(after.claims)/after.seconds, 1)})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%d workers claiming together %d times, each holding its claim %s before COMMIT, with the statement as written and then with FOR UPDATE SKIP LOCKED; duplicate claims are row updates beyond the first of each row (%d rows updated, %d distinct; then %d, %d distinct)",
			raceWorkers, raceRounds, raceHold, before.rows, before.distinct, after.rows, after.distinct),
		Parameters: b.desc,
		Before:     &model.Measure{Value: float64(before.duplicates()), Unit: "duplicate claims"},
		After:      &model.Measure{Value: float64(after.duplicates()), Unit: "duplicate claims"}}
	switch {
	case before.duplicates() > 0 && after.duplicates() == 0:
		f.Verification.Status = model.Confirmed
	case before.duplicates() == 0:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = "no row was claimed twice in the race: the claim's own locking already keeps workers apart, or the race needs more workers than were run"
		f.Severity = model.Info
	default:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = "the fix still let rows be claimed twice"
	}
}

// race runs one side: the claim prepared on every worker's connection
// with the types and values bind chose, every round started together.
func (e *Engine) race(ctx context.Context, query string, b *bound, table string) (raceSide, error) {
	var side raceSide
	conns, closeAll, err := e.openWorkers(ctx, raceWorkers)
	defer closeAll()
	if err != nil {
		return side, err
	}
	run := query
	for _, c := range conns {
		if len(b.types) > 0 {
			if err := envelope.PrepareAs(ctx, c, "pgmedic_claim", b.types, query); err != nil {
				return side, err
			}
			run = "EXECUTE pgmedic_claim(" + strings.Join(b.values, ", ") + ")"
		}
	}
	// Rows a claim of this side updated carry one of its transactions'
	// ids: the next transaction id now is below all of them.
	var first int64
	if err := conns[0].QueryRow(ctx, "SELECT txid_current()").Scan(&first); err != nil {
		return side, err
	}
	started := e.now()
	var mu sync.Mutex
	var firstErr error
	for r := 0; r < raceRounds && firstErr == nil; r++ {
		var gate, done sync.WaitGroup
		gate.Add(1)
		for _, c := range conns {
			done.Add(1)
			go func() {
				defer done.Done()
				gate.Wait()
				n, err := claimOnce(ctx, c, run)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				side.claims++
				side.rows += n
			}()
		}
		gate.Done()
		done.Wait()
	}
	if firstErr != nil {
		return side, firstErr
	}
	side.seconds = max(e.now().Sub(started).Seconds(), 1e-3)
	err = conns[0].QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE xmin::text::bigint >= $1", first%(1<<32)).Scan(&side.distinct)
	return side, err
}

// openWorkers opens n more sessions on the experiment's database (a twin
// or a lab database); closeAll closes those that opened, whatever failed.
func (e *Engine) openWorkers(ctx context.Context, n int) (conns []Session, closeAll func(), err error) {
	closeAll = func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}
	for range n {
		c, err := e.Workers(ctx)
		if err != nil {
			return conns, closeAll, err
		}
		conns = append(conns, c)
	}
	return conns, closeAll, nil
}

// claimOnce is one worker's claim: BEGIN, the claim, a moment of work,
// COMMIT; it returns the rows the claim updated. A claim that failed is
// rolled back.
func claimOnce(ctx context.Context, c Session, run string) (int64, error) {
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return 0, err
	}
	tag, err := c.Exec(ctx, run)
	if err != nil {
		c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return 0, err
	}
	time.Sleep(raceHold)
	if _, err := c.Exec(ctx, "COMMIT"); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
