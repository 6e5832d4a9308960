package rules

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Thresholds of the plan rules; docs/rules/<id>.md explains each.
const (
	planJITMinShare         = 0.1  // JIT at least this share of execution ...
	planJITMinMS            = 5.0  // ... and at least this long
	slowPlanningMinMS       = 5.0  // planning at least this long ...
	missingIndexMinRemoved  = 1000 // rows a filter threw away
	missingIndexMaxKept     = 0.1  // share of the scanned rows the filter kept
	misestimateFactor       = 100.0
	misestimateMinRows      = 100 // the larger side, so 1 vs 150 rows is not noise
	nestedLoopMinLoops      = 1000
	nestedLoopMinShare      = 0.1
	largeOffsetMinDiscarded = 1000
	largeOffsetMinShare     = 0.9 // share of the rows read that OFFSET discarded
	heapFetchMin            = 1000
	heapFetchMinShare       = 0.1
)

// planJIT is jit-overhead for one plan: compilation time that the query's
// own work does not justify.
func planJIT(in PlanInput) []model.Finding {
	e := in.Explain
	if e.JIT == nil || e.JIT.TimingMS == nil || e.ExecutionMS <= 0 {
		return nil
	}
	jit := e.JIT.TimingMS.Total
	if jit < planJITMinMS || jit < planJITMinShare*e.ExecutionMS {
		return nil
	}
	f := planFinding(in, JITOverheadID, nil, fmt.Sprintf("JIT compilation took %s of the %s execution", ms(jit), ms(e.ExecutionMS)), jit, "")
	f.Evidence = append(f.Evidence, ev("JIT total", jit, "ms"), ev("execution", e.ExecutionMS, "ms"),
		ev("functions compiled", float64(e.JIT.Functions), ""), ev("plan cost", e.Plan.TotalCost, ""))
	f.Fix = model.Fix{Summary: fmt.Sprintf("turn JIT off for this workload (the plan's cost %.0f passed jit_above_cost); if only some queries are analytic, raise jit_above_cost instead", e.Plan.TotalCost),
		SQL: "SET jit = off;  -- or ALTER ROLE <app role> SET jit = off;"}
	if e.JIT.Inlining || e.JIT.Optimization {
		f.Fix.Summary += "; inlining and optimisation ran, which is most of the cost"
	}
	return []model.Finding{f}
}

// slowPlanning flags plans that took longer to plan than to run.
func slowPlanning(in PlanInput) []model.Finding {
	e := in.Explain
	if !e.HasPlanningTime || e.PlanningMS < slowPlanningMinMS || (e.HasAnalyze && e.PlanningMS < e.ExecutionMS) {
		return nil
	}
	f := planFinding(in, SlowPlanningID, nil, fmt.Sprintf("planning took %s, execution %s", ms(e.PlanningMS), ms(e.ExecutionMS)), e.PlanningMS, "")
	// Planning time is not part of execution time: share against both.
	total := e.PlanningMS + e.ExecutionMS
	f.Impact.Share = model.Round(e.PlanningMS/total, 4)
	f.Impact.Summary = fmt.Sprintf("could save up to %s of %s planning plus execution (%s) per call", ms(e.PlanningMS), ms(total), pct(e.PlanningMS/total))
	joins := 0
	e.Plan.Walk(func(n, _ *plan.Node) {
		if strings.HasSuffix(n.NodeType, "Join") || n.NodeType == "Nested Loop" {
			joins++
		}
	})
	f.Evidence = append(f.Evidence, ev("planning", e.PlanningMS, "ms"), ev("execution", e.ExecutionMS, "ms"), ev("joins", float64(joins), ""))
	f.Fix.Summary = "prepare the statement once and execute it many times (server-side prepared statements keep the plan); with many joins lower join_collapse_limit, with many partitions make sure the partition key is in the WHERE clause"
	return []model.Finding{f}
}

// planMissingIndex flags a sequential scan whose filter throws away nearly
// everything it reads: an index on the filtered columns reads only the
// rows that are kept.
func planMissingIndex(in PlanInput) []model.Finding {
	var out []model.Finding
	for _, g := range seqScanGroups(in.Explain) {
		if g.removed < missingIndexMinRemoved || g.kept > missingIndexMaxKept*(g.kept+g.removed) {
			continue
		}
		n := g.scans[0]
		if len(findCasts(n.Filter, "")) > 0 {
			continue // implicit-cast explains this scan better
		}
		// Parallel workers' times add up past the plan's own: no
		// saving is larger than the whole plan.
		saved := min(g.ms*(1-g.kept/(g.kept+g.removed)), in.Explain.TotalMS())
		cols := filterColumns(n)
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = sqlparse.QuoteIdent(c)
		}
		var f model.Finding
		if len(g.scans) == 1 {
			title := fmt.Sprintf("sequential scan of %s keeps %s of %s rows", relName(n), count(g.kept), count(g.kept+g.removed))
			f = planFinding(in, MissingIndexID, n, title, saved, "")
			if len(cols) > 0 {
				f.Fix = model.Fix{Summary: fmt.Sprintf("index the filtered column%s (equality columns first)", plural(len(cols))),
					SQL: fmt.Sprintf("CREATE INDEX CONCURRENTLY ON %s (%s);", relName(n), strings.Join(quoted, ", "))}
			}
		} else {
			last := g.scans[len(g.scans)-1]
			title := fmt.Sprintf("sequential scans of %d partitions (%s … %s) keep %s of %s rows", len(g.scans), relName(n), relName(last), count(g.kept), count(g.kept+g.removed))
			f = planFinding(in, MissingIndexID, g.parent, title, saved, "")
			f.Evidence = append(f.Evidence, ev("partitions scanned", float64(len(g.scans)), ""))
			if len(cols) > 0 {
				// The plan names the partitions, not the partitioned
				// table; the scans' alias (events_1, events_2, ...) is the
				// query's name for it, which is the table's unless the
				// query gave it another.
				parent := "<partitioned table>"
				if base := aliasBase(g.scans); base != "" {
					parent = sqlparse.QuoteIdent(base)
				}
				f.Fix = model.Fix{Summary: fmt.Sprintf("index the filtered column%s on the partitioned table: one CREATE INDEX on it creates the index on every partition (CONCURRENTLY is refused on a partitioned table; create it on each partition first to avoid the long lock)", plural(len(cols))),
					SQL: fmt.Sprintf("CREATE INDEX ON %s (%s);", parent, strings.Join(quoted, ", "))}
			}
		}
		f.Evidence = append(f.Evidence, ev("rows kept", g.kept, "rows"), ev("rows removed by filter", g.removed, "rows"),
			ev("time in the scan", g.ms, "ms"), ev("blocks read", g.blocks, "blocks"))
		if len(cols) == 0 {
			// No column of the filter is one a B-tree serves as
			// written: the fix is what would serve it, or none.
			fix, owner := unservedFix(n, g)
			f.Fix = fix
			if owner != "" {
				f.Title += fmt.Sprintf(" (see %s)", owner)
			}
			if fix.SQL == "" {
				f.Severity = min(f.Severity, model.Warning)
			}
		}
		f.Experiment = nil
		out = append(out, f)
	}
	return out
}

// scanGroup is the sequential scans judged together: one scan, or the
// scans of a partitioned table's partitions.
type scanGroup struct {
	parent                    *plan.Node
	scans                     []*plan.Node
	kept, removed, ms, blocks float64
}

// seqScanGroups gathers the executed, filtered sequential scans. A
// partitioned table shows as an Append (or MergeAppend) over one scan per
// partition, each with the same filter: each alone may be too small to
// matter, together they are the statement's time, and one index on the
// partitioned table fixes them all, so they are judged as one.
func seqScanGroups(e *plan.Explain) []*scanGroup {
	all, parent := nodes(e)
	var groups []*scanGroup
	byKey := map[[2]any]*scanGroup{}
	for _, n := range all {
		if n.NodeType != "Seq Scan" || n.Filter == "" || !n.Executed() {
			continue
		}
		var g *scanGroup
		if p := parent[n]; p != nil && (p.NodeType == "Append" || p.NodeType == "Merge Append") {
			// Under VERBOSE each partition's filter names its own
			// alias (call_records_3.started_at): the same condition.
			key := [2]any{p, unaliased(n)}
			if g = byKey[key]; g == nil {
				g = &scanGroup{parent: p}
				byKey[key] = g
				groups = append(groups, g)
			}
		} else {
			g = &scanGroup{}
			groups = append(groups, g)
		}
		g.scans = append(g.scans, n)
		g.removed += n.RowsRemovedByFilter * n.ActualLoops
		g.kept += n.Figures.TotalRows
		g.ms += n.Figures.ExclusiveMS
		g.blocks += float64(n.Buffers.SharedHit + n.Buffers.SharedRead)
	}
	return groups
}

// unaliased is a scan's filter without its alias's qualification.
func unaliased(n *plan.Node) string {
	if n.Alias == "" {
		return n.Filter
	}
	return strings.ReplaceAll(n.Filter, n.Alias+".", "")
}

// aliasBase is the name PostgreSQL derived the partitions' aliases from
// (events_1, events_2 → events), when they all share it.
func aliasBase(scans []*plan.Node) string {
	base := ""
	for _, n := range scans {
		i := strings.LastIndexByte(n.Alias, '_')
		if i <= 0 || strings.Trim(n.Alias[i+1:], "0123456789") != "" || n.Alias[i+1:] == "" {
			return ""
		}
		if base != "" && n.Alias[:i] != base {
			return ""
		}
		base = n.Alias[:i]
	}
	return base
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// unservedFix is the fix for a scan whose filter no plain B-tree on its
// columns serves as written, and the rule whose class the filter is:
//   - LIKE 'abc%' under a linguistic collation: a B-tree compares by the
//     collation, which cannot bound a prefix; one built with
//     text_pattern_ops compares as C does and can (collation-prefix);
//   - a column inside date_trunc(), a cast to date or extract(year):
//     rewritten as a range on the bare column, a B-tree on it serves the
//     filter and, on a partitioned table, the planner prunes partitions
//     again (partition-pruning, which rewrites the statement itself);
//   - anything else (a function of the column, <>, OR across columns):
//     no index pgmedic can name serves it, and the fix says so, with no
//     SQL to paste.
func unservedFix(n *plan.Node, g *scanGroup) (model.Fix, string) {
	alias := n.Alias
	if alias == "" {
		alias = n.RelationName
	}
	rel := relName(n)
	partitioned := len(g.scans) > 1
	if partitioned {
		rel = "<partitioned table>"
		if base := aliasBase(g.scans); base != "" {
			rel = sqlparse.QuoteIdent(base)
		}
	}
	table, filter := n.RelationName, n.Filter
	if partitioned && aliasBase(g.scans) != "" {
		// Said of the partitioned table, in the query's own name.
		table, alias = aliasBase(g.scans), aliasBase(g.scans)
		filter = strings.ReplaceAll(n.Filter, n.Alias+".", alias+".")
	}
	where := fmt.Sprintf("SELECT 1 FROM %s AS %s WHERE %s", sqlparse.QuoteIdent(table), sqlparse.QuoteIdent(alias), filter)
	st, err := sqlparse.Parse(where)
	if err != nil {
		return model.Fix{Summary: "no plain index serves the filter " + n.Filter + " as written"}, ""
	}
	if likes := st.LikePrefixes(); len(likes) > 0 {
		col := sqlparse.QuoteIdent(likes[0].Column.Column)
		create := "CREATE INDEX CONCURRENTLY ON"
		if partitioned {
			create = "CREATE INDEX ON"
		}
		return model.Fix{Summary: fmt.Sprintf("an index on %s as it is compares by the column's collation, which cannot bound LIKE 'prefix%%' unless the collation is C: build one with text_pattern_ops (it serves LIKE and equality, not ORDER BY), or declare the column COLLATE \"C\" if it holds codes", likes[0].Column.Column),
			SQL: fmt.Sprintf("%s %s (%s text_pattern_ops);", create, rel, col)}, CollationPrefixID
	}
	for _, col := range st.ColumnNames() {
		hidden := st.HiddenKeys(col)
		if len(hidden) == 0 || !hidden[0].Fixable {
			continue
		}
		rewritten, changed, err := st.PruneOnKey(col)
		if err != nil || changed == 0 {
			continue
		}
		range_ := rewritten.Text()
		if _, after, ok := strings.Cut(range_, " WHERE "); ok {
			range_ = after
		}
		if partitioned {
			return model.Fix{Summary: fmt.Sprintf("%s: rewrite %s as a range on the bare column (%s); the planner then prunes the partitions the range leaves out, and an index on %s serves what is left",
				hidden[0].Why, hidden[0].Predicate, range_, col)}, PartitionPruningID
		}
		return model.Fix{Summary: fmt.Sprintf("%s, which no index on %s serves: rewrite %s as a range on the bare column (%s), which an index on %s serves", hidden[0].Why, col, hidden[0].Predicate, range_, col),
			SQL: fmt.Sprintf("CREATE INDEX CONCURRENTLY ON %s (%s);  -- once the statement compares the bare column", rel, sqlparse.QuoteIdent(col))}, ""
	}
	return model.Fix{Summary: "no index on the filter's columns serves " + n.Filter + " as written (a column inside an expression, <>, or OR across columns): rewrite the condition so a column stands alone against a value, or index the expression if its functions are immutable"}, ""
}

// filterColumns reads the filter's columns through the SQL parser:
// equality columns first, then at most one range column (a B-tree can
// use only the first range key).
func filterColumns(n *plan.Node) []string {
	alias := n.Alias
	if alias == "" {
		alias = n.RelationName
	}
	sh, err := sqlparse.Describe(fmt.Sprintf("SELECT 1 FROM %s AS %s WHERE %s", sqlparse.QuoteIdent(n.RelationName), sqlparse.QuoteIdent(alias), n.Filter))
	if err != nil {
		return nil
	}
	var eq, rng []string
	for _, p := range sh.Predicates {
		if p.Cast {
			continue
		}
		switch p.Op {
		case sqlparse.OpEq:
			eq = appendNew(eq, p.Column)
		case sqlparse.OpRange:
			rng = appendNew(rng, p.Column)
		}
	}
	sort.Strings(eq)
	if len(rng) > 0 {
		eq = appendNew(eq, rng[0])
	}
	return eq
}

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

// lossyBitmap flags bitmap heap scans whose bitmap outgrew work_mem and
// degraded to whole pages, so every row on them is rechecked.
func lossyBitmap(in PlanInput) []model.Finding {
	var out []model.Finding
	all := allNodes(in.Explain)
	for _, n := range all {
		if n.NodeType != "Bitmap Heap Scan" || n.LossyHeapBlocks <= 0 {
			continue
		}
		pages := n.LossyHeapBlocks + n.ExactHeapBlocks
		lossy := n.LossyHeapBlocks / pages
		saved := n.Figures.ExclusiveMS * lossy * 0.5
		f := planFinding(in, LossyBitmapID, n, fmt.Sprintf("bitmap went lossy on %s of %s heap pages", count(n.LossyHeapBlocks), count(pages)), saved,
			"estimated as half the scan's time on lossy pages")
		f.Evidence = append(f.Evidence, ev("lossy pages", n.LossyHeapBlocks, "pages"), ev("exact pages", n.ExactHeapBlocks, "pages"),
			ev("rows removed by recheck", n.RowsRemovedByIndexRecheck*max(n.ActualLoops, 1), "rows"))
		// An exact bitmap page costs a few dozen bytes; 64 per page with
		// headroom keeps every page exact.
		f.Fix = model.Fix{Summary: "raise work_mem so the bitmap keeps one entry per row", SQL: workMemSQL(pages * 64 / 1024 * 2)}
		out = append(out, f)
	}
	return out
}

// largeOffset flags a Limit that read many rows only to throw them away.
func largeOffset(in PlanInput) []model.Finding {
	var out []model.Finding
	all := allNodes(in.Explain)
	for _, n := range all {
		kids := n.Children()
		if n.NodeType != "Limit" || len(kids) == 0 || !n.Executed() {
			continue
		}
		child := kids[0]
		read, returned := child.Figures.TotalRows, n.Figures.TotalRows
		discarded := read - returned
		if discarded < largeOffsetMinDiscarded || discarded < largeOffsetMinShare*read {
			continue
		}
		saved := n.Figures.InclusiveMS * discarded / read
		f := planFinding(in, LargeOffsetID, n, fmt.Sprintf("OFFSET skipped %s rows to return %s", count(discarded), count(returned)), saved, "")
		f.Evidence = append(f.Evidence, ev("rows read", read, "rows"), ev("rows returned", returned, "rows"))
		f.Fix.Summary = "paginate by key instead of OFFSET: remember the last row's ORDER BY columns and ask for the rows after them (WHERE (columns) > (last values)), which an index on those columns reads from that point"
		if sk := sortKeyBelow(child); sk != "" {
			cols, cond := keyset(sk)
			f.Fix.Summary = fmt.Sprintf("paginate by key instead of OFFSET: remember the last row's %s and ask for WHERE %s ORDER BY %s LIMIT n, which an index on (%s) reads from that point", cols, cond, sk, sk)
		}
		out = append(out, f)
	}
	return out
}

// keyset turns a plan's sort key ("orders.amount DESC, orders.id") into
// the columns to remember and the condition for the rows after the last
// one seen. One direction for every column allows a row comparison; mixed
// directions need the expanded form, since (a, b) > (x, y) compares both
// columns the same way.
func keyset(sortKey string) (cols, cond string) {
	type key struct {
		expr string
		desc bool
	}
	var keys []key
	depth, start := 0, 0
	add := func(part string) {
		f := strings.Fields(part)
		desc := false
		for len(f) > 1 {
			last := strings.ToUpper(f[len(f)-1])
			if last != "DESC" && last != "ASC" && last != "NULLS" && last != "FIRST" && last != "LAST" {
				break
			}
			desc = desc || last == "DESC"
			f = f[:len(f)-1]
		}
		keys = append(keys, key{strings.Join(f, " "), desc})
	}
	for i, r := range sortKey {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				add(sortKey[start:i])
				start = i + 1
			}
		}
	}
	add(sortKey[start:])
	names, last := make([]string, len(keys)), make([]string, len(keys))
	same := true
	for i, k := range keys {
		names[i], last[i] = k.expr, ":last_"+strconv.Itoa(i+1)
		same = same && k.desc == keys[0].desc
	}
	cols = strings.Join(names, ", ")
	op := func(desc bool) string {
		if desc {
			return "<"
		}
		return ">"
	}
	if same {
		if len(keys) == 1 {
			return cols, fmt.Sprintf("%s %s %s", names[0], op(keys[0].desc), last[0])
		}
		return cols, fmt.Sprintf("(%s) %s (%s)", cols, op(keys[0].desc), strings.Join(last, ", "))
	}
	var ors []string
	for i, k := range keys {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, names[j]+" = "+last[j])
		}
		ands = append(ands, fmt.Sprintf("%s %s %s", k.expr, op(k.desc), last[i]))
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return cols, strings.Join(ors, " OR ")
}

// sortKeyBelow is the first sort key found at or under a node.
func sortKeyBelow(n *plan.Node) string {
	key := ""
	n.Walk(func(x, _ *plan.Node) {
		if key == "" && len(x.SortKey) > 0 {
			key = strings.Join(x.SortKey, ", ")
		}
		if key == "" && x.IndexName != "" && (x.NodeType == "Index Scan" || x.NodeType == "Index Only Scan") {
			key = "the key of " + x.IndexName
		}
	})
	return key
}

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
