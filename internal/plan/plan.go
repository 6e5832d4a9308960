// Package plan models PostgreSQL EXPLAIN output. It is I/O-free: parsers take
// bytes and return the model.
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Explain is one EXPLAIN result.
type Explain struct {
	Plan        Node
	PlanningMS  float64
	ExecutionMS float64
	HasAnalyze  bool
	JIT         *JIT
}

// Node is a plan node (only what pgmedic reads so far).
type Node struct {
	NodeType     string
	TotalCost    float64
	PlanRows     float64
	RelationName string
	Schema       string // only with VERBOSE
	Alias        string
	IndexName    string
	Filter       string
	IndexCond    string
	RecheckCond  string
	SortKey      []string
	// Actual figures are zero without ANALYZE; ActualRows is per loop.
	ActualRows          float64
	ActualLoops         float64
	RowsRemovedByFilter float64
	SharedHitBlocks     int64
	SharedReadBlocks    int64
	Plans               []Node
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

// IsScan says whether the node reads a table.
func (n *Node) IsScan() bool { return n.RelationName != "" }

// JIT is the top-level JIT block of EXPLAIN.
type JIT struct {
	Functions    int
	Inlining     bool
	Optimization bool
	// TimingMS is nil when EXPLAIN ran without TIMING.
	TimingMS *JITTiming
}

// JITTiming is in milliseconds.
type JITTiming struct {
	Generation, Inlining, Optimization, Emission, Total float64
}

type rawExplain struct {
	Plan      *rawNode `json:"Plan"`
	Planning  *float64 `json:"Planning Time"`
	Execution *float64 `json:"Execution Time"`
	JIT       *rawJIT  `json:"JIT"`
}

type rawNode struct {
	NodeType     string    `json:"Node Type"`
	TotalCost    float64   `json:"Total Cost"`
	PlanRows     float64   `json:"Plan Rows"`
	RelationName string    `json:"Relation Name"`
	Schema       string    `json:"Schema"`
	Alias        string    `json:"Alias"`
	IndexName    string    `json:"Index Name"`
	Filter       string    `json:"Filter"`
	IndexCond    string    `json:"Index Cond"`
	RecheckCond  string    `json:"Recheck Cond"`
	SortKey      []string  `json:"Sort Key"`
	ActualRows   float64   `json:"Actual Rows"`
	ActualLoops  float64   `json:"Actual Loops"`
	Removed      float64   `json:"Rows Removed by Filter"`
	SharedHit    int64     `json:"Shared Hit Blocks"`
	SharedRead   int64     `json:"Shared Read Blocks"`
	Plans        []rawNode `json:"Plans"`
}

type rawJIT struct {
	Functions int             `json:"Functions"`
	Options   map[string]bool `json:"Options"`
	Timing    map[string]json.RawMessage
}

// ErrNotAPlan says the input is not EXPLAIN output.
var ErrNotAPlan = errors.New("not an EXPLAIN plan")

// ParseJSON reads EXPLAIN (FORMAT JSON) output: the array psql prints, a
// bare object, or either wrapped in the quotes of a copied psql cell.
func ParseJSON(b []byte) (*Explain, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("empty input: %w", ErrNotAPlan)
	}
	if b[0] == '"' {
		var inner string
		if err := json.Unmarshal(b, &inner); err != nil {
			return nil, fmt.Errorf("quoted plan is not valid JSON: %w", err)
		}
		b = bytes.TrimSpace([]byte(inner))
	}
	var one rawExplain
	switch {
	case len(b) > 0 && b[0] == '[':
		var arr []rawExplain
		if err := json.Unmarshal(b, &arr); err != nil {
			return nil, fmt.Errorf("plan JSON is malformed: %w", err)
		}
		if len(arr) == 0 {
			return nil, fmt.Errorf("empty JSON array: %w", ErrNotAPlan)
		}
		one = arr[0]
	case len(b) > 0 && b[0] == '{':
		if err := json.Unmarshal(b, &one); err != nil {
			return nil, fmt.Errorf("plan JSON is malformed: %w", err)
		}
	default:
		return nil, fmt.Errorf("input does not start with [ or {: %w", ErrNotAPlan)
	}
	if one.Plan == nil || strings.TrimSpace(one.Plan.NodeType) == "" {
		return nil, fmt.Errorf("no \"Plan\" with a \"Node Type\": %w", ErrNotAPlan)
	}
	e := &Explain{Plan: convert(*one.Plan, 0)}
	if one.Planning != nil {
		e.PlanningMS = *one.Planning
	}
	if one.Execution != nil {
		e.ExecutionMS, e.HasAnalyze = *one.Execution, true
	}
	if one.JIT != nil {
		j := &JIT{Functions: one.JIT.Functions, Inlining: one.JIT.Options["Inlining"], Optimization: one.JIT.Options["Optimization"]}
		if len(one.JIT.Timing) > 0 {
			t := &JITTiming{}
			for key, dst := range map[string]*float64{"Generation": &t.Generation, "Inlining": &t.Inlining,
				"Optimization": &t.Optimization, "Emission": &t.Emission, "Total": &t.Total} {
				*dst = timingValue(one.JIT.Timing[key])
			}
			j.TimingMS = t
		}
		e.JIT = j
	}
	return e, nil
}

// timingValue reads a JIT timing entry: a number, or since PostgreSQL 17 an
// object such as Generation {"Deform": x, "Total": y}.
func timingValue(raw json.RawMessage) float64 {
	if len(raw) == 0 {
		return 0
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return f
	}
	var obj map[string]float64
	if err := json.Unmarshal(raw, &obj); err == nil {
		return obj["Total"]
	}
	return 0
}

// maxDepth bounds recursion on hostile input; real plans are far shallower.
const maxDepth = 1000

func convert(r rawNode, depth int) Node {
	n := Node{NodeType: strings.TrimSpace(r.NodeType), TotalCost: r.TotalCost, PlanRows: r.PlanRows,
		RelationName: r.RelationName, Schema: r.Schema, Alias: r.Alias, IndexName: r.IndexName,
		Filter: r.Filter, IndexCond: r.IndexCond, RecheckCond: r.RecheckCond, SortKey: r.SortKey,
		ActualRows: r.ActualRows, ActualLoops: r.ActualLoops, RowsRemovedByFilter: r.Removed,
		SharedHitBlocks: r.SharedHit, SharedReadBlocks: r.SharedRead}
	if depth >= maxDepth {
		return n
	}
	for _, c := range r.Plans {
		n.Plans = append(n.Plans, convert(c, depth+1))
	}
	return n
}
