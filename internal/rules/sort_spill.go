package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// sortSpill flags sorts that wrote to temporary files.
func sortSpill(in PlanInput) []model.Finding {
	var out []model.Finding
	all := allNodes(in.Explain)
	for _, n := range all {
		if !strings.HasSuffix(n.NodeType, "Sort") {
			continue
		}
		disk := 0.0
		if n.SortSpaceType == "Disk" {
			disk = n.SortSpaceKB
		}
		for _, w := range n.Workers {
			if w.SortSpaceType == "Disk" {
				disk = math.Max(disk, w.SortSpaceKB)
			}
		}
		if disk <= 0 {
			continue
		}
		saved := tempIOms(n)
		how := "the temp-file I/O time"
		if saved <= 0 {
			saved, how = 0.5*n.Figures.ExclusiveMS, "half the sort's time (no I/O timing in the plan)"
		}
		f := planFinding(in, SortSpillID, n, fmt.Sprintf("sort wrote %s to disk (%s)", printable.KB(disk), n.SortMethod), saved, "estimated as "+how)
		f.Evidence = append(f.Evidence, ev("sort disk", disk, "kB"), ev("time in the sort", n.Figures.ExclusiveMS, "ms"),
			ev("temp blocks written", float64(n.Buffers.TempWritten), "blocks"))
		// An in-memory sort of the same rows needs more than their on-disk
		// size (tuple headers, the array of pointers): ask for three times.
		f.Fix = model.Fix{Summary: "give the sort enough work_mem to stay in memory (for this query or role), or add an index that returns the rows in order (Sort Key: " + strings.Join(n.SortKey, ", ") + ")",
			SQL: workMemSQL(3 * disk)}
		f.Experiment = workMemExperiment(in, 3*disk)
		out = append(out, f)
	}
	return out
}

// sortSpillStatements and hashBatchesStatements read pg_stat_statements'
// temp_blks_written: statements that write temporary files on every call
// because a sort, or a hash, does not fit in work_mem. Which of the two
// spilled is read from the statement's plan (check plans the top
// statements without running them); a plan with both kinds of node goes
// to sort-spill, and the experiment's EXPLAIN ANALYZE says which node
// wrote the files.
func sortSpillStatements(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	return spillStatements(s, SortSpillID)
}

// SortSpillID is the stable id of the rule.
const SortSpillID = "sort-spill"
