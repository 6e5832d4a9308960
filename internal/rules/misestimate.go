package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Thresholds of misestimate (see docs/rules/misestimate.md).
const (
	misestimateFactor  = 100.0
	misestimateMinRows = 100 // the larger side, so 1 vs 150 rows is not noise
)

// misestimate flags the node where a row estimate first goes wrong by more
// than 100x (nodes above only inherit the error).
func misestimate(in PlanInput) []model.Finding {
	var out []model.Finding
	all, parent := nodes(in.Explain)
	for _, n := range all {
		fig := n.Figures
		if fig.Misestimate <= misestimateFactor || math.Max(n.PlanRows, n.ActualRows) < misestimateMinRows {
			continue
		}
		origin := true
		for _, c := range n.Children() {
			if c.Figures.Misestimate > 10 && c.Figures.Under == fig.Under {
				origin = false
			}
		}
		if !origin || len(findCasts(n.Filter, "")) > 0 {
			// A cast on a filtered column hides its statistics; that is
			// implicit-cast's finding, not a statistics problem.
			continue
		}
		dir := "over"
		if fig.Under {
			dir = "under"
		}
		// Feeding the outer side of a nested loop is how a misestimate
		// turns into a slow plan: the loop was chosen for a few rows.
		var loop *plan.Node
		if !fig.Under && stoppedEarly(n, parent) {
			continue // a Limit or merge join above stopped reading it
		}
		for p, c := parent[n], n; p != nil && loop == nil; p, c = parent[p], p {
			if kids := p.Children(); p.NodeType == "Nested Loop" && len(kids) == 2 && kids[0] == c {
				loop = p
			}
			if p.NodeType != "Hash" && p.NodeType != "Materialize" && p.NodeType != "Sort" && p.NodeType != "Nested Loop" {
				break
			}
		}
		saved, saving := 0.0, "no time measured against it here; it misleads every choice above this node"
		if loop != nil && fig.Under {
			saved = loop.Children()[1].Figures.InclusiveMS
			saving = "the time of the nested loop's inner side, chosen for far fewer rows"
		}
		title := fmt.Sprintf("row estimate %s by %s: %s planned, %s returned", dir+"estimated", printable.Ratio(fig.Misestimate), count(n.PlanRows), count(n.ActualRows))
		f := planFinding(in, MisestimateID, n, title, saved, saving)
		if loop != nil {
			f.Title += fmt.Sprintf(", feeding nested loop #%d", loop.Figures.ID)
			if f.Severity == model.Info {
				f.Severity = model.Warning
			}
		}
		f.Evidence = append(f.Evidence, ev("planned rows", n.PlanRows, "rows"), ev("actual rows", n.ActualRows, "rows"), ev("factor", fig.Misestimate, "x"))
		f.Fix = misestimateFix(n)
		out = append(out, f)
	}
	return out
}

// stoppedEarly says whether a node above n may have stopped pulling rows
// before n was done: then fewer rows than planned is not a misestimate.
func stoppedEarly(n *plan.Node, parent map[*plan.Node]*plan.Node) bool {
	for p := parent[n]; p != nil; p = parent[p] {
		switch {
		case p.NodeType == "Limit", p.NodeType == "Merge Join", p.JoinType == "Semi", p.JoinType == "Anti":
			return true
		}
	}
	return false
}

// misestimateFix is what to do about a misestimate: ANALYZE for a scan,
// extended statistics for correlated join or grouping columns above it.
func misestimateFix(n *plan.Node) model.Fix {
	if !n.IsScan() {
		return model.Fix{Summary: "ANALYZE the tables below this node; if the estimate stays wrong, the join or grouping columns are correlated: try CREATE STATISTICS on them"}
	}
	fix := model.Fix{Summary: "ANALYZE " + relName(n) + " so the planner sees current statistics", SQL: "ANALYZE " + relName(n) + ";"}
	if cols := filterColumns(n); len(cols) >= 2 && n.Filter != "" {
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = sqlparse.QuoteIdent(c)
		}
		fix.Summary = "the filter's columns are correlated and the planner multiplies their selectivities; give it extended statistics, then ANALYZE"
		fix.SQL = fmt.Sprintf("CREATE STATISTICS ON %s FROM %s;\nANALYZE %s;", strings.Join(quoted, ", "), relName(n), relName(n))
	}
	return fix
}

// MisestimateID is the stable id of the rule.
const MisestimateID = "misestimate"
