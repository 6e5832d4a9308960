package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/printable"
)

// Diff is the comparison of two plans of the same query.
type Diff struct {
	Pairs        []Pair
	OnlyA, OnlyB []*Node
	Settings     []SettingDiff
	// JITms and PlanningMS are A's and B's.
	JITms, PlanningMS [2]float64
	// Measured is true when both plans have ANALYZE timing; otherwise the
	// comparison is on planner cost.
	Measured bool
	// TotalA/TotalB are execution ms (or total cost when not measured).
	TotalA, TotalB float64
	// Decisive is the one difference that accounts for most of the gap.
	Decisive string
	Summary  string
}

// Pair is a node of A aligned with a node of B.
type Pair struct {
	A, B    *Node
	Changes []string
	// Delta is B's exclusive time (or cost) minus A's.
	Delta float64
}

// SettingDiff is a planner setting that differs between the plans.
type SettingDiff struct{ Name, A, B string }

// Compare aligns the nodes of two plans of the same query. Scans pair by
// the alias they read; every other node pairs by its kind (join, sort,
// aggregate, ...) and the set of tables below it, so a Hash Join that
// became a Nested Loop over the same tables is one changed pair.
func Compare(a, b *Explain) *Diff {
	d := &Diff{Measured: a.HasTiming && b.HasTiming}
	d.TotalA, d.TotalB = total(a, d.Measured), total(b, d.Measured)
	sigB := map[string][]*Node{}
	for _, n := range signed(b) {
		sigB[n.sig] = append(sigB[n.sig], n.node)
	}
	used := map[*Node]bool{}
	for _, n := range signed(a) {
		cands := sigB[n.sig]
		if len(cands) == 0 {
			d.OnlyA = append(d.OnlyA, n.node)
			continue
		}
		m := cands[0]
		sigB[n.sig] = cands[1:]
		used[m] = true
		d.Pairs = append(d.Pairs, pairOf(n.node, m, d.Measured))
	}
	b.Plan.Walk(func(n, _ *Node) {
		if !used[n] {
			d.OnlyB = append(d.OnlyB, n)
		}
	})
	for _, k := range settingNames(a.Settings, b.Settings) {
		if a.Settings[k] != b.Settings[k] {
			d.Settings = append(d.Settings, SettingDiff{Name: k, A: orDefault(a.Settings[k]), B: orDefault(b.Settings[k])})
		}
	}
	for i, e := range []*Explain{a, b} {
		if e.JIT != nil && e.JIT.TimingMS != nil {
			d.JITms[i] = e.JIT.TimingMS.Total
		}
		d.PlanningMS[i] = e.PlanningMS
	}
	d.decide()
	return d
}

func orDefault(s string) string {
	if s == "" {
		return "(default)"
	}
	return s
}

// settingNames are the names of the settings of either plan, sorted.
func settingNames(a, b map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func total(e *Explain, measured bool) float64 {
	if measured {
		return e.TotalMS()
	}
	return e.Plan.TotalCost
}

// self is a node's own time when measured, else its own cost.
func self(n *Node, measured bool) float64 {
	if measured {
		return n.Figures.ExclusiveMS
	}
	cost := n.TotalCost
	for _, c := range n.Plans {
		cost -= c.TotalCost
	}
	return math.Max(0, cost)
}

type signedNode struct {
	node *Node
	sig  string
}

// signed gives every node its alignment key, depth first. The set of
// scans below each node is built bottom-up, once per plan.
func signed(e *Explain) []signedNode {
	var out []signedNode
	var rec func(n *Node) []string
	rec = func(n *Node) []string {
		i := len(out)
		out = append(out, signedNode{node: n})
		var below []string
		if n.IsScan() {
			below = append(below, scanKey(n))
		}
		// Children need this node's set (bitmap index scans take their
		// parent's), which is known only after them: fill it in after.
		var childIdx []int
		for k := range n.Plans {
			childIdx = append(childIdx, len(out))
			below = append(below, rec(&n.Plans[k])...)
		}
		sort.Strings(below)
		rels := strings.Join(below, ",")
		for _, ci := range childIdx {
			if strings.HasPrefix(out[ci].sig, "bitmap:") {
				out[ci].sig = "bitmap:" + rels
			}
		}
		switch {
		case n.IsScan():
			out[i].sig = "scan:" + scanKey(n)
		case n.NodeType == "Bitmap Index Scan" || n.NodeType == "BitmapAnd" || n.NodeType == "BitmapOr":
			out[i].sig = "bitmap:" // completed by the parent
		default:
			out[i].sig = kind(n) + ":" + rels
		}
		return below
	}
	rec(&e.Plan)
	return out
}

func scanKey(n *Node) string {
	if n.Alias != "" {
		return n.Alias
	}
	return n.RelationName
}

// kind groups node types that do the same job differently.
func kind(n *Node) string {
	switch n.NodeType {
	case "Nested Loop", "Hash Join", "Merge Join":
		return "join"
	case "Sort", "Incremental Sort":
		return "sort"
	case "Aggregate", "Group":
		return "aggregate"
	case "Gather", "Gather Merge":
		return "gather"
	case "Hash", "Materialize", "Memoize":
		return "buffer"
	}
	return n.NodeType
}

// pairOf is two matched nodes of the compared plans with what changed
// between them.
func pairOf(a, b *Node, measured bool) Pair {
	p := Pair{A: a, B: b, Delta: self(b, measured) - self(a, measured)}
	if la, lb := a.Label(), b.Label(); la != lb {
		p.Changes = append(p.Changes, la+" became "+lb)
	}
	if a.PlanRows != b.PlanRows && math.Max(a.PlanRows, b.PlanRows) >= 2*math.Max(1, math.Min(a.PlanRows, b.PlanRows)) {
		p.Changes = append(p.Changes, fmt.Sprintf("estimated rows %s -> %s", printable.Rows(a.PlanRows), printable.Rows(b.PlanRows)))
	}
	if measured {
		if ra, rb := a.Figures.TotalRows, b.Figures.TotalRows; ra != rb {
			p.Changes = append(p.Changes, fmt.Sprintf("rows %s -> %s", printable.Rows(ra), printable.Rows(rb)))
		}
		if la, lb := a.ActualLoops, b.ActualLoops; la != lb {
			p.Changes = append(p.Changes, fmt.Sprintf("loops %s -> %s", printable.Rows(la), printable.Rows(lb)))
		}
		if ta, tb := a.Figures.InclusiveMS, b.Figures.InclusiveMS; math.Abs(ta-tb) >= 0.1*math.Max(ta, tb) && math.Abs(ta-tb) >= 0.05 {
			p.Changes = append(p.Changes, fmt.Sprintf("time %s -> %s", printable.MS(ta), printable.MS(tb)))
		}
	}
	if ba, bb := a.Buffers.Total(), b.Buffers.Total(); ba != bb && (ba > 0 || bb > 0) {
		p.Changes = append(p.Changes, fmt.Sprintf("buffers %s -> %s", printable.Rows(float64(ba)), printable.Rows(float64(bb))))
	}
	if (a.SortSpaceType == "Disk") != (b.SortSpaceType == "Disk") || a.HashBatches != b.HashBatches && math.Max(a.HashBatches, b.HashBatches) > 1 {
		p.Changes = append(p.Changes, fmt.Sprintf("spill %s -> %s", spill(a), spill(b)))
	}
	return p
}

func spill(n *Node) string {
	switch {
	case n.SortSpaceType == "Disk":
		return "sort on disk"
	case n.HashBatches > 1:
		return fmt.Sprintf("%.0f hash batches", n.HashBatches)
	}
	return "in memory"
}

// decide names the difference that explains most of the gap: the aligned
// node whose own time moved most, a node only one plan has, JIT, or
// planning time.
func (d *Diff) decide() {
	unit := func(x float64) string {
		if d.Measured {
			return printable.MS(x)
		}
		return fmt.Sprintf("cost %s", printable.Rows(x))
	}
	type cand struct {
		delta float64 // B minus A
		text  string
	}
	var cands []cand
	for _, p := range d.Pairs {
		if p.Delta == 0 {
			continue
		}
		what := p.A.Label()
		if len(p.Changes) > 0 && strings.Contains(p.Changes[0], " became ") {
			what = p.Changes[0]
		}
		cands = append(cands, cand{p.Delta, fmt.Sprintf("%s (%s -> %s)", what, unit(self(p.A, d.Measured)), unit(self(p.B, d.Measured)))})
	}
	for _, n := range d.OnlyA {
		cands = append(cands, cand{-self(n, d.Measured), fmt.Sprintf("%s is gone (%s in A)", n.Label(), unit(self(n, d.Measured)))})
	}
	for _, n := range d.OnlyB {
		cands = append(cands, cand{self(n, d.Measured), fmt.Sprintf("%s is new (%s in B)", n.Label(), unit(self(n, d.Measured)))})
	}
	if d.Measured && d.JITms[0] != d.JITms[1] {
		text := fmt.Sprintf("JIT compilation %s -> %s", printable.MS(d.JITms[0]), printable.MS(d.JITms[1]))
		if d.JITms[1] == 0 {
			text = fmt.Sprintf("JIT compilation (%s) disappeared", printable.MS(d.JITms[0]))
		} else if d.JITms[0] == 0 {
			text = fmt.Sprintf("JIT compilation (%s) appeared", printable.MS(d.JITms[1]))
		}
		// JIT time is inside the nodes' times too; count it as its own
		// cause only when it outweighs them.
		cands = append(cands, cand{d.JITms[1] - d.JITms[0], text})
	}
	sort.SliceStable(cands, func(i, j int) bool { return math.Abs(cands[i].delta) > math.Abs(cands[j].delta) })
	gap := d.TotalB - d.TotalA
	faster, slower, ratio := "B", "A", 0.0
	if gap > 0 {
		faster, slower = "A", "B"
	}
	lo, hi := math.Min(d.TotalA, d.TotalB), math.Max(d.TotalA, d.TotalB)
	if lo > 0 {
		ratio = hi / lo
	}
	if len(cands) > 0 {
		d.Decisive = cands[0].text
	}
	switch {
	case ratio < 1.1 && math.Abs(gap) < 1:
		d.Summary = fmt.Sprintf("A and B take about the same (%s vs %s)", unit(d.TotalA), unit(d.TotalB))
	case ratio > 0:
		d.Summary = fmt.Sprintf("%s is %.1fx faster than %s (%s vs %s)", faster, ratio, slower, unit(math.Min(d.TotalA, d.TotalB)), unit(math.Max(d.TotalA, d.TotalB)))
	default:
		d.Summary = fmt.Sprintf("%s is faster (%s vs %s)", faster, unit(d.TotalA), unit(d.TotalB))
	}
	if !d.Measured {
		d.Summary = strings.Replace(d.Summary, "faster", "cheaper by planner cost", 1) + " (plans without ANALYZE timing are compared on cost)"
	}
	if d.Decisive != "" {
		d.Summary += ": " + d.Decisive
	}
	if len(d.Settings) > 0 {
		var s []string
		for _, x := range d.Settings {
			s = append(s, fmt.Sprintf("%s %s -> %s", x.Name, x.A, x.B))
		}
		d.Summary += "; settings differ: " + strings.Join(s, ", ")
	}
}
