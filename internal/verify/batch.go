package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

const batchStmtName = "pgmedic_verify_batch"

// batch times what an N+1 loop costs its client against the batched
// lookup: the statement prepared once, then run exp.Calls times, one round
// trip per key, as the application does; and the = ANY($n) form run once
// with the same keys as an array. Both read-only and rolled back, Runs
// times each, alternating; the times are pgmedic's own clock around the
// calls, round trips included (over pgmedic's connection, which may be
// shorter or longer than the application's). The keys are values of the
// column from pg_stats' histogram: real keys, no table read.
func (e *Engine) batch(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	b := e.rerunnable(ctx, f)
	if b == nil {
		return
	}
	defer b.cleanup()
	if len(b.types) != 1 {
		f.Verification = model.NotRunBecause("the lookup does not take one parameter")
		return
	}
	keys, err := e.columnKeys(ctx, exp.Table, exp.Column, int(exp.Calls))
	if err != nil || len(keys) < 2 {
		f.Verification = model.NotRunBecause("pg_stats has no keys of " + exp.Table.Name + "." + exp.Column + " to look up")
		return
	}
	typ := b.types[0]
	if err := envelope.PrepareAs(ctx, e.Conn, batchStmtName, []string{typ + "[]"}, exp.Rewrite); err != nil {
		f.Verification = model.NotRunBecause("cannot prepare the batched form: " + envelope.Message(err))
		return
	}
	defer e.Conn.Exec(context.Background(), envelope.Tag+"DEALLOCATE "+batchStmtName)
	lits := make([]string, len(keys))
	for i, k := range keys {
		lits[i] = sqlparse.QuoteLiteral(k) + "::" + typ
	}
	array := "ARRAY[" + strings.Join(lits, ", ") + "]"
	loop := func() error {
		for _, l := range lits {
			if _, err := e.Conn.Exec(ctx, envelope.Tag+"EXECUTE "+stmtName+"("+l+")"); err != nil {
				return err
			}
		}
		return nil
	}
	batched := func() error {
		_, err := e.Conn.Exec(ctx, envelope.Tag+"EXECUTE "+batchStmtName+"("+array+")")
		return err
	}
	var loops, batches []float64
	for i := range e.Runs + 1 {
		for j := range 2 {
			run, side := loop, &loops
			if (i+j)%2 == 1 {
				run, side = batched, &batches
			}
			var ms float64
			err := e.readOnly(ctx, func() error {
				start := e.now()
				err := run()
				ms = float64(e.now().Sub(start).Microseconds()) / 1000
				return err
			})
			if err != nil {
				f.Verification = model.NotRunBecause("running the lookups failed: " + envelope.Message(err))
				return
			}
			if i > 0 { // the first of each warms the cache
				*side = append(*side, ms)
			}
		}
	}
	before, after := median(loops), median(batches)
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: fmt.Sprintf("measured: %d lookups, one call each (median)", len(keys)), Value: model.Round(before, 2), Unit: "ms"},
		model.Evidence{Label: fmt.Sprintf("measured: the same %d keys in one call (median)", len(keys)), Value: model.Round(after, 2), Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%d keys of %s.%s from pg_stats looked up one EXECUTE at a time, and in one EXECUTE of the = ANY form, x%d each, alternating, in rolled-back read-only transactions; pgmedic's clock around the calls, round trips over its own connection included; medians", len(keys), exp.Table.Name, exp.Column, e.Runs),
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "ms"}}
	if judge(f, before, after) {
		return
	}
	f.Title = fmt.Sprintf("the batched lookup is not faster here (%.2f ms for %d calls, %.2f ms in one)", before, len(keys), after)
}

// columnKeys are up to n distinct values of a column from pg_stats (its
// histogram's bounds, then its common values).
func (e *Engine) columnKeys(ctx context.Context, t model.RelRef, column string, n int) ([]string, error) {
	mcv, hist, err := e.columnStats(ctx, t, column)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, v := range append(hist, mcv...) {
		if len(out) < n && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// now is the engine's clock: the wall clock, or Now where a test gives
// one.
func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
