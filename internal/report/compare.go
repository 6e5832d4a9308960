package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// CompareReport is the document of `pgmedic explain --compare A B`.
type CompareReport struct {
	PGMedic  string             `json:"pgmedic"`
	A        string             `json:"a"`
	B        string             `json:"b"`
	Summary  string             `json:"summary"`
	Decisive string             `json:"decisive"`
	Measured bool               `json:"measured"`
	TotalA   float64            `json:"total_a"`
	TotalB   float64            `json:"total_b"`
	Unit     string             `json:"unit"`
	Pairs    []ComparedRow      `json:"nodes"`
	Settings []plan.SettingDiff `json:"settings_differ"`
	JITms    [2]float64         `json:"jit_ms"`
	Planning [2]float64         `json:"planning_ms"`
}

// ComparedRow is one aligned node (or a node only one plan has).
type ComparedRow struct {
	A       string   `json:"a,omitempty"`
	B       string   `json:"b,omitempty"`
	IDA     int      `json:"id_a,omitempty"`
	IDB     int      `json:"id_b,omitempty"`
	Delta   float64  `json:"delta"`
	Changes []string `json:"changes"`
}

// NewCompare builds the comparison report.
func NewCompare(version, nameA, nameB string, a, b *plan.Explain, d *plan.Diff) *CompareReport {
	r := &CompareReport{PGMedic: version, A: nameA, B: nameB, Summary: d.Summary, Decisive: d.Decisive, Measured: d.Measured,
		TotalA: model.Round(d.TotalA, 3), TotalB: model.Round(d.TotalB, 3), Unit: "ms", Settings: d.Settings, JITms: d.JITms, Planning: d.PlanningMS,
		Pairs: []ComparedRow{}}
	if !d.Measured {
		r.Unit = "cost"
	}
	if r.Settings == nil {
		r.Settings = []plan.SettingDiff{}
	}
	for _, p := range d.Pairs {
		ch := p.Changes
		if ch == nil {
			ch = []string{}
		}
		r.Pairs = append(r.Pairs, ComparedRow{A: p.A.Label(), B: p.B.Label(), IDA: p.A.Figures.ID, IDB: p.B.Figures.ID, Delta: model.Round(p.Delta, 3), Changes: ch})
	}
	for _, n := range d.OnlyA {
		r.Pairs = append(r.Pairs, ComparedRow{A: n.Label(), IDA: n.Figures.ID, Changes: []string{"only in A"}})
	}
	for _, n := range d.OnlyB {
		r.Pairs = append(r.Pairs, ComparedRow{B: n.Label(), IDB: n.Figures.ID, Changes: []string{"only in B"}})
	}
	return r
}

// JSON writes the comparison as JSON.
func (r *CompareReport) JSON(w io.Writer) error { return writeJSON(w, r) }

// Text writes the one-line verdict first, then the aligned nodes.
func (r *CompareReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "pgmedic %s — A: %s  B: %s\n\n%s\n\n", r.PGMedic, safe(r.A), safe(r.B), safe(r.Summary))
	for _, s := range r.Settings {
		fmt.Fprintf(b, "setting   %s: %s -> %s\n", safe(s.Name), safe(s.A), safe(s.B))
	}
	if r.JITms[0] != r.JITms[1] {
		fmt.Fprintf(b, "JIT       %s -> %s\n", printable.PlanMS(r.JITms[0]), printable.PlanMS(r.JITms[1]))
	}
	if r.Planning[0] != r.Planning[1] && r.Planning[0]+r.Planning[1] > 0 {
		fmt.Fprintf(b, "planning  %s -> %s\n", printable.PlanMS(r.Planning[0]), printable.PlanMS(r.Planning[1]))
	}
	fmt.Fprintf(b, "\n%-6s %-6s %10s  %s\n", "A #", "B #", "self Δ "+r.Unit, "node")
	for _, p := range r.Pairs {
		ida, idb := "-", "-"
		if p.IDA > 0 {
			ida = fmt.Sprint(p.IDA)
		}
		if p.IDB > 0 {
			idb = fmt.Sprint(p.IDB)
		}
		label := p.A
		if label == "" {
			label = p.B
		}
		fmt.Fprintf(b, "%-6s %-6s %+10.2f  %s\n", ida, idb, p.Delta, safe(label))
		for _, c := range p.Changes {
			fmt.Fprintf(b, "%26s- %s\n", "", safe(c))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
