package plan

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// The fast reader of EXPLAIN (FORMAT JSON). encoding/json spends most of a
// large plan's time validating the input in a pass of its own and then
// matching every key to a field by reflection; this reader walks the
// bytes once, switches on the keys a plan node has, and interns the few
// dozen strings (node types, join types, parent relationships) that make
// up most of a plan's values.
//
// It only ever agrees with encoding/json: whenever the input is not plain
// JSON of the shape EXPLAIN prints (a syntax error, a value of another
// type, a key spelt in another case, a key given twice), it gives up with
// errSlow and decodeFirst asks encoding/json, which then decodes it or
// says what is wrong. FuzzFastJSON checks that both give the same result
// whenever the fast reader finishes.

// errSlow says the fast reader leaves this input to encoding/json.
var errSlow = errors.New("left to encoding/json")

// maxJSONDepth is below encoding/json's own nesting limit (10,000), so
// whatever nests deeper is judged by encoding/json.
const maxJSONDepth = 9000

type fastJSON struct {
	b      []byte
	i      int
	depth  int
	intern map[string]string
	// scratch holds one rawNode per plan level: a node's fields are read
	// into it and copied into its Node when its object ends, so the raw
	// form of a large plan is never held whole.
	scratch []*rawNode
}

// fastDecodeFirst is decodeFirst without encoding/json. It leaves to
// encoding/json every plan convert would refuse (no root, a node without
// a type, a null child, nesting past maxDepth), so that the refusal
// reads the same.
func fastDecodeFirst(b []byte) (rawExplain, Node, error) {
	d := &fastJSON{b: b, intern: make(map[string]string, 64)}
	var first rawExplain
	var root *Node
	d.ws()
	switch d.peek() {
	case '[':
		d.i++
		n := 0
		err := d.elements(func() error {
			var r rawExplain
			plan, err := d.explain(&r)
			if err != nil {
				return err
			}
			if n == 0 {
				first, root = r, plan
			}
			n++
			return nil
		})
		if err != nil {
			return first, Node{}, err
		}
	case '{':
		plan, err := d.explain(&first)
		if err != nil {
			return first, Node{}, err
		}
		root = plan
	default:
		return first, Node{}, errSlow
	}
	d.ws()
	if d.i != len(d.b) || root == nil {
		return first, Node{}, errSlow
	}
	return first, *root, nil
}

func (d *fastJSON) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// ws skips JSON's four whitespace bytes.
func (d *fastJSON) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\n', '\t', '\r':
			d.i++
		default:
			return
		}
	}
}

// elements reads an array's elements after its '[', calling each with
// the reader at the element's first byte.
func (d *fastJSON) elements(each func() error) error {
	if d.depth++; d.depth > maxJSONDepth {
		return errSlow
	}
	d.ws()
	if d.peek() == ']' {
		d.i++
		d.depth--
		return nil
	}
	for {
		d.ws()
		if err := each(); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return nil
		default:
			return errSlow
		}
	}
}

// members reads an object's members after its '{', calling each with the
// key (the input's bytes, unescaped keys are never known ones) and the
// reader at the value's first byte.
func (d *fastJSON) members(each func(key []byte) error) error {
	if d.depth++; d.depth > maxJSONDepth {
		return errSlow
	}
	d.ws()
	if d.peek() == '}' {
		d.i++
		d.depth--
		return nil
	}
	for {
		d.ws()
		key, plain, err := d.rawString()
		if err != nil {
			return err
		}
		if !plain {
			// An escaped or non-ASCII key could still name a field
			// once decoded or case-folded: encoding/json decides.
			return errSlow
		}
		d.ws()
		if d.peek() != ':' {
			return errSlow
		}
		d.i++
		d.ws()
		if err := each(key); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return nil
		default:
			return errSlow
		}
	}
}

// rawString reads a string token and returns its content as it stands
// in the input; plain is false when it holds an escape or a byte outside
// printable ASCII (then only encoding/json decodes it).
func (d *fastJSON) rawString() (content []byte, plain bool, err error) {
	if d.peek() != '"' {
		return nil, false, errSlow
	}
	start := d.i + 1
	plain = true
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			return d.b[start:j], plain, nil
		case c == '\\':
			plain = false
			j++ // the escaped byte; a \u's hex digits are ordinary bytes
			if j >= len(d.b) {
				return nil, false, errSlow
			}
		case c < 0x20:
			return nil, false, errSlow // not allowed unescaped in JSON
		case c >= 0x80:
			plain = false
		}
	}
	return nil, false, errSlow
}

// str reads a string value.
func (d *fastJSON) str() (string, error) {
	start := d.i
	content, plain, err := d.rawString()
	if err != nil {
		return "", err
	}
	if plain {
		return string(content), nil
	}
	var s string
	if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
		return "", errSlow
	}
	return s, nil
}

// interned reads a string value that repeats across a plan (node types,
// relationships, methods) and returns one copy of each.
func (d *fastJSON) interned() (string, error) {
	start := d.i
	content, plain, err := d.rawString()
	if err != nil {
		return "", err
	}
	if !plain {
		var s string
		if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
			return "", errSlow
		}
		return s, nil
	}
	if s, ok := d.intern[string(content)]; ok {
		return s, nil
	}
	s := string(content)
	d.intern[s] = s
	return s, nil
}

// isNull consumes a null.
func (d *fastJSON) isNull() bool {
	if d.i+4 <= len(d.b) && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// number reads a number token, checked against JSON's grammar.
func (d *fastJSON) number() ([]byte, error) {
	start, j := d.i, d.i
	b := d.b
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return nil, errSlow
	}
	if j < len(b) && b[j] == '.' {
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return nil, errSlow
		}
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return nil, errSlow
		}
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	}
	d.i = j
	return b[start:j], nil
}

// float reads a number into *f; null leaves it as it is, as encoding/json
// does.
func (d *fastJSON) float(f *float64) error {
	if d.isNull() {
		return nil
	}
	tok, err := d.number()
	if err != nil {
		return err
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return errSlow
	}
	*f = v
	return nil
}

// floatPtr reads a number into a new *float64; null sets it to nil.
func (d *fastJSON) floatPtr(p **float64) error {
	if d.isNull() {
		*p = nil
		return nil
	}
	var v float64
	if err := d.float(&v); err != nil {
		return err
	}
	*p = &v
	return nil
}

// integer reads an integer (no fraction or exponent, as encoding/json
// requires of an integer field).
func (d *fastJSON) integer(bits int, set func(int64)) error {
	if d.isNull() {
		return nil
	}
	tok, err := d.number()
	if err != nil {
		return err
	}
	v, err := strconv.ParseInt(string(tok), 10, bits)
	if err != nil {
		return errSlow
	}
	set(v)
	return nil
}

func (d *fastJSON) int64(p *int64) error { return d.integer(64, func(v int64) { *p = v }) }
func (d *fastJSON) int(p *int) error {
	return d.integer(strconv.IntSize, func(v int64) { *p = int(v) })
}

func (d *fastJSON) string(p *string) error {
	if d.isNull() {
		return nil
	}
	s, err := d.str()
	if err == nil {
		*p = s
	}
	return err
}

func (d *fastJSON) internedString(p *string) error {
	if d.isNull() {
		return nil
	}
	s, err := d.interned()
	if err == nil {
		*p = s
	}
	return err
}

func (d *fastJSON) bool(p *bool) error {
	switch {
	case d.isNull():
	case d.i+4 <= len(d.b) && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		*p = true
	case d.i+5 <= len(d.b) && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		*p = false
	default:
		return errSlow
	}
	return nil
}

// strings reads an array of strings (Output, Sort Key, Group Key).
func (d *fastJSON) strings(p *[]string) error {
	if d.isNull() {
		*p = nil
		return nil
	}
	if d.peek() != '[' {
		return errSlow
	}
	d.i++
	out := []string{}
	err := d.elements(func() error {
		var s string
		if err := d.string(&s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	*p = out
	return err
}

// skip reads past any value, checking its syntax.
func (d *fastJSON) skip() error {
	switch c := d.peek(); {
	case c == '"':
		_, _, err := d.rawString()
		return err
	case c == '{':
		d.i++
		return d.members(func([]byte) error { return d.skip() })
	case c == '[':
		d.i++
		return d.elements(d.skip)
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.number()
		return err
	case d.isNull():
		return nil
	default:
		var b bool
		return d.bool(&b)
	}
}

// delegate decodes one value with encoding/json, for the members that are
// small and rare (settings, JIT, triggers, workers): their semantics stay
// exactly encoding/json's.
func (d *fastJSON) delegate(v any) error {
	start := d.i
	if err := d.skip(); err != nil {
		return err
	}
	if err := json.Unmarshal(d.b[start:d.i], v); err != nil {
		return errSlow
	}
	return nil
}

// buffer reads one of the buffer and I/O timing members that a node and
// the plan's planning phase ("Planning") both carry; ok is false for any
// other key.
func (d *fastJSON) buffer(key []byte, n *rawBuffers) (ok bool, err error) {
	switch string(key) {
	case "Shared Hit Blocks":
		return true, d.int64(&n.SharedHit)
	case "Shared Read Blocks":
		return true, d.int64(&n.SharedRead)
	case "Shared Dirtied Blocks":
		return true, d.int64(&n.SharedDirtied)
	case "Shared Written Blocks":
		return true, d.int64(&n.SharedWritten)
	case "Local Hit Blocks":
		return true, d.int64(&n.LocalHit)
	case "Local Read Blocks":
		return true, d.int64(&n.LocalRead)
	case "Local Dirtied Blocks":
		return true, d.int64(&n.LocalDirtied)
	case "Local Written Blocks":
		return true, d.int64(&n.LocalWritten)
	case "Temp Read Blocks":
		return true, d.int64(&n.TempRead)
	case "Temp Written Blocks":
		return true, d.int64(&n.TempWritten)
	case "I/O Read Time":
		return true, d.float(&n.IORead)
	case "I/O Write Time":
		return true, d.float(&n.IOWrite)
	case "Shared I/O Read Time":
		return true, d.float(&n.SharedIORead)
	case "Shared I/O Write Time":
		return true, d.float(&n.SharedIOWrite)
	case "Local I/O Read Time":
		return true, d.float(&n.LocalIORead)
	case "Local I/O Write Time":
		return true, d.float(&n.LocalIOWrite)
	case "Temp I/O Read Time":
		return true, d.float(&n.TempIORead)
	case "Temp I/O Write Time":
		return true, d.float(&n.TempIOWrite)
	}
	return false, nil
}

// planning reads the plan's "Planning" member: the buffers planning read.
// The model keeps nothing else of it, as encoding/json's reading of it
// into rawBuffers did not.
func (d *fastJSON) planning(r *rawExplain) error {
	if d.isNull() {
		return nil
	}
	if d.peek() != '{' {
		return errSlow
	}
	d.i++
	r.PlanningInfo = &rawBuffers{}
	return d.members(func(key []byte) error {
		if ok, err := d.buffer(key, r.PlanningInfo); ok {
			return err
		}
		// Other members (17's "Memory Used" with MEMORY) are not read.
		return d.skip()
	})
}

// explain reads one element of EXPLAIN's array, and returns its plan
// (nil when it has none, which only encoding/json reports).
func (d *fastJSON) explain(r *rawExplain) (*Node, error) {
	if d.isNull() {
		return nil, nil
	}
	if d.peek() != '{' {
		return nil, errSlow
	}
	d.i++
	var seen seenKeys
	var plan *Node
	err := d.members(func(key []byte) error {
		switch string(key) {
		case "Plan":
			if !seen.first(slicePlan) || d.isNull() {
				return errSlow
			}
			n, err := d.node(0)
			if err != nil {
				return err
			}
			plan = &n
			return nil
		case "Planning Time":
			return d.floatPtr(&r.Planning)
		case "Execution Time":
			return d.floatPtr(&r.Execution)
		case "Total Runtime":
			return d.floatPtr(&r.TotalRuntime)
		case "Settings":
			return d.delegate(&r.Settings)
		case "JIT":
			return d.delegate(&r.JIT)
		case "Planning":
			return d.planning(r)
		case "Triggers":
			// Most plans have none: "[]" is read here, a list of them by
			// encoding/json.
			if start := d.i; d.peek() == '[' {
				d.i++
				if d.ws(); d.peek() == ']' {
					d.i++
					r.Triggers = []rawTrigger{}
					return nil
				}
				d.i = start
			}
			return d.delegate(&r.Triggers)
		case "Query Identifier":
			return d.delegate(&r.QueryID)
		}
		return d.unknown(key, explainKeys())
	})
	return plan, err
}

// unknown skips the value of a key no field has; a key that matches a
// field only when case is ignored is left to encoding/json, which would
// fill that field.
func (d *fastJSON) unknown(key []byte, known map[string]bool) error {
	var lower [64]byte
	if len(key) <= len(lower) {
		for i, c := range key {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		if known[string(lower[:len(key)])] {
			return errSlow
		}
	}
	return d.skip()
}

// seenKeys notes which of the keys whose value encoding/json would merge
// with an earlier one of the same key (it decodes into the slice it has
// already filled) were given; a second one is left to encoding/json. A
// scalar given twice is the last one either way.
type seenKeys uint8

const (
	slicePlan seenKeys = 1 << iota // the explain's "Plan"
	slicePlans
	sliceOutput
	sliceSortKey
	sliceGroupKey
)

func (s *seenKeys) first(k seenKeys) bool {
	if *s&k != 0 {
		return false
	}
	*s |= k
	return true
}

// node reads a plan node's object at a level of the plan.
func (d *fastJSON) node(level int) (Node, error) {
	if d.peek() != '{' {
		return Node{}, errSlow
	}
	d.i++
	for len(d.scratch) <= level {
		d.scratch = append(d.scratch, &rawNode{})
	}
	n := d.scratch[level]
	*n = rawNode{}
	f := nodeFill{n: n, level: level}
	// One case per json tag of rawNode, in two switches split at the
	// key's first letter so that each key still meets one search
	// (TestFastReadsEveryField holds them and rawNode together). A switch
	// on a string compiles to a search on its length and bytes, with no
	// hashing.
	err := d.members(func(key []byte) error {
		var ok bool
		var err error
		if len(key) > 0 && key[0] < 'P' {
			ok, err = d.fieldAtoO(&f, key)
		} else {
			ok, err = d.fieldPtoZ(&f, key)
		}
		if ok {
			return err
		}
		if ok, err := d.buffer(key, &n.rawBuffers); ok {
			return err
		}
		return d.unknown(key, nodeKeys())
	})
	if err != nil {
		return Node{}, err
	}
	out, err := convertFields(n)
	if err != nil {
		return Node{}, errSlow
	}
	if kids := f.kids; len(kids) > 0 {
		if level >= maxDepth {
			return Node{}, errSlow
		}
		out.Plans = kids
	}
	return out, nil
}

// nodeFill is one node being read: its raw fields, the lists already
// met, its children, and its depth.
type nodeFill struct {
	n     *rawNode
	seen  seenKeys
	kids  []Node
	level int
}

// fieldAtoO reads a field whose key starts before P: whether key is one,
// and the error reading it.
func (d *fastJSON) fieldAtoO(f *nodeFill, key []byte) (bool, error) {
	n := f.n
	switch string(key) {
	case "Node Type":
		return true, d.internedString(&n.NodeType)
	case "Join Type":
		return true, d.internedString(&n.JoinType)
	case "Operation":
		return true, d.internedString(&n.Operation)
	case "Command":
		return true, d.internedString(&n.Command)
	case "Custom Plan Provider":
		return true, d.internedString(&n.CustomProvider)
	case "Alias":
		return true, d.string(&n.Alias)
	case "Index Name":
		return true, d.internedString(&n.IndexName)
	case "Function Name":
		return true, d.internedString(&n.FunctionName)
	case "CTE Name":
		return true, d.internedString(&n.CTEName)
	case "Actual Startup Time":
		return true, d.float(&n.ActualStartup)
	case "Actual Total Time":
		return true, d.float(&n.ActualTotal)
	case "Actual Rows":
		return true, d.floatPtr(&n.ActualRows)
	case "Actual Loops":
		return true, d.floatPtr(&n.ActualLoops)
	case "Output":
		if !f.seen.first(sliceOutput) {
			return true, errSlow
		}
		return true, d.strings(&n.Output)
	case "Filter":
		return true, d.string(&n.Filter)
	case "Index Cond":
		return true, d.string(&n.IndexCond)
	case "Join Filter":
		return true, d.string(&n.JoinFilter)
	case "Hash Cond":
		return true, d.string(&n.HashCond)
	case "Merge Cond":
		return true, d.string(&n.MergeCond)
	case "One-Time Filter":
		return true, d.string(&n.OneTimeFilter)
	case "Group Key":
		if !f.seen.first(sliceGroupKey) {
			return true, errSlow
		}
		return true, d.strings(&n.GroupKey)
	case "Heap Fetches":
		return true, d.float(&n.HeapFetches)
	case "Exact Heap Blocks":
		return true, d.float(&n.ExactHeapBlocks)
	case "Lossy Heap Blocks":
		return true, d.float(&n.LossyHeapBlocks)
	case "Hash Buckets":
		return true, d.float(&n.HashBuckets)
	case "Original Hash Buckets":
		return true, d.float(&n.OrigHashBuckets)
	case "Hash Batches":
		return true, d.float(&n.HashBatches)
	case "Original Hash Batches":
		return true, d.float(&n.OrigHashBatches)
	case "HashAgg Batches":
		return true, d.float(&n.HashAggBatches)
	case "Disk Usage":
		return true, d.float(&n.DiskUsage)
	}
	return false, nil
}

// fieldPtoZ reads a field whose key starts at P or later.
func (d *fastJSON) fieldPtoZ(f *nodeFill, key []byte) (bool, error) {
	n := f.n
	switch string(key) {
	case "Strategy":
		return true, d.internedString(&n.Strategy)
	case "Partial Mode":
		return true, d.internedString(&n.PartialMode)
	case "Scan Direction":
		return true, d.internedString(&n.ScanDirection)
	case "Parent Relationship":
		return true, d.internedString(&n.ParentRelationship)
	case "Subplan Name":
		return true, d.string(&n.SubplanName)
	case "Parallel Aware":
		return true, d.bool(&n.ParallelAware)
	case "Relation Name":
		return true, d.internedString(&n.RelationName)
	case "Schema":
		return true, d.internedString(&n.Schema)
	case "Startup Cost":
		return true, d.float(&n.StartupCost)
	case "Total Cost":
		return true, d.float(&n.TotalCost)
	case "Plan Rows":
		return true, d.float(&n.PlanRows)
	case "Plan Width":
		return true, d.int(&n.PlanWidth)
	case "Recheck Cond":
		return true, d.string(&n.RecheckCond)
	case "Sort Key":
		if !f.seen.first(sliceSortKey) {
			return true, errSlow
		}
		return true, d.strings(&n.SortKey)
	case "Rows Removed by Filter":
		return true, d.float(&n.RemovedFilter)
	case "Rows Removed by Join Filter":
		return true, d.float(&n.RemovedJoinFilter)
	case "Rows Removed by Index Recheck":
		return true, d.float(&n.RemovedRecheck)
	case "Sort Method":
		return true, d.internedString(&n.SortMethod)
	case "Sort Space Used":
		return true, d.float(&n.SortSpaceUsed)
	case "Sort Space Type":
		return true, d.internedString(&n.SortSpaceType)
	case "Peak Memory Usage":
		return true, d.float(&n.PeakMemory)
	case "Workers Planned":
		return true, d.int(&n.WorkersPlanned)
	case "Workers Launched":
		return true, d.int(&n.WorkersLaunched)
	case "Workers":
		return true, d.delegate(&n.Workers)
	case "Target Tables":
		return true, d.delegate(&n.Targets)
	case "WAL Records":
		return true, d.int64(&n.WALRecords)
	case "WAL FPI":
		return true, d.int64(&n.WALFPI)
	case "WAL Bytes":
		return true, d.int64(&n.WALBytes)
	case "Plans":
		if !f.seen.first(slicePlans) {
			return true, errSlow
		}
		var err error
		f.kids, err = d.children(f.level)
		return true, err
	}
	return false, nil
}

// children reads the "Plans" of a node at level.
func (d *fastJSON) children(level int) ([]Node, error) {
	if d.isNull() {
		return nil, nil
	}
	if d.peek() != '[' {
		return nil, errSlow
	}
	d.i++
	var kids []Node
	err := d.elements(func() error {
		if d.isNull() {
			return errSlow // convert refuses it, in its own words
		}
		c, err := d.node(level + 1)
		if err != nil {
			return err
		}
		if len(kids) == manyChildren {
			// An Append over partitions can have thousands of children,
			// and a Node is about a kilobyte: appending them one by one
			// would copy them over and over. Count the rest once.
			kids = append(make([]Node, 0, len(kids)+1+d.countRest()), kids...)
		}
		kids = append(kids, c)
		return nil
	})
	return kids, err
}

// manyChildren is the number of children after which the rest of a
// "Plans" array is counted before more are appended.
const manyChildren = 8

// countRest counts the elements left in the array the reader is in, from
// just after an element: a scan of brackets, braces and strings that
// checks nothing (the elements are read properly after), used only to size
// a slice.
func (d *fastJSON) countRest() int {
	n, depth := 0, 0
	for j := d.i; j < len(d.b); j++ {
		switch d.b[j] {
		case '"':
			for j++; j < len(d.b) && d.b[j] != '"'; j++ {
				if d.b[j] == '\\' {
					j++
				}
			}
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return n
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}

// nodeKeys and explainKeys are the json keys of rawNode (its embedded
// buffers included) and rawExplain, lower-cased: a key that is one of them
// in another case is left to encoding/json, which matches case-blind.
var (
	nodeKeys    = sync.OnceValue(func() map[string]bool { return foldedKeys(reflect.TypeOf(rawNode{})) })
	explainKeys = sync.OnceValue(func() map[string]bool { return foldedKeys(reflect.TypeOf(rawExplain{})) })
)

func foldedKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			for k := range foldedKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		keys[strings.ToLower(name)] = true
	}
	return keys
}
