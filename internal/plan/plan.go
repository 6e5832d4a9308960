// Package plan models PostgreSQL EXPLAIN output. It is I/O-free: the parsers
// take bytes and return the model, and both of them (JSON and TEXT) fill the
// same fields, so everything downstream ignores which one the user pasted.
package plan

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Explain is one EXPLAIN result.
type Explain struct {
	Plan Node
	// Format is "json" or "text": what the input was.
	Format      string
	PlanningMS  float64
	ExecutionMS float64
	// HasPlanningTime is false when EXPLAIN printed no "Planning Time"
	// (plain EXPLAIN without SUMMARY).
	HasPlanningTime bool
	// HasAnalyze says the plan carries actual figures (EXPLAIN ANALYZE or
	// auto_explain with log_analyze).
	HasAnalyze bool
	// HasTiming is false for ANALYZE with TIMING OFF: rows but no times.
	HasTiming  bool
	HasBuffers bool
	// Settings are the non-default planner settings EXPLAIN (SETTINGS)
	// printed (PostgreSQL 12+).
	Settings map[string]string
	JIT      *JIT
	// PlanningBuffers are the buffers used while planning (PostgreSQL 13+).
	PlanningBuffers Buffers
	Triggers        []Trigger
	QueryID         string
}

// Node is one plan node. Actual figures are zero without ANALYZE; times and
// rows are per loop, as EXPLAIN prints them.
type Node struct {
	NodeType string // as EXPLAIN (FORMAT JSON) names it: "Aggregate", "Hash Join"
	// Strategy is Plain/Sorted/Hashed/Mixed for Aggregate and SetOp.
	Strategy    string
	PartialMode string // Partial/Finalize for parallel aggregation
	JoinType    string // Inner, Left, Full, Right, Semi, Anti, Right Anti
	Operation   string // Insert/Update/Delete/Merge for ModifyTable and a modifying Foreign Scan
	Command     string // Intersect/Except for SetOp
	// ScanDirection is "Backward" for a backward index scan.
	ScanDirection string
	// ParentRelationship is Outer, Inner, Member, InitPlan, SubPlan, ...
	ParentRelationship string
	SubplanName        string // "InitPlan 1 (returns $0)", "SubPlan 2", "CTE x"
	ParallelAware      bool
	CustomProvider     string // Custom Scan (Provider)

	RelationName string
	Schema       string // only with VERBOSE
	// Targets are a ModifyTable's result relations when they differ from
	// the nominal one: the partitions an UPDATE on a partitioned table
	// writes ("Update on public.ta1 ta_1" lines in TEXT).
	Targets      []Target
	Alias        string
	IndexName    string
	FunctionName string
	CTEName      string

	StartupCost float64
	TotalCost   float64
	PlanRows    float64
	PlanWidth   int

	ActualStartupMS float64
	ActualTotalMS   float64
	ActualRows      float64
	ActualLoops     float64
	// NeverExecuted marks a node EXPLAIN ANALYZE printed as "never executed".
	NeverExecuted bool

	Output        []string
	Filter        string
	IndexCond     string
	RecheckCond   string
	JoinFilter    string
	HashCond      string
	MergeCond     string
	OneTimeFilter string
	SortKey       []string
	GroupKey      []string

	RowsRemovedByFilter       float64
	RowsRemovedByJoinFilter   float64
	RowsRemovedByIndexRecheck float64
	HeapFetches               float64
	ExactHeapBlocks           float64
	LossyHeapBlocks           float64

	SortMethod    string
	SortSpaceKB   float64
	SortSpaceType string // Memory or Disk

	HashBuckets         float64
	OriginalHashBuckets float64
	HashBatches         float64
	OriginalHashBatches float64
	// PeakMemoryKB is the Hash node's peak memory or HashAggregate's.
	PeakMemoryKB float64
	// HashAgg spill (PostgreSQL 13+).
	HashAggBatches float64
	DiskUsageKB    float64

	WorkersPlanned  int
	WorkersLaunched int
	Workers         []Worker

	Buffers Buffers
	IO      IOTiming
	WAL     WAL

	Plans []Node

	Figures Figures
}

// Target is one result relation of a ModifyTable node.
type Target struct {
	Schema, Relation, Alias string
}

// Worker is what EXPLAIN printed per parallel worker for a node.
type Worker struct {
	Number        int
	SortMethod    string
	SortSpaceKB   float64
	SortSpaceType string
}

// Buffers are block counts (8 kB each by default).
type Buffers struct {
	SharedHit, SharedRead, SharedDirtied, SharedWritten int64
	LocalHit, LocalRead, LocalDirtied, LocalWritten     int64
	TempRead, TempWritten                               int64
}

// Total is every block the node touched.
func (b Buffers) Total() int64 {
	t := int64(0)
	for _, x := range []int64{b.SharedHit, b.SharedRead, b.LocalHit, b.LocalRead, b.TempRead, b.TempWritten} {
		t = satAdd(t, x)
	}
	return t
}

// IOTiming is read/write time in ms (track_io_timing). PostgreSQL 16 split
// it by shared/local/temp; older versions print one read and write time,
// which lands in Shared.
type IOTiming struct {
	SharedReadMS, SharedWriteMS float64
	LocalReadMS, LocalWriteMS   float64
	TempReadMS, TempWriteMS     float64
}

// TotalMS is all I/O time.
func (t IOTiming) TotalMS() float64 {
	return math.Min(math.MaxFloat64, t.SharedReadMS+t.SharedWriteMS+t.LocalReadMS+t.LocalWriteMS+t.TempReadMS+t.TempWriteMS)
}

// WAL is EXPLAIN (WAL) output (PostgreSQL 13+).
type WAL struct {
	Records, FPI, Bytes int64
}

// Trigger is one "Trigger name: time=.. calls=.." line. Foreign-key
// checks print "Trigger for constraint name" in TEXT, which names the
// constraint and not the (generated) trigger.
type Trigger struct {
	Name       string
	Constraint string
	TimeMS     float64
	Calls      float64
}

// JIT is the top-level JIT block of EXPLAIN.
type JIT struct {
	Functions    int
	Inlining     bool
	Optimization bool
	Expressions  bool
	Deforming    bool
	// TimingMS is nil when EXPLAIN ran without ANALYZE or TIMING.
	TimingMS *JITTiming
}

// JITTiming is in milliseconds. Since PostgreSQL 17, Generation includes a
// separately printed Deform part; Generation is always the total.
type JITTiming struct {
	Generation, Deform, Inlining, Optimization, Emission, Total float64
}

// Figures are derived from the raw node by Derive: what the node cost.
type Figures struct {
	// ID numbers nodes depth first from 1, as plan visualisers do.
	ID int
	// InclusiveMS is the node's time including its children, over all
	// loops, divided among parallel participants (wall clock, not CPU).
	InclusiveMS float64
	// ExclusiveMS is InclusiveMS minus the children's.
	ExclusiveMS float64
	// Share is ExclusiveMS as a fraction of the execution time.
	Share float64
	// TotalRows is ActualRows x ActualLoops.
	TotalRows float64
	// Misestimate is how far the planner's row estimate was off (>= 1),
	// and Under says the planner guessed too few rows.
	Misestimate float64
	Under       bool
	// Parallel is true below a Gather / Gather Merge.
	Parallel bool
}

// Walk visits n and every node below it, depth first.
func (n *Node) Walk(visit func(n *Node, parent *Node)) {
	var rec func(x, parent *Node)
	rec = func(x, parent *Node) {
		visit(x, parent)
		for i := range x.Plans {
			rec(&x.Plans[i], x)
		}
	}
	rec(n, nil)
}

// Nodes returns every node depth first (pointers into the tree).
func (e *Explain) Nodes() []*Node {
	var out []*Node
	e.Plan.Walk(func(n, _ *Node) { out = append(out, n) })
	return out
}

// IsScan says whether the node reads a table.
func (n *Node) IsScan() bool { return n.RelationName != "" }

// Executed says whether the node ran at least once under ANALYZE.
func (n *Node) Executed() bool { return !n.NeverExecuted && n.ActualLoops > 0 }

// Label names the node the way EXPLAIN's text format does, e.g.
// "Parallel Seq Scan on public.orders o" or "Hash Left Join".
func (n *Node) Label() string {
	var b strings.Builder
	b.WriteString(n.Head())
	if n.IndexName != "" && n.NodeType != "Bitmap Index Scan" {
		b.WriteString(" using " + n.IndexName)
	}
	switch {
	case n.NodeType == "Bitmap Index Scan":
		b.WriteString(" on " + n.IndexName)
	case n.RelationName != "":
		b.WriteString(" on ")
		if n.Schema != "" {
			b.WriteString(n.Schema + ".")
		}
		b.WriteString(n.RelationName)
		if n.Alias != "" && n.Alias != n.RelationName {
			b.WriteString(" " + n.Alias)
		}
	case n.CTEName != "":
		b.WriteString(" on " + n.CTEName)
		if n.Alias != "" && n.Alias != n.CTEName {
			b.WriteString(" " + n.Alias)
		}
	case n.FunctionName != "":
		b.WriteString(" on " + n.FunctionName)
		if n.Alias != "" && n.Alias != n.FunctionName {
			b.WriteString(" " + n.Alias)
		}
	case n.Alias != "" && (n.NodeType == "Subquery Scan" || n.NodeType == "Values Scan" || n.NodeType == "WorkTable Scan"):
		b.WriteString(" on " + n.Alias)
	}
	return b.String()
}

// Head is the node's name without its relation: "Index Scan Backward",
// "Partial HashAggregate", "Nested Loop Anti Join", "Update".
func (n *Node) Head() string {
	name := n.NodeType
	switch n.NodeType {
	case "Aggregate":
		switch n.Strategy {
		case "Sorted":
			name = "GroupAggregate"
		case "Hashed":
			name = "HashAggregate"
		case "Mixed":
			name = "MixedAggregate"
		}
	case "SetOp":
		if n.Strategy == "Hashed" {
			name = "HashSetOp"
		}
		if n.Command != "" {
			name += " " + n.Command
		}
	case "ModifyTable":
		if n.Operation != "" {
			name = n.Operation
		}
	case "Custom Scan":
		if n.CustomProvider != "" {
			name += " (" + n.CustomProvider + ")"
		}
	case "Index Scan", "Index Only Scan":
		if n.ScanDirection == "Backward" {
			name += " Backward"
		}
	}
	if n.JoinType != "" && n.JoinType != "Inner" {
		if n.NodeType == "Nested Loop" {
			name += " " + n.JoinType + " Join"
		} else {
			name = strings.TrimSuffix(name, " Join") + " " + n.JoinType + " Join"
		}
	}
	if n.PartialMode != "" && n.PartialMode != "Simple" {
		name = n.PartialMode + " " + name
	}
	if n.ParallelAware {
		name = "Parallel " + name
	}
	return name
}

// ErrNotAPlan says the input is not EXPLAIN output.
var ErrNotAPlan = errors.New("not an EXPLAIN plan")

// ErrTruncated says the input stops in the middle of a plan.
var ErrTruncated = errors.New("the plan is truncated")

// maxDepth bounds recursion on hostile input; real plans are far shallower.
const maxDepth = 500

func tooDeep() error {
	return fmt.Errorf("plan nests deeper than %d nodes: %w", maxDepth, ErrNotAPlan)
}

// Tables lists the relations the plan's scans read, each once.
func (e *Explain) Tables() []string {
	var out []string
	seen := map[string]bool{}
	e.Plan.Walk(func(n, _ *Node) {
		if n.RelationName != "" && !seen[n.RelationName] {
			seen[n.RelationName] = true
			out = append(out, n.RelationName)
		}
	})
	return out
}
