package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Bounds of the planner-setting experiment: the top statements it plans
// both ways, and the shortest statement it runs. Those whose plan
// changes run Runs times each way (at least 5, as every experiment: a
// median of 3 let one busy moment on the machine turn a 1.8x gain into
// 1.2x).
const (
	settingTopStatements = 5
	settingMinMeanMS     = 1.0
)

// plannerSetting tries a planner setting (exp.FixSettings) on the top
// statements by time: each is planned (EXPLAIN, nothing run) with the
// settings as they are and with the proposed ones, SET LOCAL; those whose
// plan changes are run both ways, Runs times each after a warm-up,
// alternating, read-only and rolled back, with JIT off on both sides.
// Statements under a millisecond a call are left out. The setting is
// proposed only when a statement gets faster and none gets slower (by
// the verdict's 20%): the sums, weighted by each statement's calls, are
// the two numbers.
func (e *Engine) plannerSetting(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	app := maps.Clone(exp.AppSettings)
	if app == nil {
		app = map[string]string{}
	}
	fixed := maps.Clone(app)
	maps.Copy(fixed, exp.FixSettings)
	m, err := e.settingTally(ctx, snap, app, fixed)
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	what := settingsText(exp.FixSettings)
	method := fmt.Sprintf("the top %d statements planned with the settings as they are and with SET LOCAL %s (EXPLAIN, nothing run); the %d whose plan changed run x%d each way, alternating, in rolled-back read-only transactions; medians, summed weighted by calls", m.planned, what, m.changed, e.Runs)
	if m.refused != "" {
		method += "; passed over, the server refusing the values bound: " + m.refused
	}
	if m.planned == 0 {
		why := "none of the top statements can be re-run (pgmedic only runs SELECTs it can bind values to)"
		if m.refused != "" {
			why += "; the server refused " + m.refused
		}
		f.Verification = model.NotRunBecause(why)
		return
	}
	if m.changed == 0 {
		f.Verification = model.Verification{Status: model.NotRun, Method: method,
			Reason: fmt.Sprintf("no plan of the top %d statements changes with %s: nothing to measure, and nothing it would change today", m.planned, what)}
		return
	}
	f.Evidence = append(f.Evidence, ev("top statements planned both ways", float64(m.planned), ""), ev("statements whose plan changes", float64(m.changed), ""),
		ev("faster with it"+listed(m.faster), float64(len(m.faster)), ""), ev("slower with it"+listed(m.slower), float64(len(m.slower)), ""))
	f.Verification = model.Verification{Method: method, Before: &model.Measure{Value: model.Round(m.before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(m.after, 2), Unit: "ms"}}
	if len(m.slower) > 0 {
		f.Verification.Status, f.Severity = model.Refuted, model.Info
		f.Title = fmt.Sprintf("%s would make %d of the top statements slower: keep the setting as it is", what, len(m.slower))
		return
	}
	if len(m.faster) > 0 && judge(f, m.before, m.after) {
		// As severe as the time it was measured to take back.
		f.Severity = savedSeverity(m.saved)
		f.Evidence = append(f.Evidence, model.Evidence{Label: "share of the database's statement time it takes back", Value: model.Round(100*m.saved, 2), Unit: "%"})
		return
	}
	f.Verification.Status, f.Severity = model.Refuted, model.Info
}

// settingTally is what the top statements measured with the settings as
// they are and with the fix.
type settingTally struct {
	planned, changed     int
	before, after, saved float64 // summed weighted by calls; saved a share of the database's time
	faster, slower       []string
	refused              string // the first statement the server refused with the values bound
}

// settingTally plans the top statements both ways and times those whose
// plan moves. Its error is one that ends the experiment: the busiest
// statement past the timeout, or the experiment's own settings refused.
func (e *Engine) settingTally(ctx context.Context, snap *model.Snapshot, app, fixed map[string]string) (settingTally, error) {
	var m settingTally
	top := append([]model.Statement(nil), snap.Statements...)
	sort.SliceStable(top, func(i, j int) bool { return top[i].TotalExecMS > top[j].TotalExecMS })
	for _, st := range top {
		if m.planned == settingTopStatements || ctx.Err() != nil {
			break
		}
		if st.MeanExecMS() < settingMinMeanMS {
			continue // a plan change in microseconds is not what the setting is for
		}
		x := &model.Experiment{Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Calls: st.Calls, Rows: st.Rows}
		if parsed, err := statement(x); err != nil || parsed.Kind() != "SelectStmt" {
			continue
		}
		b, why := e.runnable(ctx, x)
		if why != "" {
			continue
		}
		m0, m1, moved, err := e.settingSides(ctx, b.target, app, fixed)
		b.cleanup()
		switch {
		case err != nil && !errors.Is(err, errRerun):
			return m, err
		case err != nil:
			// The values bound to it do not make a statement the server
			// takes (a placeholder passed to a function that takes only
			// some texts): the next one is tried instead.
			if m.refused == "" {
				m.refused = fmt.Sprintf("%s: %s", printable.Shorten(st.Query, 60), err)
			}
			continue
		}
		m.planned++
		if !moved {
			continue
		}
		m.changed++
		calls := float64(max(st.Calls, 1))
		m.before += calls * m0
		m.after += calls * m1
		name := fmt.Sprintf("%s (%.2f -> %.2f ms)", printable.Shorten(st.Query, 60), m0, m1)
		switch {
		case m1 > m0/helpedRatio:
			m.slower = append(m.slower, name)
		case m1 <= m0*helpedRatio:
			m.faster = append(m.faster, name)
		}
		m.saved += statementSaving(dbShare(snap, st.QueryID), m0, m1)
	}
	return m, nil
}

// settingSides plans target both ways and, when the plans differ, runs
// it both ways; the medians and whether the plan moved.
func (e *Engine) settingSides(ctx context.Context, target string, app, fixed map[string]string) (m0, m1 float64, moved bool, err error) {
	// JIT off on both sides: a cheaper plan can fall under jit_above_cost
	// and gain what jit-overhead is about, not what the setting is.
	p0, err := e.onceWith(ctx, "", target, "off", app, customPlan)
	if err != nil {
		return 0, 0, false, err
	}
	p1, err := e.onceWith(ctx, "", target, "off", fixed, customPlan)
	if err != nil {
		return 0, 0, false, err
	}
	if plan.Shape(p0) == plan.Shape(p1) {
		return 0, 0, false, nil
	}
	var a, b []float64
	for i := range e.Runs + 1 {
		for j := range 2 {
			set, side := app, &a
			if (i+j)%2 == 1 {
				set, side = fixed, &b
			}
			ex, err := e.once(ctx, target, "off", set, customPlan)
			if err != nil {
				return 0, 0, false, err
			}
			if i > 0 {
				*side = append(*side, ex.PlanningMS+ex.ExecutionMS)
			}
		}
	}
	return median(a), median(b), true, nil
}

// settingsText is "random_page_cost = 1.1" for a map of settings.
func settingsText(m map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+" = "+m[k])
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// listed is ": a; b" for a list, "" for none.
func listed(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ": " + strings.Join(xs, "; ")
}
