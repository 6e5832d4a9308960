package verify

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestJudgeRuns: medians that confirm decide; medians squeezed by a busy
// machine fall back on each side's fastest run, which confirms only when
// it clears the same 20%, keeps the finding's severity and says so in
// the method; a fix faster in neither is refuted at info.
func TestJudgeRuns(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after []float64
		want          string
		sev           model.Severity
		in            string
	}{
		{"medians confirm", []float64{37, 38, 36, 40, 37}, []float64{12, 13, 12, 12, 14}, model.Confirmed, model.Warning, ""},
		{"squeezed medians, fastest runs confirm", []float64{161, 150, 38, 170, 160}, []float64{148, 12, 150, 149, 140}, model.Confirmed, model.Warning, "fastest run of each side"},
		{"faster in neither", []float64{100, 101, 99, 100, 98}, []float64{97, 99, 96, 100, 98}, model.Refuted, model.Info, ""},
	} {
		f := &model.Finding{Severity: model.Warning, Verification: model.Verification{Method: "EXPLAIN ANALYZE"}}
		judgeRuns(f, c.before, c.after)
		if f.Verification.Status != c.want || f.Severity != c.sev || !strings.Contains(f.Verification.Method, c.in) {
			t.Errorf("%s: %s, %s, %q", c.name, f.Verification.Status, f.Severity, f.Verification.Method)
		}
	}
}
