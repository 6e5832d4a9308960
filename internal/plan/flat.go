package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/printable"
)

// Flat is a plan as a flat list of nodes (parent ids link them), with each
// node's figures derived: what the reports print and draw.
type Flat struct {
	InputFormat string            `json:"input_format"`
	Analyze     bool              `json:"analyze"`
	Timing      bool              `json:"timing"`
	Buffers     bool              `json:"buffers"`
	PlanningMS  float64           `json:"planning_ms"`
	ExecutionMS float64           `json:"execution_ms"`
	JITMS       float64           `json:"jit_ms"`
	Settings    map[string]string `json:"settings,omitempty"`
	Nodes       []FlatNode        `json:"nodes"`
}

// FlatNode is one node with its derived figures.
type FlatNode struct {
	ID          int     `json:"id"`
	Parent      int     `json:"parent"`
	Depth       int     `json:"depth"`
	Label       string  `json:"label"`
	Relation    string  `json:"relationship,omitempty"`
	Hot         bool    `json:"hot"`
	Cost        float64 `json:"total_cost"`
	PlanRows    float64 `json:"plan_rows"`
	ActualRows  float64 `json:"actual_rows"`
	Loops       float64 `json:"loops"`
	InclusiveMS float64 `json:"inclusive_ms"`
	ExclusiveMS float64 `json:"exclusive_ms"`
	Share       float64 `json:"share"`
	Misestimate float64 `json:"misestimate,omitempty"`
	Direction   string  `json:"estimate,omitempty"` // under or over
	Removed     float64 `json:"rows_removed,omitempty"`
	HeapFetches float64 `json:"heap_fetches,omitempty"`
	SharedHit   int64   `json:"shared_hit,omitempty"`
	SharedRead  int64   `json:"shared_read,omitempty"`
	TempBlocks  int64   `json:"temp_blocks,omitempty"`
	IOms        float64 `json:"io_ms,omitempty"`
	Spill       string  `json:"spill,omitempty"`
	Never       bool    `json:"never_executed,omitempty"`
	Detail      string  `json:"detail,omitempty"` // the node's condition
}

// Flatten flattens the plan into the rows the reports print: each node's
// own time, its share, rows planned and actual, and buffers.
func Flatten(e *Explain) Flat {
	s := Flat{InputFormat: e.Format, Analyze: e.HasAnalyze, Timing: e.HasTiming, Buffers: e.HasBuffers,
		PlanningMS: e.PlanningMS, ExecutionMS: e.ExecutionMS, Settings: e.Settings}
	size := 0
	e.Plan.Walk(func(*Node, *Node) { size++ })
	s.Nodes = make([]FlatNode, 0, size)
	if e.JIT != nil && e.JIT.TimingMS != nil {
		s.JITMS = e.JIT.TimingMS.Total
	}
	hot := e.HotPath()
	var rec func(n *Node, parent, depth int)
	rec = func(n *Node, parent, depth int) {
		f := n.Figures
		row := FlatNode{ID: f.ID, Parent: parent, Depth: depth, Label: n.Label(), Hot: hot[f.ID], Cost: n.TotalCost,
			PlanRows: n.PlanRows, ActualRows: n.ActualRows, Loops: n.ActualLoops,
			InclusiveMS: round(f.InclusiveMS, 3), ExclusiveMS: round(f.ExclusiveMS, 3), Share: round(f.Share, 4),
			Removed:     (n.RowsRemovedByFilter + n.RowsRemovedByJoinFilter + n.RowsRemovedByIndexRecheck) * max(n.ActualLoops, 1),
			HeapFetches: n.HeapFetches * max(n.ActualLoops, 1), SharedHit: n.Buffers.SharedHit, SharedRead: n.Buffers.SharedRead,
			TempBlocks: n.Buffers.TempRead + n.Buffers.TempWritten, IOms: round(n.IO.TotalMS(), 3), Never: n.NeverExecuted}
		if n.SubplanName != "" {
			row.Relation = n.SubplanName
		}
		if f.Misestimate >= 10 {
			row.Misestimate = round(f.Misestimate, 3)
			row.Direction = "over"
			if f.Under {
				row.Direction = "under"
			}
		}
		switch {
		case n.SortSpaceType == "Disk":
			row.Spill = fmt.Sprintf("sort %s on disk", printable.KB(n.SortSpaceKB))
		case n.HashBatches > 1:
			row.Spill = fmt.Sprintf("%.0f hash batches", n.HashBatches)
		case n.HashAggBatches > 1:
			row.Spill = fmt.Sprintf("%.0f hashagg batches, %s on disk", n.HashAggBatches, printable.KB(n.DiskUsageKB))
		case n.LossyHeapBlocks > 0:
			row.Spill = fmt.Sprintf("%.0f lossy pages", n.LossyHeapBlocks)
		}
		for _, c := range []struct{ k, v string }{{"Index Cond", n.IndexCond}, {"Filter", n.Filter}, {"Hash Cond", n.HashCond},
			{"Join Filter", n.JoinFilter}, {"Merge Cond", n.MergeCond}, {"Recheck Cond", n.RecheckCond}} {
			if c.v != "" && row.Detail == "" {
				row.Detail = c.k + ": " + c.v
			}
		}
		s.Nodes = append(s.Nodes, row)
		for i := range n.Plans {
			rec(&n.Plans[i], f.ID, depth+1)
		}
	}
	rec(&e.Plan, 0, 0)
	return s
}

// Shape writes a plan's nodes as one line, outermost first, children
// in parentheses: what changed when a statement got another plan, without
// its costs and row counts.
func Shape(e *Explain) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	var rec func(n *Node)
	rec = func(n *Node) {
		b.WriteString(n.Label())
		if len(n.Plans) == 0 {
			return
		}
		b.WriteString("(")
		for i := range n.Plans {
			if i > 0 {
				b.WriteString(", ")
			}
			rec(&n.Plans[i])
		}
		b.WriteString(")")
	}
	rec(&e.Plan)
	return b.String()
}

// round rounds a figure to places decimals, as model.Round does for the
// reports (plan imports nothing of pgmedic's model).
func round(x float64, places int) float64 {
	if math.Abs(x) >= 1e12 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	scale := math.Pow(10, float64(places))
	return math.Round(x*scale) / scale
}
