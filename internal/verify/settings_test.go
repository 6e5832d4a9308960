package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestPlannerSettingSkipsARefusedStatement: the busiest statement passes
// its parameter to a function that takes only some texts (a size with its
// unit), and the value pgmedic binds to it is none of them, so the server
// refuses it (the planner folds the immutable call). The experiment goes on to the next
// statement instead of giving up on the finding.
func TestPlannerSettingSkipsARefusedStatement(t *testing.T) {
	ctx := context.Background()
	e := onATwin(t,
		"CREATE TABLE readings (id int PRIMARY KEY, sensor int NOT NULL, value float8 NOT NULL)",
		"INSERT INTO readings SELECT g, g % 50, g / 7.0 FROM generate_series(1, 20000) g",
		"ANALYZE readings")
	snap := &model.Snapshot{Database: "postgres", Statements: []model.Statement{
		{Query: "SELECT count(*) FROM readings WHERE id < pg_size_bytes($1)", Calls: 100, TotalExecMS: 900},
		{Query: "SELECT sensor, avg(value) FROM readings WHERE id > $1 GROUP BY sensor", Calls: 100, TotalExecMS: 500},
	}}
	f := model.Finding{Rule: "planner-settings", Severity: model.Info, Title: "random_page_cost",
		Experiment: &model.Experiment{Kind: model.ExpPlannerSetting, FixSettings: map[string]string{"random_page_cost": "1.1"}}}
	out, _ := e.Run(ctx, snap, []model.Finding{f})
	v := out[0].Verification
	if strings.Contains(v.Reason, "re-running the statement failed") || !strings.Contains(v.Method, "top 1 statements") || !strings.Contains(v.Method, "passed over") {
		t.Fatalf("the refused statement ended the experiment: %s: %s (%s)", v.Status, v.Reason, v.Method)
	}
	// Only the refused one: not run, saying which and why.
	snap.Statements = snap.Statements[:1]
	out, _ = e.Run(ctx, snap, []model.Finding{f})
	if v := out[0].Verification; v.Status != model.NotRun || !strings.Contains(v.Reason, "pg_size_bytes") || !strings.Contains(v.Reason, "invalid size") {
		t.Errorf("only a refused statement: %s: %s", v.Status, v.Reason)
	}
}
