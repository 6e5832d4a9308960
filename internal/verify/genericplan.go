package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// genericScreenRuns are the runs per plan and value that pick the value
// to measure; the verdict's value is then run e.Runs times each way.
const genericScreenRuns = 2

// screenRatio is how much more the generic plan cost than a custom plan
// for one value in the screening runs: by the blocks each read when both
// read some (two runs' times on a busy machine can rank a value whose
// plans do the same work above the one the generic plan loses on; a run
// CI's load slowed picked a small tenant, and the verdict measured the
// generic plan faster), by their times when they read none.
func screenRatio(genericMS, customMS, genericBlocks, customBlocks float64) float64 {
	if genericBlocks > 0 && customBlocks > 0 {
		return genericBlocks / customBlocks
	}
	return genericMS / max(customMS, 0.001)
}

// genericPlan measures a prepared statement under its generic plan and
// under custom plans, for values of the skewed column its parameter is
// compared with: pg_stats' three most common values, and two values of
// the histogram (rows that are not among the common ones). The value on
// which the generic plan loses most is measured Runs times each way,
// alternating. The generic plan is what the application got when its
// slowest calls (max_exec_time) reached the generic plan's time for that
// value (nearer it than the custom plan's, on a geometric scale); when
// they stayed near the custom plan's, the application does not send that
// value to a generic plan, and the finding is refuted with both numbers.
func (e *Engine) genericPlan(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	b := e.rerunnable(ctx, f)
	if b == nil {
		return
	}
	defer b.cleanup()
	if exp.Param < 1 || exp.Param > len(b.values) {
		f.Verification = model.NotRunBecause("the statement has no parameter $" + fmt.Sprint(exp.Param))
		return
	}
	candidates, err := e.columnValues(ctx, exp.Table, exp.Column)
	if err != nil || len(candidates) == 0 {
		f.Verification = model.NotRunBecause("pg_stats has no values of " + exp.Table.Name + "." + exp.Column + " to plan the statement for")
		return
	}
	typ := b.types[exp.Param-1]
	target := func(v string) string {
		vals := slices.Clone(b.values)
		vals[exp.Param-1] = sqlparse.QuoteLiteral(v) + "::" + typ
		return "EXECUTE " + stmtName + "(" + strings.Join(vals, ", ") + ")"
	}
	// The blocks a custom plan reads for the costliest value tried: an
	// application whose calls read no more on average runs custom plans.
	customBlocks := 0.0
	// The blocks each plan read for each value: the work, which a busy
	// machine does not change as it changes the time.
	blocks := map[[2]string]float64{}
	// A plan that runs past pgmedic's statement_timeout for a value is
	// timed at the timeout, a lower bound of its time, and not run again.
	timedOut := map[[2]string]float64{}
	run := func(v, mode string, n int) ([]float64, error) {
		var ms []float64
		for range n {
			if bound := timedOut[[2]string{v, mode}]; bound > 0 {
				ms = append(ms, bound)
				continue
			}
			ex, err := e.onceWith(ctx, "ANALYZE, BUFFERS, TIMING OFF", target(v), e.jitSetting(), exp.AppSettings, mode)
			if bound, ok := bounded(err); ok {
				timedOut[[2]string{v, mode}] = bound
				ms = append(ms, bound)
				continue
			}
			if err != nil {
				return nil, err
			}
			ms = append(ms, ex.PlanningMS+ex.ExecutionMS)
			read := float64(ex.Plan.Buffers.SharedHit + ex.Plan.Buffers.SharedRead)
			blocks[[2]string{v, mode}] = max(blocks[[2]string{v, mode}], read)
			if mode == customPlan {
				customBlocks = max(customBlocks, float64(ex.Plan.Buffers.SharedHit+ex.Plan.Buffers.SharedRead))
			}
		}
		return ms, nil
	}
	worst, worstRatio := -1, 0.0
	for i, v := range candidates {
		// One untimed run each way first: the cache warm for both plans.
		g, err := run(v, genericPlan, genericScreenRuns+1)
		if err != nil {
			f.Verification = model.NotRunBecause(err.Error())
			return
		}
		c, err := run(v, customPlan, genericScreenRuns+1)
		if err != nil {
			f.Verification = model.NotRunBecause(err.Error())
			return
		}
		if r := screenRatio(median(g[1:]), median(c[1:]), blocks[[2]string{v, genericPlan}], blocks[[2]string{v, customPlan}]); worst < 0 || r > worstRatio {
			worst, worstRatio = i, r
		}
	}
	v := candidates[worst]
	var generic, custom []float64
	for i := range e.Runs {
		for j := range 2 {
			mode := genericPlan
			if (i+j)%2 == 1 {
				mode = customPlan
			}
			ms, err := run(v, mode, 1)
			if err != nil {
				f.Verification = model.NotRunBecause(err.Error())
				return
			}
			if mode == genericPlan {
				generic = append(generic, ms[0])
			} else {
				custom = append(custom, ms[0])
			}
		}
	}
	before, after := median(generic), median(custom)
	if timedOut[[2]string{v, customPlan}] > 0 {
		f.Verification = model.NotRunBecause(fmt.Sprintf("a custom plan ran past pgmedic's statement_timeout (%s) too, so neither plan's time was measured: raise --statement-timeout", e.StatementTimeoutText))
		return
	}
	valueDesc := e.valueText(exp.Param, v, typ, fmt.Sprintf("pg_stats %s.%s, the value among %d tried on which the generic plan loses most", exp.Table.Name, exp.Column, len(candidates)), true)
	params := []string{valueDesc}
	for _, d := range b.desc {
		if !strings.HasPrefix(d, fmt.Sprintf("$%d ", exp.Param)) {
			params = append(params, d)
		}
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "measured with the generic plan (median)", Value: model.Round(before, 3), Unit: "ms"},
		model.Evidence{Label: "measured with a custom plan for the same values (median)", Value: model.Round(after, 3), Unit: "ms"})
	f.Verification = model.Verification{
		Method:     fmt.Sprintf("EXECUTE of the statement prepared once, x%d with SET LOCAL plan_cache_mode = force_generic_plan and x%d with force_custom_plan, alternating, in rolled-back read-only transactions, for the value of $%d (of %d from pg_stats) on which the generic plan lost most in a first pass; medians of planning + execution time", e.Runs, e.Runs, exp.Param, len(candidates)),
		Parameters: params,
		Before:     &model.Measure{Value: model.Round(before, 3), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 3), Unit: "ms"}}
	if timedOut[[2]string{v, genericPlan}] > 0 {
		f.Verification.Method += fmt.Sprintf("; the generic plan ran past pgmedic's statement_timeout (%s) for this value and was not run again: its time is at least that, a lower bound", e.StatementTimeoutText)
	}
	if !judge(f, before, after) {
		f.Title = fmt.Sprintf("generic plan re-measured: no slower than custom plans for the values tried (%.2f ms generic, %.2f ms custom)", before, after)
		f.Fix = model.Fix{Summary: "keep the prepared statement as it is"}
		return
	}
	if exp.BuffersPerCall > 0 && customBlocks > 0 {
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: "blocks the application's calls read on average (pg_stat_statements)", Value: model.Round(exp.BuffersPerCall, 0)},
			model.Evidence{Label: "blocks a custom plan reads for the costliest value tried", Value: customBlocks})
	}
	if why := customPlansExplain(exp, customBlocks, before, after); why != "" {
		f.Verification.Status = model.Refuted
		f.Severity = model.Info
		f.Title = fmt.Sprintf("the generic plan is slower for a value (%.2f ms generic, %.2f ms custom), but %s", before, after, why)
		return
	}
	atLeast := ""
	if timedOut[[2]string{v, genericPlan}] > 0 {
		atLeast = "at least "
	}
	f.Title = fmt.Sprintf("the generic plan is %s%.0fx slower than a custom plan for a common value of %s.%s (%s%.2f ms against %.2f ms)", atLeast, before/max(after, 0.001), exp.Table.Name, exp.Column, atLeast, before, after)
}

// columnValues are the values of a column a skewed parameter is tried
// with: the three most common, then two from the histogram.
func (e *Engine) columnValues(ctx context.Context, t model.RelRef, column string) ([]string, error) {
	mcv, hist, err := e.columnStats(ctx, t, column)
	if err != nil {
		return nil, err
	}
	out := mcv[:min(3, len(mcv))]
	if len(hist) > 2 {
		out = append(out, hist[len(hist)/4], hist[3*len(hist)/4])
	}
	return out, nil
}

// customPlansExplain says why the application's calls are explained by
// custom plans, or "". The blocks its calls read on average say it best,
// whatever the machine's speed then and now: no more than a custom plan
// reads for the costliest value tried means no call ran a plan that reads
// more. Without that count, its slowest call is compared with the
// geometric middle of the two plans' times (so that load moving between
// the calls and the experiment moves neither side first).
func customPlansExplain(exp *model.Experiment, customBlocks, generic, custom float64) string {
	if exp.BuffersPerCall > 0 && customBlocks > 0 {
		if exp.BuffersPerCall <= 1.1*customBlocks {
			return fmt.Sprintf("the application's calls read %.0f blocks on average, no more than a custom plan reads for the costliest value tried (%.0f): they run custom plans", exp.BuffersPerCall, customBlocks)
		}
		return ""
	}
	if mid := math.Sqrt(generic * custom); exp.MaxMS > 0 && exp.MaxMS < mid {
		return fmt.Sprintf("the application's slowest call (%.2f ms) stayed nearer the custom plan's time: it does not run that value on the generic plan", exp.MaxMS)
	}
	return ""
}
