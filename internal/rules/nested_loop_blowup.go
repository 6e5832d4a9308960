package rules

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Thresholds of nested-loop-blowup (see docs/rules/nested-loop-blowup.md).
const (
	nestedLoopMinLoops = 1000
	nestedLoopMinShare = 0.1
)

// nestedLoopBlowup flags nested loops whose inner side ran thousands of
// times and holds most of the loop's time.
func nestedLoopBlowup(in PlanInput) []model.Finding {
	var out []model.Finding
	all := allNodes(in.Explain)
	for _, n := range all {
		kids := n.Children()
		if n.NodeType != "Nested Loop" || len(kids) != 2 || !n.Executed() {
			continue
		}
		outer, inner := kids[0], kids[1]
		if inner.ActualLoops < nestedLoopMinLoops || n.Figures.InclusiveMS < nestedLoopMinShare*in.Explain.TotalMS() {
			continue
		}
		// Work the loop did beyond reading each side once.
		single := 0.0
		if inner.ActualLoops > 0 {
			single = inner.Figures.InclusiveMS / inner.ActualLoops
		}
		saved := math.Max(0, n.Figures.InclusiveMS-outer.Figures.InclusiveMS-single)
		title := fmt.Sprintf("nested loop ran its inner side (%s) %s times", inner.Label(), count(inner.ActualLoops))
		f := planFinding(in, NestedLoopBlowupID, n, title, saved, "the loop's time beyond reading each side once")
		removed := n.RowsRemovedByJoinFilter * max(n.ActualLoops, 1)
		f.Evidence = append(f.Evidence, ev("inner loops", inner.ActualLoops, ""), ev("rows removed by join filter", removed, "rows"),
			ev("outer rows planned", outer.PlanRows, "rows"), ev("outer rows returned", outer.Figures.TotalRows, "rows"))
		var off []string
		for k, v := range in.Explain.Settings {
			if strings.HasPrefix(k, "enable_") && v == "off" {
				off = append(off, k)
			}
		}
		sort.Strings(off)
		switch {
		case len(off) > 0:
			f.Fix.Summary = "the plan ran with " + strings.Join(off, ", ") + " = off; re-enable them so the planner can read each side once with a hash or merge join"
			f.Fix.SQL = "RESET " + strings.Join(off, "; RESET ") + ";"
		case outer.Figures.Misestimate > 10 && outer.Figures.Under:
			f.Fix.Summary = fmt.Sprintf("the outer side returned %s rows where %s were planned: fix that estimate (see misestimate) and the planner picks a hash join", count(outer.Figures.TotalRows), count(outer.PlanRows))
		case n.JoinFilter != "":
			f.Fix.Summary = "the join condition (" + n.JoinFilter + ") is checked row by row: index the inner side's join column so each loop is an index lookup, or rewrite so a hash join applies"
		default:
			f.Fix.Summary = "index the inner side's join column so each loop is a lookup, or fix the outer row estimate so a hash join is chosen"
		}
		out = append(out, f)
	}
	return out
}

// NestedLoopBlowupID is the stable id of the rule.
const NestedLoopBlowupID = "nested-loop-blowup"
