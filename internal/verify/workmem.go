package verify

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// maxTriedWorkMemKB bounds the work_mem the experiment tries (1 GB): past
// it, the fix is fewer rows, not memory.
const maxTriedWorkMemKB = 1 << 20

// workMem re-runs a statement that spills to disk with work_mem as its
// role has it and with the proposed work_mem (SET LOCAL, read-only,
// rolled back), alternating, Runs times each after an untimed run of each.
// When the proposed size still spills, it is doubled (up to 1 GB), and
// when half of it would do, halved, before the timed runs. More memory does not always make a statement faster (an
// external merge of runs that fit the CPU's caches can beat one large
// in-memory sort): then the finding is refuted, with both medians.
func (e *Engine) workMem(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	b := e.rerunnable(ctx, f)
	if b == nil {
		return
	}
	defer b.cleanup()
	app := maps.Clone(exp.AppSettings)
	if app == nil {
		app = map[string]string{}
	}
	proposed := exp.FixSettings["work_mem"]
	fixedAt := func(v string) map[string]string {
		m := maps.Clone(app)
		m["work_mem"] = v
		return m
	}
	fixed := func() map[string]string { return fixedAt(proposed) }
	first, err := e.once(ctx, b.target, "off", app, customPlan)
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	spillBefore, nodes := spilled(first)
	if spillBefore == 0 {
		f.Verification = model.Verification{Status: model.NotRun, Parameters: b.desc,
			Reason: "the re-run did not spill to disk with the role's work_mem: the values pgmedic bound, or the data since, do not need as much memory as the application's calls did"}
		// A prepared statement's calls may run its generic plan, whose
		// estimates need not be the custom plan's: when that plan spills
		// for the same values, the spill is the generic plan's, and
		// generic-plan's fix (a plan for each call's values) removes it.
		if len(b.values) > 0 {
			if g, err := e.once(ctx, b.target, "off", app, genericPlan); err == nil {
				if kb, what := spilled(g); kb > 0 {
					f.Severity = model.Info
					f.Title += " (see generic-plan)"
					f.Verification.Reason = fmt.Sprintf("the spill is the generic plan's: for the same values the generic plan spilled %s to disk (%s) and a custom plan nothing, with the role's work_mem; a plan for each call's values removes it (see generic-plan)",
						model.MemoryText(kb), what)
				}
			}
		}
		return
	}
	var after *plan.Explain
	for {
		if after, err = e.once(ctx, b.target, "off", fixed(), customPlan); err != nil {
			f.Verification = model.NotRunBecause(err.Error())
			return
		}
		kb := model.MemoryKB(proposed)
		if left, _ := spilled(after); left == 0 || 2*kb > maxTriedWorkMemKB {
			break
		}
		proposed = model.MemorySetting(2 * kb)
	}
	// The smallest power of two that still keeps it in memory: what the
	// setting costs is paid per node and per connection.
	floor := model.MemoryKB(app["work_mem"])
	if floor == 0 {
		floor = model.MemoryKB(snap.Settings["work_mem"].Value)
	}
	for {
		half := model.MemoryKB(proposed) / 2
		if left, _ := spilled(after); left > 0 || half < 4096 || half <= floor {
			break
		}
		try := fixedAt(model.MemorySetting(half))
		ex, err := e.once(ctx, b.target, "off", try, customPlan)
		if err != nil {
			f.Verification = model.NotRunBecause(err.Error())
			return
		}
		if left, _ := spilled(ex); left > 0 {
			break
		}
		proposed, after = try["work_mem"], ex
	}
	spillAfter, nodesAfter := spilled(after)
	var on, off []float64
	for i := 0; i < e.Runs; i++ {
		for j := range 2 {
			withFix := (i+j)%2 == 1
			set := app
			if withFix {
				set = fixed()
			}
			ex, err := e.once(ctx, b.target, "off", set, customPlan)
			if err != nil {
				f.Verification = model.NotRunBecause(err.Error())
				return
			}
			if withFix {
				off = append(off, ex.PlanningMS+ex.ExecutionMS)
			} else {
				on = append(on, ex.PlanningMS+ex.ExecutionMS)
			}
		}
	}
	before, afterMS := median(on), median(off)
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "measured with the role's work_mem (median)", Value: model.Round(before, 2), Unit: "ms"},
		model.Evidence{Label: "measured with work_mem = " + proposed + " (median)", Value: model.Round(afterMS, 2), Unit: "ms"},
		model.Evidence{Label: "spilled on the re-run with the role's work_mem" + colon(nodes), Value: model.Round(spillBefore, 0), Unit: "kB"},
		model.Evidence{Label: "spilled with work_mem = " + proposed + colon(nodesAfter), Value: model.Round(spillAfter, 0), Unit: "kB"})
	f.Verification = model.Verification{
		Method:     fmt.Sprintf("EXPLAIN ANALYZE x%d with work_mem as the role has it and x%d with SET LOCAL work_mem = '%s', alternating, in rolled-back read-only transactions, jit off; medians of planning + execution time", e.Runs, e.Runs, proposed),
		Parameters: b.desc,
		Before:     &model.Measure{Value: model.Round(before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(afterMS, 2), Unit: "ms"}}
	if was := exp.FixSettings["work_mem"]; proposed != was {
		if old := model.WorkMemCost(snap.Activity, was); old != "" {
			f.Impact.Summary = strings.ReplaceAll(f.Impact.Summary, old, model.WorkMemCost(snap.Activity, proposed))
		}
		f.Fix.SQL = strings.ReplaceAll(f.Fix.SQL, "'"+exp.FixSettings["work_mem"]+"'", "'"+proposed+"'")
		f.Fix.Summary = strings.ReplaceAll(f.Fix.Summary, "= "+exp.FixSettings["work_mem"], "= "+proposed)
	}
	if judgeRuns(f, on, off) {
		return
	}
	f.Title = fmt.Sprintf("spills to disk, but more work_mem does not make it faster (%.1f ms spilling, %.1f ms with work_mem = %s)", before, afterMS, proposed)
	f.Fix = model.Fix{Summary: fmt.Sprintf("keep work_mem as it is for this statement: its temporary files (%s per run) cost the disk's I/O, not its own time. To write less, have it sort or hash fewer rows (a narrower select list, a filter before the sort, an index that returns the rows in order)", printable.KB(spillBefore))}
}

// spilled sums what a plan's nodes wrote to disk past work_mem, and names
// them: sorts that went to disk, hashes split into batches, hash
// aggregates that spilled.
func spilled(ex *plan.Explain) (kb float64, what string) {
	if ex == nil {
		return 0, ""
	}
	var names []string
	ex.Plan.Walk(func(n, _ *plan.Node) {
		switch {
		case strings.HasSuffix(n.NodeType, "Sort") && n.SortSpaceType == "Disk":
			kb += n.SortSpaceKB
			names = append(names, n.NodeType+" ("+n.SortMethod+")")
		case n.NodeType == "Hash" && n.HashBatches > 1:
			kb += n.PeakMemoryKB * n.HashBatches
			names = append(names, fmt.Sprintf("Hash (%.0f batches)", n.HashBatches))
		case n.NodeType == "Aggregate" && n.DiskUsageKB > 0:
			kb += n.DiskUsageKB
			names = append(names, fmt.Sprintf("HashAggregate (%.0f batches)", n.HashAggBatches))
		}
		for _, w := range n.Workers {
			if w.SortSpaceType == "Disk" {
				kb += w.SortSpaceKB
			}
		}
	})
	return kb, strings.Join(names, ", ")
}

func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
