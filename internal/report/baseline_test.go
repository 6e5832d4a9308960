package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/model"
)

// TestBaselineInEveryFormat: the comparison heads the text report, the
// pull-request comment and the page, with what is new, what was resolved
// and the statement that moved; database text stays escaped.
func TestBaselineInEveryFormat(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	newF := model.Finding{Rule: "missing-index", Severity: model.Warning, Title: "scan of <script>public.orders</script>", Object: model.Object{Kind: "table", Name: "public.orders"}}
	newF.ID = newF.Identity()
	gone := model.Finding{Rule: "table-bloat", Severity: model.Critical, Title: "dead rows in public.jobs"}
	gone.ID = gone.Identity()
	r := New("test", model.Target{Host: "db", Database: "shop"}, at, []model.Finding{newF}, nil, 3, model.Warning)
	r.Baseline = &baseline.Diff{Baseline: "main.json", BaselineAt: at.Add(-time.Hour),
		Findings: []baseline.FindingChange{{Status: baseline.StatusNew, Finding: newF}, {Status: baseline.StatusResolved, Finding: gone}},
		Statements: []baseline.StatementChange{{Query: "SELECT * FROM orders WHERE customer_id = $1", Verdict: baseline.Slower, Regression: true, Measured: true,
			Reasons: []string{"mean per call 0.016 ms -> 11 ms (688.4x)"}, Remeasured: &model.Remeasured{Runs: 5, MedianMS: 20.4}}},
		Counts: baseline.Counts{New: 1, Resolved: 1, Slower: 1, Regressions: 1}}
	var text, md, page bytes.Buffer
	for out, format := range map[*bytes.Buffer]string{&text: "text", &md: "markdown", &page: "html"} {
		if err := Render(out, r, format); err != nil {
			t.Fatal(err)
		}
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String(), "html": page.String()} {
		for _, want := range []string{"main.json", "NEW", "RESOLVED", newF.ID, "dead rows in public.jobs", "FROM orders", "re-run x5 now: median 20.4 ms"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
	if strings.Index(text.String(), "== BASELINE ==") > strings.Index(text.String(), "[missing-index]") {
		t.Error("the comparison does not head the text report")
	}
	if !strings.Contains(text.String(), "REGRESSION ") || !strings.Contains(md.String(), "**regression**") {
		t.Error("the regression is not called one")
	}
	if strings.Contains(page.String(), "<script>public.orders") {
		t.Error("a title reached the page unescaped")
	}
}
