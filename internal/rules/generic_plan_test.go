package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

func TestGenericPlan(t *testing.T) {
	const q = "SELECT a.plan, count(*) FROM events e JOIN accounts a ON a.id = e.account_id WHERE e.tenant_id = $1 GROUP BY a.plan"
	skewed := model.Column{Schema: "public", Table: "events", Name: "tenant_id", Type: "integer", HasStats: true, NDistinct: 1600, MostCommonFreqMax: 0.9, MostCommonFreqSum: 0.9}
	even := skewed
	even.MostCommonFreqMax, even.NDistinct = 0.001, 1000
	few := skewed
	few.MostCommonFreqMax, few.NDistinct = 0.5, 2 // two values, half each: no average to miss
	for _, c := range []struct {
		name       string
		col        model.Column
		min, max   float64
		calls      int64
		generic    int64
		roleMode   string
		query      string
		want       model.Severity
		wantColumn string
	}{
		{name: "skewed column, calls from fast to slow", col: skewed, min: 0.05, max: 99, calls: 20, generic: -1, query: q, want: model.Warning, wantColumn: "tenant_id"},
		{name: "counted generic plans strengthen it", col: skewed, min: 0.05, max: 99, calls: 20, generic: 16, query: q, want: model.Warning, wantColumn: "tenant_id"},
		{name: "counted, and no call ran a generic plan", col: skewed, min: 0.05, max: 99, calls: 20, generic: 0, query: q, want: -1},
		{name: "a uniform column", col: even, min: 0.05, max: 99, calls: 20, generic: -1, query: q, want: -1},
		{name: "two values of half the rows each", col: few, min: 0.05, max: 99, calls: 20, generic: -1, query: q, want: -1},
		{name: "calls that all take about as long", col: skewed, min: 20, max: 99, calls: 20, generic: -1, query: q, want: -1},
		{name: "all fast", col: skewed, min: 0.01, max: 2, calls: 20, generic: -1, query: q, want: -1},
		{name: "too few calls", col: skewed, min: 0.05, max: 99, calls: 4, generic: -1, query: q, want: -1},
		{name: "the role already plans every call", col: skewed, min: 0.05, max: 99, calls: 20, generic: -1, roleMode: "force_custom_plan", query: q, want: -1},
		{name: "no parameter on the column", col: skewed, min: 0.05, max: 99, calls: 20, generic: -1, query: "SELECT count(*) FROM events e WHERE e.id = $1", want: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := sqlparse.Parse(c.query)
			if err != nil {
				t.Fatal(err)
			}
			st := model.Statement{QueryID: 7, Query: c.query, Parsed: parsed, Role: "app", Calls: c.calls, TotalExecMS: 700,
				MinExecMS: c.min, MaxExecMS: c.max, GenericPlans: c.generic, CustomPlans: 5}
			s := &model.Snapshot{Database: "shop", Statements: []model.Statement{st},
				Tables:   []model.Table{{Schema: "public", Name: "events", Live: 80000}, {Schema: "public", Name: "accounts", Live: 20000}},
				Columns:  []model.Column{c.col, {Schema: "public", Table: "events", Name: "id", Type: "bigint", HasStats: true, NDistinct: -1}},
				Settings: map[string]model.Setting{"plan_cache_mode": {Value: "auto"}}}
			if c.roleMode != "" {
				s.RoleSettings = []model.RoleSetting{{Role: "app", Settings: map[string]string{"plan_cache_mode": c.roleMode}}}
			}
			fs, _ := genericPlan(s)
			if c.want < 0 {
				if len(fs) > 0 {
					t.Fatalf("fired: %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("%d findings, want 1", len(fs))
			}
			f := fs[0]
			if f.Severity != c.want || f.Experiment == nil || f.Experiment.Kind != model.ExpGenericPlan || f.Experiment.Column != c.wantColumn || f.Experiment.Param != 1 || f.Experiment.MaxMS != c.max {
				t.Errorf("got %v %+v", f.Severity, f.Experiment)
			}
			if !strings.Contains(f.Fix.SQL, "plan_cache_mode = force_custom_plan") {
				t.Errorf("fix: %s", f.Fix.SQL)
			}
			counted := false
			for _, e := range f.Evidence {
				counted = counted || strings.Contains(e.Label, "ran the generic plan")
			}
			if counted != (c.generic > 0) {
				t.Errorf("generic plan counts shown = %v with %d counted", counted, c.generic)
			}
		})
	}
	t.Run("hidden statements are said", func(t *testing.T) {
		_, skips := genericPlan(&model.Snapshot{StatementsHidden: 2, User: "watcher"})
		if len(skips) != 1 || !strings.Contains(skips[0].Reason, "could not see 2 statements") {
			t.Errorf("%+v", skips)
		}
	})
}
