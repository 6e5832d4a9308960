package baseline_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
)

// TestLoad reads a baseline from what check really writes
// (report.Report's JSON), whole or nested in a lab run's result.
func TestLoad(t *testing.T) {
	bloat := model.Finding{Rule: "table-bloat", Severity: model.Warning, Title: "bloat", Object: model.Object{Kind: "table", Name: "public.jobs"}}
	bloat.ID = bloat.Identity()
	rep := report.New("test", model.Target{Host: "db"}, time.Now(), []model.Finding{bloat}, nil, 3, model.Info)
	rep.Statements = []model.StatementRow{{QueryID: "a-id", Fingerprint: "a", Query: "SELECT a", Calls: 10, MeanMS: 1}}
	check, _ := json.Marshal(rep)
	nested, _ := json.Marshal(map[string]any{"results": []any{map[string]any{"scenario": "x", "report": rep}}})
	for name, data := range map[string][]byte{"check": check, "lab run": nested} {
		old, err := baseline.Load(data, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(old.Findings) != 1 || len(old.Statements) != 1 || old.Findings[0].ID == "" {
			t.Errorf("%s: %+v", name, old)
		}
	}
	for _, c := range []struct{ data, want string }{
		{"", "not JSON"}, {"{", "cut short"}, {"rule,severity,title\nmissing-index,warning,x\n", "a CSV"}, {`{"a": 1}`, "holds no findings"}, {`{"findings": [{"severity": "urgent"}]}`, "cannot be read"},
	} {
		if _, err := baseline.Load([]byte(c.data), "x.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v", c.data, err)
		}
	}
}
