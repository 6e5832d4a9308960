package verify

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestRankBySaving: an index confirmed on a compact copy (0.45 -> 0.12 ms)
// of a bloated queue whose calls take 10.9 ms saves 0.33 ms of 10.9: the
// finding says so, names the bloat, ranks itself by the saving, and drops
// to info with the bloat as the fix that comes first.
func TestRankBySaving(t *testing.T) {
	snap := &model.Snapshot{Tables: []model.Table{{Schema: "public", Name: "q", Live: 1000, Dead: 90000}}}
	for _, c := range []struct {
		name          string
		app           float64
		wantSeverity  model.Severity
		wantShare     float64
		summaryHas    []string
		summaryHasNot string
	}{
		{"bloated original", 10.9, model.Info, 0.3 * 0.33 / 10.9, []string{"fix the bloat first", "saves 0.33 ms of the 10.90 ms", "90000 dead rows", "62% of the statement's buffers"}, ""},
		{"copy like the original", 0.5, model.Critical, 0.3, nil, "saves"},
		{"app time unknown", 0, model.Critical, 0.3, nil, "saves"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &model.Finding{Severity: model.Critical, Impact: model.Impact{Share: 0.3, Summary: "30% of the time"},
				Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: "q"}, MeanMS: c.app, ReadShare: 0.62}}
			rankBySaving(snap, f, 0.45, 0.12)
			if f.Severity != c.wantSeverity || f.Impact.Share != model.Round(c.wantShare, 4) {
				t.Errorf("severity %v share %v, want %v %v", f.Severity, f.Impact.Share, c.wantSeverity, model.Round(c.wantShare, 4))
			}
			for _, s := range c.summaryHas {
				if !strings.Contains(f.Impact.Summary, s) {
					t.Errorf("summary %q lacks %q", f.Impact.Summary, s)
				}
			}
			if c.summaryHasNot != "" && strings.Contains(f.Impact.Summary, c.summaryHasNot) {
				t.Errorf("summary %q", f.Impact.Summary)
			}
		})
	}
}

// TestBloatedUnmeasured: an index proposed for a table of mostly dead rows
// and not measured on its live rows (no copy allowed) stays at info and
// says the bloat comes first; on a compact table the estimate stands.
func TestBloatedUnmeasured(t *testing.T) {
	snap := &model.Snapshot{Tables: []model.Table{
		{Schema: "public", Name: "events", Live: 20000, Dead: 480000},
		{Schema: "public", Name: "orders", Live: 500000, Dead: 1000},
	}}
	for table, want := range map[string]model.Severity{"events": model.Info, "orders": model.Warning} {
		f := &model.Finding{Severity: model.Warning, Impact: model.Impact{Summary: "40% of the time"},
			Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: table}}}
		bloatedUnmeasured(snap, f)
		if f.Severity != want {
			t.Errorf("%s: severity %v, want %v", table, f.Severity, want)
		}
		if bloated := strings.Contains(f.Impact.Summary, "Fix the bloat first"); bloated != (want == model.Info) {
			t.Errorf("%s: summary %q", table, f.Impact.Summary)
		}
	}
}
