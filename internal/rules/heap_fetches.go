package rules

import (
	"fmt"
	"math"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Thresholds of heap-fetches (see docs/rules/heap-fetches.md).
const (
	heapFetchMin      = 1000
	heapFetchMinShare = 0.1
)

// heapFetches flags index-only scans that still visit the heap because
// the visibility map is out of date.
func heapFetches(in PlanInput) []model.Finding {
	var out []model.Finding
	all := allNodes(in.Explain)
	for _, n := range all {
		if n.NodeType != "Index Only Scan" || !n.Executed() {
			continue
		}
		fetches := n.HeapFetches * n.ActualLoops
		// Rows a Filter removed were fetched too.
		rows := math.Max(n.Figures.TotalRows+n.RowsRemovedByFilter*n.ActualLoops, 1)
		if fetches < heapFetchMin || fetches < heapFetchMinShare*rows {
			continue
		}
		share := math.Min(1, fetches/rows)
		saved := n.Figures.ExclusiveMS * share * 0.5
		f := planFinding(in, HeapFetchesID, n, fmt.Sprintf("index-only scan fetched %s of %s rows from the heap", count(fetches), count(rows)), saved,
			"estimated as half the scan's time for the fetched share")
		f.Evidence = append(f.Evidence, ev("heap fetches", fetches, "rows"), ev("rows", rows, "rows"))
		f.Fix = model.Fix{Summary: "VACUUM the table so the visibility map marks its pages all-visible; if it churns, let autovacuum run more often on it",
			SQL: fmt.Sprintf("VACUUM (ANALYZE) %s;\nALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);", relName(n), relName(n))}
		out = append(out, f)
	}
	return out
}

// HeapFetchesID is the stable id of the rule.
const HeapFetchesID = "heap-fetches"
