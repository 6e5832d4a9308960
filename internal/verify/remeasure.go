package verify

import (
	"context"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// disables maps a plan node to the planner setting that keeps the planner
// from choosing it: the way back to a baseline's plan when the current one
// uses a node the baseline's did not.
var disables = map[string]string{
	"Seq Scan": "enable_seqscan", "Index Scan": "enable_indexscan", "Index Only Scan": "enable_indexonlyscan",
	"Bitmap Heap Scan": "enable_bitmapscan", "Hash Join": "enable_hashjoin", "Merge Join": "enable_mergejoin",
	"Nested Loop": "enable_nestloop", "Sort": "enable_sort", "Incremental Sort": "enable_incremental_sort",
	"Memoize": "enable_memoize", "Materialize": "enable_material", "Gather": "max_parallel_workers_per_gather",
}

// Remeasure runs a statement from pg_stat_statements again, read-only and
// rolled back as every experiment, e.Runs times with the values the
// application uses (or real values from pg_stats), and reports its median.
// The caller applies the load rule first (LoadRule).
// When baselineShape (plan.Shape of the baseline's plan) differs from
// the plan it runs now, the node types only the current plan has are
// disabled for one more series; if that gives the baseline's shape back,
// both plans are measured on the same data with the same values.
func (e *Engine) Remeasure(ctx context.Context, st model.Statement, baselineShape string, shape func(*plan.Explain) string) model.Remeasured {
	r := model.Remeasured{}
	if e.Runs < 5 {
		e.Runs = 5
	}
	exp := &model.Experiment{Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Calls: st.Calls, Rows: st.Rows}
	b, why := e.runnable(ctx, exp)
	if why != "" {
		r.Why = why
		return r
	}
	defer b.cleanup()
	r.Values = b.desc
	series := func(settings map[string]string) (float64, string, error) {
		var ms []float64
		var last *plan.Explain
		for i := 0; i < e.Runs; i++ {
			ex, err := e.once(ctx, b.target, e.jitSetting(), settings, "auto")
			if err != nil {
				return 0, "", err
			}
			ms = append(ms, ex.ExecutionMS)
			last = ex
		}
		sort.Float64s(ms)
		return ms[len(ms)/2], shape(last), nil
	}
	var err error
	if r.MedianMS, r.Plan, err = series(nil); err != nil {
		r.Why = err.Error()
		return r
	}
	r.Runs = e.Runs
	if baselineShape == "" || baselineShape == r.Plan {
		return r
	}
	off := map[string]string{}
	var names []string
	for node, setting := range disables {
		if strings.Contains(r.Plan, node+" ") && !strings.Contains(baselineShape, node+" ") {
			off[setting] = "off"
			if setting == "max_parallel_workers_per_gather" {
				off[setting] = "0"
			}
			names = append(names, setting+"="+off[setting])
		}
	}
	if len(off) == 0 {
		return r
	}
	sort.Strings(names)
	back, got, err := series(off)
	if err != nil || got != baselineShape {
		return r
	}
	r.BaselinePlanMS, r.BaselineSettings = back, strings.Join(names, ", ")
	return r
}

// jitSetting is the jit value a re-run uses: the server's, as the
// application's statements run.
func (e *Engine) jitSetting() string {
	if e.JIT != "" {
		return e.JIT
	}
	return "on"
}
