package report

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/replay"
)

// TestReplayHTML: the comparison's page draws both sides' histograms of
// each statement inline, with no script, and escapes the statement text.
func TestReplayHTML(t *testing.T) {
	sh := &replay.ShapeChange{Query: "SELECT '<script>x</script>'", Verdict: replay.Faster, Calls: 10,
		HistEdges: []float64{0.1, 1, 10}, AHist: []int{1, 9}, BHist: []int{9, 1}}
	rep := &ReplayReport{PGMedic: "test", Logs: []string{"x.log"}, Comparison: &replay.Comparison{Verdict: replay.Faster,
		A: &replay.SideResult{Name: "as is"}, B: &replay.SideResult{Name: "index"}, Shapes: []*replay.ShapeChange{sh}}}
	var b strings.Builder
	if err := Render(&b, rep, "html"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Count(page, "<rect") != 4 || strings.Contains(page, "<script") || !strings.Contains(page, "Verdict: faster") {
		t.Fatalf("page:\n%s", page)
	}
	var md strings.Builder
	Render(&md, rep, "markdown")
	if !strings.Contains(md.String(), "### Verdict: faster") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}
