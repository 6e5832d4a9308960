package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The raw* types mirror EXPLAIN (FORMAT JSON). Keys that changed between
// PostgreSQL versions are all listed; absent keys stay zero.
type rawExplain struct {
	Plan      *rawNode               `json:"Plan"`
	Planning  *float64               `json:"Planning Time"`
	Execution *float64               `json:"Execution Time"`
	Settings  map[string]interface{} `json:"Settings"`
	JIT       *rawJIT                `json:"JIT"`
	// PostgreSQL 13+ prints planning buffers in their own object.
	PlanningInfo *rawBuffers  `json:"Planning"`
	Triggers     []rawTrigger `json:"Triggers"`
	QueryID      json.Number  `json:"Query Identifier"`
	TotalRuntime *float64     `json:"Total Runtime"` // before 9.4
}

type rawTrigger struct {
	Name       string  `json:"Trigger Name"`
	Constraint string  `json:"Constraint Name"`
	Time       float64 `json:"Time"`
	Calls      float64 `json:"Calls"`
}

type rawBuffers struct {
	SharedHit     int64 `json:"Shared Hit Blocks"`
	SharedRead    int64 `json:"Shared Read Blocks"`
	SharedDirtied int64 `json:"Shared Dirtied Blocks"`
	SharedWritten int64 `json:"Shared Written Blocks"`
	LocalHit      int64 `json:"Local Hit Blocks"`
	LocalRead     int64 `json:"Local Read Blocks"`
	LocalDirtied  int64 `json:"Local Dirtied Blocks"`
	LocalWritten  int64 `json:"Local Written Blocks"`
	TempRead      int64 `json:"Temp Read Blocks"`
	TempWritten   int64 `json:"Temp Written Blocks"`
	// Through PostgreSQL 15 the shared I/O times had no prefix.
	IORead        float64 `json:"I/O Read Time"`
	IOWrite       float64 `json:"I/O Write Time"`
	SharedIORead  float64 `json:"Shared I/O Read Time"`
	SharedIOWrite float64 `json:"Shared I/O Write Time"`
	LocalIORead   float64 `json:"Local I/O Read Time"`
	LocalIOWrite  float64 `json:"Local I/O Write Time"`
	TempIORead    float64 `json:"Temp I/O Read Time"`
	TempIOWrite   float64 `json:"Temp I/O Write Time"`
}

type rawNode struct {
	NodeType           string   `json:"Node Type"`
	Strategy           string   `json:"Strategy"`
	PartialMode        string   `json:"Partial Mode"`
	JoinType           string   `json:"Join Type"`
	Operation          string   `json:"Operation"`
	Command            string   `json:"Command"`
	ScanDirection      string   `json:"Scan Direction"`
	ParentRelationship string   `json:"Parent Relationship"`
	SubplanName        string   `json:"Subplan Name"`
	ParallelAware      bool     `json:"Parallel Aware"`
	CustomProvider     string   `json:"Custom Plan Provider"`
	RelationName       string   `json:"Relation Name"`
	Schema             string   `json:"Schema"`
	Alias              string   `json:"Alias"`
	IndexName          string   `json:"Index Name"`
	FunctionName       string   `json:"Function Name"`
	CTEName            string   `json:"CTE Name"`
	StartupCost        float64  `json:"Startup Cost"`
	TotalCost          float64  `json:"Total Cost"`
	PlanRows           float64  `json:"Plan Rows"`
	PlanWidth          int      `json:"Plan Width"`
	ActualStartup      float64  `json:"Actual Startup Time"`
	ActualTotal        float64  `json:"Actual Total Time"`
	ActualRows         *float64 `json:"Actual Rows"`
	ActualLoops        *float64 `json:"Actual Loops"`
	Output             []string `json:"Output"`
	Filter             string   `json:"Filter"`
	IndexCond          string   `json:"Index Cond"`
	RecheckCond        string   `json:"Recheck Cond"`
	JoinFilter         string   `json:"Join Filter"`
	HashCond           string   `json:"Hash Cond"`
	MergeCond          string   `json:"Merge Cond"`
	OneTimeFilter      string   `json:"One-Time Filter"`
	SortKey            []string `json:"Sort Key"`
	GroupKey           []string `json:"Group Key"`
	RemovedFilter      float64  `json:"Rows Removed by Filter"`
	RemovedJoinFilter  float64  `json:"Rows Removed by Join Filter"`
	RemovedRecheck     float64  `json:"Rows Removed by Index Recheck"`
	HeapFetches        float64  `json:"Heap Fetches"`
	ExactHeapBlocks    float64  `json:"Exact Heap Blocks"`
	LossyHeapBlocks    float64  `json:"Lossy Heap Blocks"`
	SortMethod         string   `json:"Sort Method"`
	SortSpaceUsed      float64  `json:"Sort Space Used"`
	SortSpaceType      string   `json:"Sort Space Type"`
	HashBuckets        float64  `json:"Hash Buckets"`
	OrigHashBuckets    float64  `json:"Original Hash Buckets"`
	HashBatches        float64  `json:"Hash Batches"`
	OrigHashBatches    float64  `json:"Original Hash Batches"`
	PeakMemory         float64  `json:"Peak Memory Usage"`
	HashAggBatches     float64  `json:"HashAgg Batches"`
	DiskUsage          float64  `json:"Disk Usage"`
	WorkersPlanned     int      `json:"Workers Planned"`
	WorkersLaunched    int      `json:"Workers Launched"`
	Workers            []struct {
		Number        int     `json:"Worker Number"`
		SortMethod    string  `json:"Sort Method"`
		SortSpaceUsed float64 `json:"Sort Space Used"`
		SortSpaceType string  `json:"Sort Space Type"`
	} `json:"Workers"`
	Targets []struct {
		Relation  string `json:"Relation Name"`
		Schema    string `json:"Schema"`
		Alias     string `json:"Alias"`
		Operation string `json:"Operation"`
	} `json:"Target Tables"`
	WALRecords int64 `json:"WAL Records"`
	WALFPI     int64 `json:"WAL FPI"`
	WALBytes   int64 `json:"WAL Bytes"`
	rawBuffers
	// Pointers: encoding/json grows the slice as it reads, and copying
	// pointers is cheaper than copying nodes.
	Plans []*rawNode `json:"Plans"`
}

type rawJIT struct {
	Functions int                        `json:"Functions"`
	Options   map[string]bool            `json:"Options"`
	Timing    map[string]json.RawMessage `json:"Timing"`
}

// ParseJSON reads EXPLAIN (FORMAT JSON) output: the array psql prints, a
// bare object, either wrapped in the quotes of a copied psql cell, or a
// psql result with its header and "+" continuation marks.
func ParseJSON(b []byte) (*Explain, error) {
	return parseJSON(unwrap(b))
}

// parseJSON reads JSON output already taken out of its paste (unwrap).
func parseJSON(b []byte) (*Explain, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("empty input: %w", ErrNotAPlan)
	}
	if b[0] == '"' {
		var inner string
		if err := json.Unmarshal(b, &inner); err == nil {
			b = bytes.TrimSpace([]byte(inner))
		} else if cell, ok := csvCell(b); ok {
			b = bytes.TrimSpace(cell)
		} else {
			return nil, jsonError("quoted plan", b, err)
		}
	}
	one, root, err := decodeFirst(b)
	if err != nil {
		return nil, err
	}
	e := &Explain{Plan: root, Format: "json"}
	if one.Planning != nil {
		e.PlanningMS, e.HasPlanningTime = *one.Planning, true
	}
	if one.Execution == nil && one.TotalRuntime != nil {
		one.Execution = one.TotalRuntime
	}
	if one.Execution != nil {
		e.ExecutionMS = *one.Execution
	}
	if one.PlanningInfo != nil {
		e.PlanningBuffers = one.PlanningInfo.buffers()
	}
	if len(one.Settings) > 0 {
		e.Settings = map[string]string{}
		for k, v := range one.Settings {
			e.Settings[k] = fmt.Sprint(v)
		}
	}
	for _, t := range one.Triggers {
		e.Triggers = append(e.Triggers, Trigger{Name: t.Name, Constraint: t.Constraint, TimeMS: t.Time, Calls: t.Calls})
	}
	e.QueryID = one.QueryID.String()
	if one.JIT != nil {
		j := &JIT{Functions: one.JIT.Functions, Inlining: one.JIT.Options["Inlining"], Optimization: one.JIT.Options["Optimization"],
			Expressions: one.JIT.Options["Expressions"], Deforming: one.JIT.Options["Deforming"]}
		if len(one.JIT.Timing) > 0 {
			t := &JITTiming{}
			t.Generation, t.Deform = timingValue(one.JIT.Timing["Generation"])
			t.Inlining, _ = timingValue(one.JIT.Timing["Inlining"])
			t.Optimization, _ = timingValue(one.JIT.Timing["Optimization"])
			t.Emission, _ = timingValue(one.JIT.Timing["Emission"])
			t.Total, _ = timingValue(one.JIT.Timing["Total"])
			j.TimingMS = t
		}
		e.JIT = j
	}
	if err := e.finish(one.Execution != nil, nil); err != nil {
		return nil, err
	}
	return e, nil
}

// decodeFirst decodes the plan in one pass over the input: the first
// element of psql's array, or a bare object. (Decoding the array into raw
// messages first, and each node's children from raw messages after,
// scanned a deep plan's bytes once per nesting level.)
// It returns the plan's root apart from the rest (one.Plan is not set).
func decodeFirst(b []byte) (one rawExplain, root Node, err error) {
	if one, root, err = fastDecodeFirst(b); err == nil {
		return one, root, nil
	}
	return slowDecodeFirst(b)
}

// slowDecodeFirst is decodeFirst by encoding/json: for what the fast
// reader leaves to it, and for the error messages.
func slowDecodeFirst(b []byte) (rawExplain, Node, error) {
	one, err := slowDecodeRaw(b)
	if err != nil {
		return one, Node{}, err
	}
	if one.Plan == nil || strings.TrimSpace(one.Plan.NodeType) == "" {
		return one, Node{}, fmt.Errorf("no \"Plan\" with a \"Node Type\": %w", ErrNotAPlan)
	}
	root, err := convert(one.Plan, 0)
	one.Plan = nil
	return one, root, err
}

func slowDecodeRaw(b []byte) (rawExplain, error) {
	var arr []rawExplain
	var err error
	switch {
	case len(b) > 0 && b[0] == '[':
		err = json.Unmarshal(b, &arr)
	case len(b) > 0 && b[0] == '{':
		arr = make([]rawExplain, 1)
		err = json.Unmarshal(b, &arr[0])
	default:
		return rawExplain{}, fmt.Errorf("input does not start with [ or {: %w", ErrNotAPlan)
	}
	if err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) {
			return rawExplain{}, jsonError("plan JSON", b, err)
		}
		return rawExplain{}, fmt.Errorf("plan JSON has the wrong shape (%v): %w", err, ErrNotAPlan)
	}
	if len(arr) == 0 {
		return rawExplain{}, fmt.Errorf("empty JSON array: %w", ErrNotAPlan)
	}
	return arr[0], nil
}

// jsonError turns encoding/json's complaint into one line that says where.
func jsonError(what string, b []byte, err error) error {
	var syn *json.SyntaxError
	if errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &syn) && syn.Offset >= int64(len(b)) && !strings.HasPrefix(syn.Error(), "invalid character")) ||
		strings.Contains(err.Error(), "unexpected end of JSON input") {
		return fmt.Errorf("%s stops after %d bytes, before its closing brackets; copy the whole EXPLAIN output: %w", what, len(b), ErrTruncated)
	}
	if errors.As(err, &syn) {
		line := 1 + bytes.Count(b[:min(int(syn.Offset), len(b))], []byte("\n"))
		return fmt.Errorf("%s is malformed at line %d: %v: %w", what, line, err, ErrNotAPlan)
	}
	return fmt.Errorf("%s is malformed: %v: %w", what, err, ErrNotAPlan)
}

// timingValue reads a JIT timing entry: a number, or since PostgreSQL 17 an
// object such as Generation {"Deform": x, "Total": y}.
func timingValue(raw json.RawMessage) (total, deform float64) {
	if len(raw) == 0 {
		return 0, 0
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return f, 0
	}
	var obj map[string]float64
	if err := json.Unmarshal(raw, &obj); err == nil {
		return obj["Total"], obj["Deform"]
	}
	return 0, 0
}

func (r *rawBuffers) buffers() Buffers {
	return Buffers{SharedHit: r.SharedHit, SharedRead: r.SharedRead, SharedDirtied: r.SharedDirtied, SharedWritten: r.SharedWritten,
		LocalHit: r.LocalHit, LocalRead: r.LocalRead, LocalDirtied: r.LocalDirtied, LocalWritten: r.LocalWritten,
		TempRead: r.TempRead, TempWritten: r.TempWritten}
}

func (r *rawBuffers) io() IOTiming {
	t := IOTiming{SharedReadMS: r.SharedIORead + r.IORead, SharedWriteMS: r.SharedIOWrite + r.IOWrite,
		LocalReadMS: r.LocalIORead, LocalWriteMS: r.LocalIOWrite, TempReadMS: r.TempIORead, TempWriteMS: r.TempIOWrite}
	return t
}

// convert copies the decoded tree into Nodes. encoding/json refuses
// nesting beyond 10,000 levels by itself, so a hostile input cannot
// exhaust the stack while decoding; plans deeper than maxDepth are
// refused here.
func convert(r *rawNode, depth int) (Node, error) {
	n, err := convertFields(r)
	if err != nil {
		return n, err
	}
	if len(r.Plans) > 0 && depth >= maxDepth {
		return n, tooDeep()
	}
	if len(r.Plans) > 0 {
		n.Plans = make([]Node, 0, len(r.Plans))
	}
	for _, c := range r.Plans {
		if c == nil {
			return n, fmt.Errorf("a plan node under %q is null: %w", n.NodeType, ErrNotAPlan)
		}
		child, err := convert(c, depth+1)
		if err != nil {
			return n, err
		}
		n.Plans = append(n.Plans, child)
	}
	return n, nil
}

// convertFields is convert without the children.
func convertFields(r *rawNode) (Node, error) {
	n := Node{NodeType: strings.TrimSpace(r.NodeType), Strategy: r.Strategy, PartialMode: r.PartialMode, JoinType: r.JoinType,
		Operation: r.Operation, Command: r.Command, ScanDirection: r.ScanDirection, ParentRelationship: r.ParentRelationship,
		SubplanName: r.SubplanName, ParallelAware: r.ParallelAware, CustomProvider: r.CustomProvider,
		RelationName: r.RelationName, Schema: r.Schema, Alias: r.Alias, IndexName: r.IndexName, FunctionName: r.FunctionName,
		CTEName: r.CTEName, StartupCost: r.StartupCost, TotalCost: r.TotalCost, PlanRows: r.PlanRows, PlanWidth: r.PlanWidth,
		ActualStartupMS: r.ActualStartup, ActualTotalMS: r.ActualTotal,
		Output: r.Output, Filter: r.Filter, IndexCond: r.IndexCond, RecheckCond: r.RecheckCond, JoinFilter: r.JoinFilter,
		HashCond: r.HashCond, MergeCond: r.MergeCond, OneTimeFilter: r.OneTimeFilter, SortKey: r.SortKey, GroupKey: r.GroupKey,
		RowsRemovedByFilter: r.RemovedFilter, RowsRemovedByJoinFilter: r.RemovedJoinFilter, RowsRemovedByIndexRecheck: r.RemovedRecheck,
		HeapFetches: r.HeapFetches, ExactHeapBlocks: r.ExactHeapBlocks, LossyHeapBlocks: r.LossyHeapBlocks,
		SortMethod: r.SortMethod, SortSpaceKB: r.SortSpaceUsed, SortSpaceType: r.SortSpaceType,
		HashBuckets: r.HashBuckets, OriginalHashBuckets: r.OrigHashBuckets, HashBatches: r.HashBatches, OriginalHashBatches: r.OrigHashBatches,
		PeakMemoryKB: r.PeakMemory, HashAggBatches: r.HashAggBatches, DiskUsageKB: r.DiskUsage,
		WorkersPlanned: r.WorkersPlanned, WorkersLaunched: r.WorkersLaunched,
		Buffers: r.rawBuffers.buffers(), IO: r.rawBuffers.io(),
		WAL: WAL{Records: r.WALRecords, FPI: r.WALFPI, Bytes: r.WALBytes}}
	if r.ActualRows != nil {
		n.ActualRows = *r.ActualRows
	}
	if r.ActualLoops != nil {
		n.ActualLoops = *r.ActualLoops
		n.NeverExecuted = *r.ActualLoops == 0
	}
	for _, t := range r.Targets {
		n.Targets = append(n.Targets, Target{Schema: t.Schema, Relation: t.Relation, Alias: t.Alias})
	}
	for _, w := range r.Workers {
		if w.SortMethod == "" && w.SortSpaceType == "" {
			continue
		}
		n.Workers = append(n.Workers, Worker{Number: w.Number, SortMethod: w.SortMethod, SortSpaceKB: w.SortSpaceUsed, SortSpaceType: w.SortSpaceType})
	}
	if n.NodeType == "" {
		return n, fmt.Errorf("a plan node has no \"Node Type\": %w", ErrNotAPlan)
	}
	return n, nil
}
