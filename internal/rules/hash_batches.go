package rules

import (
	"fmt"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// hashBatches flags hash joins and hash aggregates that split their work
// into batches written to temporary files.
func hashBatches(in PlanInput) []model.Finding {
	var out []model.Finding
	all, parent := nodes(in.Explain)
	for _, n := range all {
		var need, batches float64
		var join *plan.Node
		switch {
		case n.NodeType == "Hash" && n.HashBatches > 1:
			batches, join = n.HashBatches, parent[n]
			// hash_mem_multiplier (2 since PostgreSQL 15) scales work_mem
			// for hashes: the table needs about peak x batches.
			need = n.PeakMemoryKB * n.HashBatches / 2
		case n.NodeType == "Aggregate" && n.HashAggBatches > 1:
			batches = n.HashAggBatches
			need = (n.PeakMemoryKB + n.DiskUsageKB) / 2
		default:
			continue
		}
		excl := n.Figures.ExclusiveMS
		io := tempIOms(n)
		if join != nil {
			excl += join.Figures.ExclusiveMS
			io += tempIOms(join)
		}
		saved, how := io, "the temp-file I/O time"
		if saved <= 0 {
			saved, how = 0.3*excl, "a third of the hash's time (no I/O timing in the plan)"
		}
		f := planFinding(in, HashBatchesID, n, fmt.Sprintf("%s ran in %.0f batches on disk", n.Head(), batches), saved, "estimated as "+how)
		f.Evidence = append(f.Evidence, ev("batches", batches, ""), ev("peak memory", n.PeakMemoryKB, "kB"))
		if n.OriginalHashBatches > 0 && n.OriginalHashBatches < batches {
			f.Evidence = append(f.Evidence, ev("batches planned", n.OriginalHashBatches, ""))
		}
		if n.DiskUsageKB > 0 {
			f.Evidence = append(f.Evidence, ev("disk", n.DiskUsageKB, "kB"))
		}
		f.Fix = model.Fix{Summary: "raise work_mem (or hash_mem_multiplier) for this query so the hash fits in one batch",
			SQL: workMemSQL(need)}
		f.Experiment = workMemExperiment(in, need)
		out = append(out, f)
	}
	return out
}

func hashBatchesStatements(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	return spillStatements(s, HashBatchesID)
}

// HashBatchesID is the stable id of the rule.
const HashBatchesID = "hash-batches"
