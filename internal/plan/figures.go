package plan

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// Parse reads a plan in either format: JSON when the input starts with
// [, { or a quote (after psql's decorations), TEXT otherwise.
func Parse(b []byte) (*Explain, error) {
	// A JSON plan as EXPLAIN wrote it (the common case, and the largest
	// inputs: psql indents every nesting level) is read as it is; only
	// when that fails is it looked at as a paste.
	if raw := bytes.TrimSpace(b); len(raw) > 0 && (raw[0] == '[' || raw[0] == '{') {
		if e, err := parseJSON(raw); err == nil {
			return e, nil
		}
	}
	lines := unwrapLines(b)
	first := ""
	for _, l := range lines {
		if first = strings.TrimSpace(l); first != "" {
			break
		}
	}
	if first == "" {
		return nil, fmt.Errorf("the input is empty: %w", ErrNotAPlan)
	}
	switch first[0] {
	case '[', '{', '"':
		return parseJSON(bytes.TrimSpace([]byte(strings.Join(lines, "\n"))))
	}
	// Leading spaces are kept: the first node's column is the baseline
	// the TEXT parser measures every other line against.
	return parseTextLines(lines)
}

// finish normalises what the two formats spell differently, derives the
// per-node figures and checks every number once (lineOf: see checkNumbers).
func (e *Explain) finish(sawExecution bool, lineOf func(id int) int) error {
	e.Plan.Walk(func(n, _ *Node) {
		if n.PartialMode == "Simple" {
			n.PartialMode = ""
		}
		// Only a backward scan is named in TEXT; JSON also says Forward
		// or NoMovement (an index scan ordered by a distance operator).
		if n.ScanDirection != "Backward" {
			n.ScanDirection = ""
		}
		// JSON names a plain foreign scan's operation Select.
		if n.NodeType == "Foreign Scan" && n.Operation == "Select" {
			n.Operation = ""
		}
		if n.NeverExecuted || n.ActualLoops > 0 {
			e.HasAnalyze = true
		}
		if n.ActualTotalMS > 0 || n.ActualStartupMS > 0 {
			e.HasTiming = true
		}
		if n.Buffers.Total() > 0 || n.Buffers.SharedDirtied+n.Buffers.SharedWritten > 0 {
			e.HasBuffers = true
		}
	})
	if sawExecution {
		e.HasAnalyze = true
	}
	e.Derive()
	return e.checkNumbers(lineOf)
}

// Derive computes each node's Figures. Times follow depesz and pev2:
// EXPLAIN prints per-loop averages, so a node's time is multiplied by its
// loops; below a Gather the loops are spread over the workers and the
// leader, so the product is divided by the number of participants to get
// wall-clock time.
func (e *Explain) Derive() {
	id := 0
	var rec func(n *Node, participants float64, parallel bool)
	rec = func(n *Node, participants float64, parallel bool) {
		id++
		f := &n.Figures
		*f = Figures{ID: id, Parallel: parallel}
		if n.NodeType == "Gather" || n.NodeType == "Gather Merge" {
			p := float64(n.WorkersLaunched)
			if p == 0 {
				p = float64(n.WorkersPlanned)
			}
			participants, parallel = p+1, true
		}
		for i := range n.Plans {
			rec(&n.Plans[i], participants, parallel)
		}
		f.TotalRows = satMul(n.ActualRows, n.ActualLoops)
		loops := n.ActualLoops
		if parallel && n.NodeType != "Gather" && n.NodeType != "Gather Merge" && participants > 1 {
			loops = math.Max(1, loops/participants)
		}
		f.InclusiveMS = satMul(n.ActualTotalMS, loops)
		f.ExclusiveMS = f.InclusiveMS
		for i := range n.Plans {
			c := &n.Plans[i]
			// An InitPlan runs once, before its parent produces a row, and
			// its time is counted in the parent's; so is every child's.
			f.ExclusiveMS -= c.Figures.InclusiveMS
		}
		f.ExclusiveMS = math.Max(0, f.ExclusiveMS)
		if n.Executed() && e.HasAnalyze {
			est, act := math.Max(n.PlanRows, 1), math.Max(n.ActualRows, 1)
			// PostgreSQL rounds estimates to at least one row and prints
			// per-loop actual rows rounded down (before 18), so a node
			// expected to return 0.4 rows per loop shows 0.
			f.Misestimate, f.Under = est/act, act > est
			if act > est {
				f.Misestimate = act / est
			}
		}
	}
	rec(&e.Plan, 1, false)
	// A CTE Scan pulls its rows from the CTE's subplan, whose time EXPLAIN
	// also prints under the "CTE name" node: take it out of the scan's own
	// time so it is not counted twice.
	cte := map[string]float64{}
	e.Plan.Walk(func(n, _ *Node) {
		if name, ok := strings.CutPrefix(n.SubplanName, "CTE "); ok {
			cte[name] = n.Figures.InclusiveMS
		}
	})
	e.Plan.Walk(func(n, _ *Node) {
		if n.NodeType == "CTE Scan" {
			n.Figures.ExclusiveMS = math.Max(0, n.Figures.ExclusiveMS-cte[n.CTEName])
		}
	})
	total := e.ExecutionMS
	if total <= 0 {
		total = e.Plan.Figures.InclusiveMS
	}
	e.Plan.Walk(func(n, _ *Node) {
		if total > 0 {
			n.Figures.Share = math.Min(1, n.Figures.ExclusiveMS/total)
		}
	})
}

// Children returns the node's inputs: its children without the InitPlans
// and SubPlans hanging off it (a join's outer and inner side, a Limit's
// source).
func (n *Node) Children() []*Node {
	var out []*Node
	for i := range n.Plans {
		c := &n.Plans[i]
		if c.ParentRelationship != "InitPlan" && c.ParentRelationship != "SubPlan" {
			out = append(out, c)
		}
	}
	return out
}

// TotalMS is the time the plan cost: execution, or the root's time when
// EXPLAIN printed no execution time (auto_explain).
func (e *Explain) TotalMS() float64 {
	if e.ExecutionMS > 0 {
		return e.ExecutionMS
	}
	return e.Plan.Figures.InclusiveMS
}

// HotPath returns the node IDs from the root along the child that took
// the most time at each step, as long as that child holds at least a tenth
// of the total: where the time went.
func (e *Explain) HotPath() map[int]bool {
	hot := map[int]bool{}
	if !e.HasTiming {
		return hot
	}
	n := &e.Plan
	floor := 0.1 * e.TotalMS()
	for {
		hot[n.Figures.ID] = true
		var next *Node
		for i := range n.Plans {
			c := &n.Plans[i]
			if c.Figures.InclusiveMS > 0 && c.Figures.InclusiveMS >= floor && (next == nil || c.Figures.InclusiveMS > next.Figures.InclusiveMS) {
				next = c
			}
		}
		if next == nil {
			return hot
		}
		n = next
	}
}
