package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseText reads EXPLAIN's default TEXT format, as psql prints it or as
// people paste it: with or without psql's header, footer and the leading
// space, with or without ANALYZE, BUFFERS, VERBOSE, SETTINGS, WAL.
//
// EXPLAIN indents a node's detail lines two columns right of the node's
// name, and a child's "->" at that same column; InitPlan/SubPlan/CTE
// headers sit at the detail column with their child two columns further.
// The parser follows exactly that, so a plan whose indentation was mangled
// is refused rather than silently re-parented.
func ParseText(b []byte) (*Explain, error) {
	return parseTextLines(unwrapLines(b))
}

// parseTextLines reads TEXT output already taken out of its paste
// (unwrapLines), line by line.
func parseTextLines(lines []string) (*Explain, error) {
	p := &textParser{e: &Explain{Format: "text"}, lines: lines}
	for i, raw := range lines {
		p.line = i + 1
		if err := p.feed(strings.TrimRight(raw, " \t\r")); err != nil {
			return nil, fmt.Errorf("line %d: %w", p.line, err)
		}
	}
	if p.root == nil {
		return nil, fmt.Errorf("no plan node found (a TEXT plan starts with a node such as \"Seq Scan on t  (cost=...)\"): %w", ErrNotAPlan)
	}
	p.e.Plan = *p.root
	// Keep workers only for what JSON also keeps them for: sort space.
	p.e.Plan.Walk(func(n, _ *Node) {
		kept := n.Workers[:0]
		for _, w := range n.Workers {
			if w.SortMethod != "" {
				kept = append(kept, w)
			}
		}
		n.Workers = kept
		if len(kept) == 0 {
			n.Workers = nil
		}
	})
	lineOf := func(id int) int {
		if id >= 1 && id <= len(p.nodeLines) {
			return p.nodeLines[id-1]
		}
		return 0
	}
	if err := p.e.finish(p.sawExecution, lineOf); err != nil {
		return nil, err
	}
	return p.e, nil
}

type frame struct {
	node *Node
	// detail is the column of this node's detail lines and children.
	detail int
	// rel is the Parent Relationship a header line (InitPlan, SubPlan, CTE)
	// gives the next child at this frame's column.
	rel, subplan string
}

type textParser struct {
	e            *Explain
	root         *Node
	stack        []frame
	rootIndent   int
	line         int
	block        string // "", "Planning", "JIT", "worker", "skip"
	worker       *Node  // the node whose last Worker the "worker" block fills
	blockIndent  int
	treeDone     bool
	sawExecution bool
	// nodeLines holds each node's line number in creation order, which is
	// the depth-first order of Figures.ID.
	nodeLines []int
	// rootChecked is set once the line after the root has been seen.
	rootChecked bool
	scratch     Node
	lines       []string
}

// siblingsAfter counts the nodes after the current line whose arrow
// stands at col, or two further under a subplan header at col: the
// children still to come of the node whose child is at col. It stops at
// the first line left of col. Only a slice's size depends on it.
func (p *textParser) siblingsAfter(col int) int {
	n := 0
	for _, l := range p.lines[min(p.line, len(p.lines)):] {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		ind := indentOf(l)
		if ind < col {
			break
		}
		if (ind == col || ind == col+2) && strings.HasPrefix(t, "->") {
			n++
		}
	}
	return n
}

// indentOf is a line's indentation. EXPLAIN indents with spaces only; a
// tab comes from an editor or a chat client that turned a run of spaces
// into one, and the pastes seen in the wild replaced four.
func indentOf(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// feed reads one line of TEXT-format EXPLAIN: a node (an arrow, or the
// root), a detail line of the node above, a subplan header, or the
// summary lines after the tree.
func (p *textParser) feed(line string) error {
	text := strings.TrimSpace(line)
	if text == "" {
		return nil
	}
	ind := indentOf(line)
	if p.root == nil {
		n := &Node{}
		ok, err := parseHeader(n, text, true)
		if err != nil {
			return err
		}
		if !ok {
			if len(text) > 60 {
				text = text[:60] + "..."
			}
			return fmt.Errorf("%q is not a plan node (a TEXT plan starts with a node such as \"Seq Scan on t  (cost=...)\"): %w", text, ErrNotAPlan)
		}
		p.root = n
		p.nodeLines = append(p.nodeLines, p.line)
		p.rootIndent = ind
		p.stack = []frame{{node: n, detail: ind + 2}}
		return nil
	}
	// psql's border 1 starts every row with a space, and a selection that
	// began at the first character of the plan loses it on the first row
	// only: the root's details then stand three columns right of it
	// instead of two. Take the root as one column further right.
	if !p.rootChecked {
		p.rootChecked = true
		if ind == p.rootIndent+3 {
			p.rootIndent++
			p.stack[0].detail++
		}
	}
	// Inside a block whose lines are more indented than its header.
	if p.block != "" {
		if ind > p.blockIndent {
			return p.blockLine(text)
		}
		p.block = ""
	}
	if ind <= p.rootIndent {
		if ind < p.rootIndent {
			return fmt.Errorf("%q is left of the plan's first line; the indentation is broken: %w", clip(text), ErrNotAPlan)
		}
		return p.topLevel(text, ind)
	}
	if p.treeDone {
		return fmt.Errorf("%q comes after the plan's summary lines; paste one plan at a time: %w", clip(text), ErrNotAPlan)
	}
	// Close frames that end left of this line.
	for len(p.stack) > 0 && p.stack[len(p.stack)-1].detail > ind {
		p.stack = p.stack[:len(p.stack)-1]
	}
	if len(p.stack) == 0 || p.stack[len(p.stack)-1].detail != ind {
		if strings.HasPrefix(text, "->") {
			return fmt.Errorf("the node %q is at column %d, which lines up with no parent node; the plan's indentation is broken (paste it exactly as EXPLAIN printed it): %w", clip(strings.TrimSpace(text[2:])), ind, ErrNotAPlan)
		}
		return fmt.Errorf("%q at column %d belongs to no plan node; the plan's indentation is broken (paste it exactly as EXPLAIN printed it): %w", clip(text), ind, ErrNotAPlan)
	}
	top := &p.stack[len(p.stack)-1]
	if strings.HasPrefix(text, "->") {
		// Read into a node of the parser's own and copied into the parent's
		// children: a large plan's nodes are not allocated twice.
		n := &p.scratch
		*n = Node{}
		ok, err := parseHeader(n, strings.TrimSpace(text[2:]), false)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%q is not a plan node: %w", clip(text), ErrNotAPlan)
		}
		parent := top.node
		n.ParentRelationship, n.SubplanName = top.rel, top.subplan
		if n.ParentRelationship == "" {
			n.ParentRelationship = childRelationship(parent)
		}
		if len(p.stack) > 1 && len(parent.Plans) >= 1000 {
			return fmt.Errorf("a node has more than 1000 children: %w", ErrNotAPlan)
		}
		if len(p.stack) >= maxDepth {
			return tooDeep()
		}
		if len(parent.Plans) == manyChildren {
			// As in JSON: size a long list of children once.
			parent.Plans = append(make([]Node, 0, len(parent.Plans)+1+p.siblingsAfter(ind)), parent.Plans...)
		}
		parent.Plans = append(parent.Plans, *n)
		p.nodeLines = append(p.nodeLines, p.line)
		child := &parent.Plans[len(parent.Plans)-1]
		// Appending may move the slice: re-point frames that refer to
		// siblings (they are closed already, only deeper ones could).
		nameCol := ind + 2 + (len(text) - 2 - len(strings.TrimLeft(text[2:], " ")))
		p.stack = append(p.stack, frame{node: child, detail: nameCol + 2})
		return nil
	}
	// Subplan headers give the next child its relationship.
	if rel, name, ok := subplanHeader(text); ok {
		p.stack = append(p.stack, frame{node: top.node, detail: ind + 2, rel: rel, subplan: name})
		return nil
	}
	if top.rel != "" {
		return fmt.Errorf("%q follows %q but is not its plan node; the indentation is broken: %w", clip(text), top.subplan, ErrNotAPlan)
	}
	return p.detail(top.node, text, ind)
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// childRelationship guesses what JSON calls Parent Relationship for a
// plain "->" child: joins have an Outer then an Inner side, Append-like
// nodes have Members, everything else has one Outer child.
func childRelationship(parent *Node) string {
	switch parent.NodeType {
	case "Append", "Merge Append", "BitmapAnd", "BitmapOr":
		return "Member"
	case "Nested Loop", "Hash Join", "Merge Join", "Recursive Union", "SetOp":
		plain := 0
		for _, c := range parent.Plans {
			if c.ParentRelationship == "Outer" || c.ParentRelationship == "Inner" {
				plain++
			}
		}
		if plain >= 1 {
			return "Inner"
		}
	case "Subquery Scan":
		return "Subquery"
	}
	return "Outer"
}

// subplanHeader recognises "InitPlan 1 (returns $0)", "SubPlan 2" and
// "CTE name" lines, which name the node that follows (a CTE is kept as an
// InitPlan).
func subplanHeader(text string) (rel, name string, ok bool) {
	switch {
	case strings.HasPrefix(text, "InitPlan "):
		return "InitPlan", text, true
	case strings.HasPrefix(text, "SubPlan "):
		return "SubPlan", text, true
	case strings.HasPrefix(text, "CTE ") && !strings.HasPrefix(text, "CTE Scan"):
		return "InitPlan", text, true
	}
	return "", "", false
}

// summaryKeys start the lines EXPLAIN prints after the tree, at the
// root's column (auto_explain adds Query Text before it).
var summaryKeys = map[string]bool{
	"Planning Time": true, "Planning time": true, "Execution Time": true, "Execution time": true, "Total runtime": true,
	"Planning": true, "JIT": true, "Settings": true, "Query Identifier": true, "Serialization": true, "Query Text": true,
}

// isSummaryLine says whether text (trimmed) is one of those lines.
func isSummaryLine(text string) bool {
	key, _, ok := strings.Cut(text, ":")
	return ok && (summaryKeys[key] || strings.HasPrefix(key, "Trigger "))
}

// topLevel handles the summary lines EXPLAIN prints after the tree.
func (p *textParser) topLevel(text string, ind int) error {
	key, val, _ := strings.Cut(text, ":")
	val = strings.TrimSpace(val)
	switch key {
	case "Planning Time", "Planning time":
		p.treeDone = true
		p.e.PlanningMS, p.e.HasPlanningTime = msValue(val), true
	case "Execution Time", "Total runtime", "Execution time":
		p.treeDone = true
		p.e.ExecutionMS, p.sawExecution = msValue(val), true
	case "Planning":
		p.treeDone = true
		p.block, p.blockIndent = "Planning", ind
	case "JIT":
		p.treeDone = true
		p.e.JIT = &JIT{}
		p.block, p.blockIndent = "JIT", ind
	case "Settings":
		p.treeDone = true
		p.e.Settings = parseSettings(val)
	case "Query Identifier":
		p.treeDone = true
		p.e.QueryID = val
	case "Serialization":
		p.treeDone = true
		p.block, p.blockIndent = "skip", ind
	default:
		if strings.HasPrefix(key, "Trigger ") {
			p.treeDone = true
			kv := keyValues(val)
			tr := Trigger{Name: strings.TrimPrefix(key, "Trigger "), TimeMS: kv["time"], Calls: kv["calls"]}
			if c, ok := strings.CutPrefix(tr.Name, "for constraint "); ok {
				tr.Name, tr.Constraint = "", c
				// VERBOSE adds " on <table>"; constraint names rarely hold spaces.
				if i := strings.Index(c, " on "); i >= 0 {
					tr.Constraint = c[:i]
				}
			}
			p.e.Triggers = append(p.e.Triggers, tr)
			return nil
		}
		if ok, _ := parseHeader(&Node{}, text, true); ok {
			return fmt.Errorf("a second plan starts with %q; paste one plan at a time: %w", clip(text), ErrNotAPlan)
		}
		return fmt.Errorf("%q is at the plan's top level but is no EXPLAIN summary line; is this two plans, or is the indentation broken?: %w", clip(text), ErrNotAPlan)
	}
	return nil
}

// blockLine reads one "Key: value" detail line into the current node.
func (p *textParser) blockLine(text string) error {
	key, val, _ := strings.Cut(text, ":")
	val = strings.TrimSpace(val)
	switch p.block {
	case "Planning":
		if key == "Buffers" {
			p.e.PlanningBuffers = parseBuffers(val)
		}
	case "worker":
		p.workerSort(text)
	case "JIT":
		j := p.e.JIT
		switch key {
		case "Functions":
			j.Functions = int(num(val))
		case "Options":
			for _, opt := range strings.Split(val, ",") {
				f := strings.Fields(opt)
				if len(f) != 2 {
					continue
				}
				on := f[1] == "true"
				switch f[0] {
				case "Inlining":
					j.Inlining = on
				case "Optimization":
					j.Optimization = on
				case "Expressions":
					j.Expressions = on
				case "Deforming":
					j.Deforming = on
				}
			}
		case "Timing":
			t := &JITTiming{}
			fs := strings.Fields(strings.NewReplacer(",", " ", "(", " ", ")", " ").Replace(val))
			for i := 0; i+1 < len(fs); i++ {
				v, err := strconv.ParseFloat(fs[i+1], 64)
				if err != nil {
					continue
				}
				switch fs[i] {
				case "Generation":
					t.Generation = v
				case "Deform":
					t.Deform = v
				case "Inlining":
					t.Inlining = v
				case "Optimization":
					t.Optimization = v
				case "Emission":
					t.Emission = v
				case "Total":
					t.Total = v
				}
			}
			j.TimingMS = t
		}
	}
	return nil
}

// detail reads one "Key: value" line of a node, or one result relation of
// a ModifyTable ("Update on public.ta1 ta_1"), which has no colon and may
// name a table that does.
func (p *textParser) detail(n *Node, text string, ind int) error {
	if n.NodeType == "ModifyTable" {
		if t, ok := targetLine(text); ok {
			n.Targets = append(n.Targets, t)
			return nil
		}
	}
	key, val, found := strings.Cut(text, ":")
	if !found {
		return fmt.Errorf("%q under %q is no \"Key: value\" detail line: %w", clip(text), n.Head(), ErrNotAPlan)
	}
	val = strings.TrimSpace(val)
	if strings.HasPrefix(key, "Worker ") || strings.HasPrefix(key, "JIT for worker") {
		// Per-worker figures; only the sort space matters to the rules.
		// VERBOSE puts them on the lines below, plain ANALYZE on this one.
		p.block, p.blockIndent, p.worker = "skip", ind, nil
		if strings.HasPrefix(key, "Worker ") {
			n.Workers = append(n.Workers, Worker{Number: int(num(strings.TrimPrefix(key, "Worker ")))})
			p.worker, p.block = n, "worker"
			p.workerSort(val)
		}
		return nil
	}
	if setExpression(n, key, val) {
		return nil
	}
	switch key {
	case "Rows Removed by Filter":
		n.RowsRemovedByFilter = num(val)
	case "Rows Removed by Join Filter":
		n.RowsRemovedByJoinFilter = num(val)
	case "Rows Removed by Index Recheck":
		n.RowsRemovedByIndexRecheck = num(val)
	case "Heap Fetches":
		n.HeapFetches = num(val)
	case "Heap Blocks":
		kv := keyValues(val)
		n.ExactHeapBlocks, n.LossyHeapBlocks = kv["exact"], kv["lossy"]
	case "Sort Method":
		n.SortMethod, n.SortSpaceType, n.SortSpaceKB = sortSpace(text)
	case "Buckets":
		segs := segments(text)
		n.HashBuckets, n.OriginalHashBuckets = originally(segs["Buckets"])
		n.HashBatches, n.OriginalHashBatches = originally(segs["Batches"])
		n.PeakMemoryKB = kb(segs["Memory Usage"])
	case "Batches", "Planned Partitions":
		segs := segments(text)
		if v, ok := segs["Batches"]; ok {
			n.HashAggBatches = num(v)
		}
		n.PeakMemoryKB = kb(segs["Memory Usage"])
		n.DiskUsageKB = kb(segs["Disk Usage"])
	case "Hits":
		n.PeakMemoryKB = kb(segments(text)["Memory Usage"])
	case "Workers Planned":
		n.WorkersPlanned = int(num(val))
	case "Workers Launched":
		n.WorkersLaunched = int(num(val))
	case "Buffers":
		n.Buffers = parseBuffers(val)
	case "I/O Timings":
		n.IO = parseIO(val)
	case "WAL":
		kv := keyValues(val)
		n.WAL = WAL{Records: int64(kv["records"]), FPI: int64(kv["fpi"]), Bytes: int64(kv["bytes"])}
	}
	return nil
}

// setExpression sets a node's condition or list detail (Filter, Index
// Cond, Sort Key, ...), which the line carries as the server printed it;
// false for any other key.
func setExpression(n *Node, key, val string) bool {
	switch key {
	case "Output":
		n.Output = SplitList(val)
	case "Filter":
		n.Filter = val
	case "Index Cond":
		n.IndexCond = val
	case "Recheck Cond":
		n.RecheckCond = val
	case "Join Filter":
		n.JoinFilter = val
	case "Hash Cond":
		n.HashCond = val
	case "Merge Cond":
		n.MergeCond = val
	case "One-Time Filter":
		n.OneTimeFilter = val
	case "Sort Key":
		n.SortKey = SplitList(val)
	case "Group Key":
		n.GroupKey = SplitList(val)
	default:
		return false
	}
	return true
}

// workerSort reads a sort method from a worker's detail.
func (p *textParser) workerSort(text string) {
	if p.worker == nil || !strings.Contains(text, "Sort Method:") {
		return
	}
	w := &p.worker.Workers[len(p.worker.Workers)-1]
	w.SortMethod, w.SortSpaceType, w.SortSpaceKB = sortSpace(text[strings.Index(text, "Sort Method:"):])
}

// sortSpace reads "Sort Method: external merge  Disk: 30176kB" (or
// "Memory: 25kB") as JSON's Sort Method, Sort Space Type and Used.
func sortSpace(text string) (method, spaceType string, spaceKB float64) {
	segs := segments(text)
	if d, ok := segs["Disk"]; ok {
		return segs["Sort Method"], "Disk", kb(d)
	}
	if m, ok := segs["Memory"]; ok {
		return segs["Sort Method"], "Memory", kb(m)
	}
	return segs["Sort Method"], "", 0
}

// keyValues reads "exact=973 lossy=1548" style figures.
func keyValues(val string) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Fields(val) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = num(v)
		}
	}
	return out
}

// segments splits "Sort Method: quicksort  Memory: 25kB" into its pairs;
// EXPLAIN separates them with two spaces.
func segments(s string) map[string]string {
	out := map[string]string{}
	for _, seg := range strings.Split(s, "  ") {
		k, v, ok := strings.Cut(strings.TrimSpace(seg), ":")
		if ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// originally reads "65536 (originally 1024)".
func originally(s string) (now, orig float64) {
	f := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(s))
	if len(f) == 0 {
		return 0, 0
	}
	now = num(f[0])
	orig = now
	if len(f) >= 3 && f[1] == "originally" {
		orig = num(f[2])
	}
	return now, orig
}

// parseBuffers reads "shared hit=1 read=2 dirtied=3, local hit=4 ...,
// temp read=5 written=6".
func parseBuffers(val string) Buffers {
	var b Buffers
	for _, part := range strings.Split(val, ",") {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			x := int64(num(v))
			switch f[0] + " " + k {
			case "shared hit":
				b.SharedHit = x
			case "shared read":
				b.SharedRead = x
			case "shared dirtied":
				b.SharedDirtied = x
			case "shared written":
				b.SharedWritten = x
			case "local hit":
				b.LocalHit = x
			case "local read":
				b.LocalRead = x
			case "local dirtied":
				b.LocalDirtied = x
			case "local written":
				b.LocalWritten = x
			case "temp read":
				b.TempRead = x
			case "temp written":
				b.TempWritten = x
			}
		}
	}
	return b
}

// parseIO reads "I/O Timings": "read=1.2 write=0.3" (up to PostgreSQL 14),
// "shared/local read=.. write=.., temp read=.." (15), "shared read=..,
// local read=.., temp read=.." (16+).
func parseIO(val string) IOTiming {
	var t IOTiming
	for _, part := range strings.Split(val, ",") {
		f := strings.Fields(part)
		kind := "shared"
		if len(f) > 0 && !strings.Contains(f[0], "=") {
			kind, f = f[0], f[1:]
		}
		for _, kv := range f {
			k, v, _ := strings.Cut(kv, "=")
			x := num(v)
			switch kind + " " + k {
			case "shared read", "shared/local read":
				t.SharedReadMS = x
			case "shared write", "shared/local write":
				t.SharedWriteMS = x
			case "local read":
				t.LocalReadMS = x
			case "local write":
				t.LocalWriteMS = x
			case "temp read":
				t.TempReadMS = x
			case "temp write":
				t.TempWriteMS = x
			}
		}
	}
	return t
}

// parseSettings reads "work_mem = '64MB', jit = 'off'".
func parseSettings(val string) map[string]string {
	out := map[string]string{}
	for _, item := range SplitList(val) {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], "''", "'")
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// SplitList splits on commas that are outside parentheses, brackets and
// quotes: "a, (f(b, c)), 'x,y'" has three items. The plan's lists (Output,
// Sort Key, Group Key) are read with it, and so are the keys the rules
// rewrite.
func SplitList(s string) []string {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" || len(out) > 0 {
		out = append(out, rest)
	}
	return out
}

func num(s string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f
}

func msValue(s string) float64 { return num(strings.TrimSuffix(strings.TrimSpace(s), "ms")) }

func kb(s string) float64 { return num(strings.TrimSuffix(strings.TrimSpace(s), "kB")) }

// targetLine reads "[Foreign ]Insert|Update|Delete|Merge on [schema.]table [alias]".
func targetLine(text string) (Target, bool) {
	var t Target
	// "Foreign Update on" marks a partition a wrapper writes; JSON does
	// not say so, and neither does the model.
	rest, _ := strings.CutPrefix(text, "Foreign ")
	for _, op := range []string{"Insert", "Update", "Delete", "Merge"} {
		if r, ok := strings.CutPrefix(rest, op+" on "); ok {
			var probe Node
			probe.NodeType = "ModifyTable"
			if err := probe.target(r); err != nil || probe.RelationName == "" {
				return t, false
			}
			return Target{Schema: probe.Schema, Relation: probe.RelationName, Alias: probe.Alias}, true
		}
	}
	return t, false
}
