package rules

import (
	"fmt"
	"strconv"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// GenericPlanID is the stable id of the rule.
const GenericPlanID = "generic-plan"

// Thresholds (see docs/rules/generic-plan.md).
const (
	genericMinCalls = 10
	// The column a parameter is compared with is skewed when its most
	// common value holds at least this share of the rows ...
	genericMinTopFreq = 0.05
	// ... and at least this many times the rows of an average value: a
	// generic plan is costed for the average value.
	genericMinSkew = 10.0
	// The statement's slowest call took this many times its fastest, and
	// at least genericMinMaxMS: one plan does not suit every value it got.
	genericMinSpread = 10.0
	genericMinMaxMS  = 5.0
	genericWarnShare = 0.05
)

// genericPlan finds statements whose parameter is compared with a skewed
// column and whose calls range from fast to slow: the shape in which a
// prepared statement's generic plan, chosen after five custom plans
// because it looked no costlier than their average, is costed for an
// average value and runs far slower for the values most rows carry (or for
// the rare ones). Whether it does is the experiment's to say: the
// statement planned both ways for the column's most common values and a
// few others.
func genericPlan(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	skipped := hiddenStatements(s, GenericPlanID, "whether their generic plans are slower is unknown")
	dbTotal := totalExecMS(s)
	for _, st := range s.Statements {
		if f, ok := genericPlanStatement(s, st, dbTotal); ok {
			out = append(out, f)
		}
	}
	return out, skipped
}

func genericPlanStatement(s *model.Snapshot, st model.Statement, dbTotal float64) (model.Finding, bool) {
	if st.Parsed == nil || st.Calls < genericMinCalls || st.GenericPlans == 0 {
		return model.Finding{}, false // counted, and no call ran a generic plan
	}
	if st.MaxExecMS < genericMinMaxMS || st.MaxExecMS < genericMinSpread*st.MinExecMS {
		return model.Finding{}, false
	}
	if mode, _ := effective(s, st.Role, "plan_cache_mode"); mode == "force_custom_plan" {
		return model.Finding{}, false
	}
	param, col, t := skewedParam(s, st.Parsed)
	if col == nil {
		return model.Finding{}, false
	}
	share := timeShare(st, dbTotal)
	sev := model.Info
	if share >= genericWarnShare {
		sev = model.Warning
	}
	skew := col.Skew(float64(t.Live))
	evidence := []model.Evidence{
		{Label: "calls", Value: float64(st.Calls)},
		{Label: "fastest call", Value: model.Round(st.MinExecMS, 3), Unit: "ms"},
		{Label: "mean call", Value: model.Round(st.MeanExecMS(), 3), Unit: "ms"},
		{Label: "slowest call", Value: model.Round(st.MaxExecMS, 3), Unit: "ms"},
		{Label: "standard deviation", Value: model.Round(st.StddevExecMS, 3), Unit: "ms"},
		{Label: fmt.Sprintf("share of %s.%s's rows its most common value holds", t.Name, col.Name), Value: model.Round(100*col.MostCommonFreqMax, 1), Unit: "%"},
		{Label: "times the rows of an average value", Value: model.Round(skew, 0)},
	}
	if st.GenericPlans > 0 {
		evidence = append(evidence, model.Evidence{Label: "calls that ran the generic plan (pg_stat_statements)", Value: float64(st.GenericPlans)},
			model.Evidence{Label: "calls that ran a custom plan", Value: float64(st.CustomPlans)})
	}
	role := st.Role
	if role == "" {
		role = "<role " + strconv.FormatUint(uint64(st.UserID), 10) + ">"
	}
	return model.Finding{
		Rule:     GenericPlanID,
		Severity: sev,
		Title:    fmt.Sprintf("$%d is compared with %s.%s, where one value holds %.0f%% of the rows: a generic plan costed for an average value may be far slower for it", param, t.Name, col.Name, 100*col.MostCommonFreqMax),
		Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 120), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: evidence,
		Impact: model.Impact{
			Summary: fmt.Sprintf("%s of this database's statement time; its calls take from %.2f to %.1f ms", pct(share), st.MinExecMS, st.MaxExecMS),
			Share:   model.Round(share, 4),
		},
		Fix: model.Fix{
			Summary: fmt.Sprintf("plan this statement for each call's values: plan_cache_mode = force_custom_plan for role %s (each call pays its planning time), or have the driver not prepare it (pgx QueryExecModeExec, psycopg prepare_threshold=None, JDBC prepareThreshold=0); or an index or statistics with which one plan suits every value", role),
			SQL:     fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET plan_cache_mode = force_custom_plan;", sqlparse.QuoteIdent(st.Role), sqlparse.QuoteIdent(s.Database)),
		},
		Verification: model.NotRunBecause("not verified yet"),
		Docs:         docsPath(GenericPlanID),
		Experiment: &model.Experiment{Kind: model.ExpGenericPlan, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role,
			Calls: st.Calls, Rows: st.Rows, MeanMS: st.MeanExecMS(), MaxMS: st.MaxExecMS,
			BuffersPerCall: st.BuffersPerCall(),
			Table:          model.RelRef{Schema: t.Schema, Name: t.Name}, Column: col.Name, ColumnType: col.Type, Param: param,
			AppSettings: roleSettingsFor(s, st.Role, "jit", "work_mem", "search_path")},
	}, true
}

// skewedParam is the first parameter compared with a column whose most
// common value holds far more rows than an average one.
func skewedParam(s *model.Snapshot, st *sqlparse.Statement) (int, *model.Column, *model.Table) {
	cols := st.ParamColumns()
	for n := 1; n <= st.ParamCount(); n++ {
		for _, c := range cols[n] {
			t := s.Table(model.RelRef{Schema: c.Schema, Name: c.Table})
			if t == nil {
				continue
			}
			col := s.Column(t, c.Column)
			if col == nil || col.MostCommonFreqMax < genericMinTopFreq || col.Skew(float64(t.Live)) < genericMinSkew {
				continue
			}
			return n, col, t
		}
	}
	return 0, nil, nil
}
