package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// PlanReport is the document of `pgmedic explain`: the plan's tree with
// each node's figures, then the findings ranked by the time they could save.
type PlanReport struct {
	PGMedic  string          `json:"pgmedic"`
	Source   string          `json:"source"`
	Plan     plan.Flat       `json:"plan"`
	Findings []model.Finding `json:"findings"`
	Skipped  []model.Skip    `json:"skipped"`
	Summary  Summary         `json:"summary"`
}

// NewPlan builds the report of one plan; findings below min are dropped.
func NewPlan(version, source string, e *plan.Explain, findings []model.Finding, skipped []model.Skip, rulesRun int, min model.Severity) *PlanReport {
	r := &PlanReport{PGMedic: version, Source: source, Findings: []model.Finding{}, Skipped: skipped}
	if r.Skipped == nil {
		r.Skipped = []model.Skip{}
	}
	r.Plan = plan.Flatten(e)
	r.Summary = summarize(findings, rulesRun)
	for _, f := range findings {
		f.Clamp()
		if f.Severity >= min {
			r.Findings = append(r.Findings, f)
		}
	}
	return r
}

// Worst is the highest severity reported (-1 when none).
func (r *PlanReport) Worst() model.Severity { return worstOf(r.Findings) }

// JSON writes the report as JSON.
func (r *PlanReport) JSON(w io.Writer) error { return writePlanJSON(w, r) }

// Text writes the tree (hot path marked with *) and the findings.
func (r *PlanReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	p := r.Plan
	fmt.Fprintf(b, "pgmedic %s — plan from %s (%s", r.PGMedic, safe(r.Source), strings.ToUpper(p.InputFormat))
	var has []string
	for _, x := range []struct {
		on   bool
		name string
	}{{p.Analyze, "ANALYZE"}, {p.Buffers, "BUFFERS"}, {p.Analyze && !p.Timing, "TIMING OFF"}, {len(p.Settings) > 0, "SETTINGS"}} {
		if x.on {
			has = append(has, x.name)
		}
	}
	if len(has) > 0 {
		b.WriteString(", " + strings.Join(has, ", "))
	}
	b.WriteString(")\n")
	if p.Analyze {
		fmt.Fprintf(b, "execution %s, planning %s", printable.PlanMS(p.ExecutionMS), printable.PlanMS(p.PlanningMS))
		if p.JITMS > 0 {
			fmt.Fprintf(b, ", JIT %s", printable.PlanMS(p.JITMS))
		}
		b.WriteString("\n")
	}
	if len(p.Settings) > 0 {
		var kv []string
		for k, v := range p.Settings {
			kv = append(kv, safe(k+"="+v))
		}
		sort.Strings(kv)
		fmt.Fprintf(b, "settings: %s\n", strings.Join(kv, ", "))
	}
	b.WriteString("\n")
	if p.Timing {
		fmt.Fprintf(b, "   %4s %10s %6s  %s\n", "#", "self", "share", "node (* = hot path)")
	} else {
		fmt.Fprintf(b, "   %4s %10s  %s\n", "#", "cost", "node")
	}
	writeTree(b, p)
	if len(r.Findings) == 0 {
		b.WriteString("\nNo findings at the requested severity.\n")
	}
	for _, f := range r.Findings {
		writeFinding(b, f)
	}
	if len(r.Skipped) > 0 {
		b.WriteString("\n== SKIPPED ==\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(b, "  %s: %s\n", safe(s.Rule), safe(s.Reason))
			if s.Fix != "" {
				fmt.Fprintf(b, "  fix: %s\n", safe(s.Fix))
			}
		}
	}
	s := r.Summary
	fmt.Fprintf(b, "\nSummary: %d critical, %d warning, %d info; %d confirmed, %d refuted, %d not verified; ranked by time they could save\n",
		s.Critical, s.Warning, s.Info, s.Confirmed, s.Refuted, s.NotRun+s.Estimated)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTree writes the plan's nodes, one line each with its own time (or
// cost) and label, then a line of facts and one with its condition. A
// plan can have thousands of nodes, so the lines are put together by hand
// rather than through fmt.
func writeTree(b *strings.Builder, p plan.Flat) {
	maxDepth := 0
	for _, n := range p.Nodes {
		maxDepth = max(maxDepth, n.Depth)
	}
	spaces := strings.Repeat(" ", 3*maxDepth+3+4+1+10+1+6+2+3)
	// Three lines a node: the label, its facts and its condition, each
	// indented to its depth.
	grow := 0
	for _, n := range p.Nodes {
		grow += 3*(3*n.Depth+30) + len(n.Label) + len(n.Detail) + 120
	}
	b.Grow(grow)
	var num []byte
	for _, n := range p.Nodes {
		mark := " "
		if n.Hot {
			mark = "*"
		}
		indent := spaces[:3*n.Depth]
		arrow := ""
		if n.Depth > 0 {
			arrow = "-> "
		}
		b.WriteByte(' ')
		b.WriteString(mark)
		b.WriteByte(' ')
		num = strconv.AppendInt(num[:0], int64(n.ID), 10)
		padLeft(b, num, 4)
		b.WriteByte(' ')
		if p.Timing {
			padLeft(b, []byte(printable.PlanMS(n.ExclusiveMS)), 10)
			b.WriteByte(' ')
			share := n.Share * 100
			if math.IsNaN(share) || math.IsInf(share, 0) {
				padLeft(b, []byte(fmt.Sprintf("%.1f", share)), 5)
			} else {
				num = strconv.AppendFloat(num[:0], share, 'f', 1, 64)
				padLeft(b, num, 5)
			}
			b.WriteString("%  ")
		} else {
			padLeft(b, []byte(costText(n.Cost)), 10)
			b.WriteString("  ")
		}
		b.WriteString(indent)
		b.WriteString(arrow)
		b.WriteString(safe(n.Label))
		b.WriteByte('\n')
		width := 3 + 4 + 1 + 10 + 1 + 6 + 2
		if !p.Timing {
			width = 3 + 4 + 1 + 10 + 2
		}
		pad := spaces[:width+len(indent)+len(arrow)]
		if facts := nodeFacts(n, p.Analyze); facts != "" {
			b.WriteString(pad)
			b.WriteString(safe(facts))
			b.WriteByte('\n')
		}
		if n.Detail != "" {
			d := safe(n.Detail)
			if len(d) > 140 {
				d = printable.Trim(d, 137, "") + "..."
			}
			b.WriteString(pad)
			b.WriteString(d)
			b.WriteByte('\n')
		}
	}
}

// padLeft writes s right-aligned in a field of width bytes (as %*s does).
func padLeft(b *strings.Builder, s []byte, width int) {
	for i := len(s); i < width; i++ {
		b.WriteByte(' ')
	}
	b.Write(s)
}

// nodeFacts is the one-line description of a node in the text report.
func nodeFacts(n plan.FlatNode, analyze bool) string {
	var b strings.Builder
	part := func(s ...string) {
		if b.Len() > 0 {
			b.WriteString(" · ")
		}
		for _, x := range s {
			b.WriteString(x)
		}
	}
	if n.Relation != "" {
		part(n.Relation)
	}
	switch {
	case n.Never:
		part("never executed")
	case analyze:
		part("rows ", printable.Count(n.ActualRows), " of ", printable.Count(n.PlanRows), " planned")
		if n.Loops > 1 {
			b.WriteString(" x " + printable.Count(n.Loops) + " loops")
		}
		if n.Misestimate > 0 {
			b.WriteString(" (" + printable.Ratio(n.Misestimate) + " " + n.Direction + ")")
		}
	default:
		part("rows ", printable.Count(n.PlanRows), " planned")
	}
	if n.Removed > 0 {
		part("removed ", printable.Count(n.Removed))
	}
	if n.HeapFetches > 0 {
		part("heap fetches ", printable.Count(n.HeapFetches))
	}
	if n.SharedHit+n.SharedRead > 0 {
		part("buffers hit ", printable.Count(float64(n.SharedHit)), " read ", printable.Count(float64(n.SharedRead)))
	}
	if n.TempBlocks > 0 {
		part("temp ", printable.Count(float64(n.TempBlocks)))
	}
	if n.IOms > 0 {
		part("I/O ", printable.PlanMS(n.IOms))
	}
	if n.Spill != "" {
		part(n.Spill)
	}
	return b.String()
}

// costText prints a planner cost as EXPLAIN does, compactly when huge.
func costText(c float64) string {
	if c >= 1e12 {
		return fmt.Sprintf("%.3g", math.Min(c, math.MaxFloat64))
	}
	return string(strconv.AppendFloat(nil, c, 'f', 0, 64))
}
