package plan

import (
	"fmt"
	"strings"
)

// knownHeads are the node names EXPLAIN's text format starts a line with
// (after "Parallel ", "Partial ", "Finalize "). The root line must use one
// of them; a "->" line may name a node this list does not know yet.
var knownHeads = []string{
	"Seq Scan", "Sample Scan", "Index Only Scan", "Index Scan", "Bitmap Index Scan", "Bitmap Heap Scan",
	"Tid Range Scan", "Tid Scan", "Subquery Scan", "Function Scan", "Table Function Scan", "Values Scan",
	"CTE Scan", "Named Tuplestore Scan", "WorkTable Scan", "Foreign Scan", "Custom Scan",
	"Result", "ProjectSet", "Append", "Merge Append", "Recursive Union", "BitmapAnd", "BitmapOr",
	"Nested Loop", "Merge", "Hash", "Materialize", "Memoize", "Incremental Sort", "Sort", "Group",
	"Aggregate", "GroupAggregate", "HashAggregate", "MixedAggregate", "WindowAgg", "Unique",
	"Gather Merge", "Gather", "SetOp", "HashSetOp", "LockRows", "Limit",
	"Insert", "Update", "Delete", "Merge", "Foreign Insert", "Foreign Update", "Foreign Delete",
}

// relationScans read a table and print "on [schema.]table [alias]".
var relationScans = map[string]bool{
	"Seq Scan": true, "Sample Scan": true, "Index Scan": true, "Index Only Scan": true, "Bitmap Heap Scan": true,
	"Tid Scan": true, "Tid Range Scan": true, "Foreign Scan": true, "ModifyTable": true, "Custom Scan": true,
}

var joinTypes = []string{"Right Anti", "Right Semi", "Left", "Right", "Full", "Semi", "Anti"}

// parseHeader reads a node line without its "->" into n, which must be
// zero. ok is false when the line does not look like a node; strict
// requires a known node name (used for the first line, where nothing else
// proves this is a plan).
func parseHeader(n *Node, text string, strict bool) (bool, error) {
	name, rest := text, ""
	if i := strings.Index(text, "  ("); i >= 0 {
		name, rest = text[:i], text[i+2:]
	} else if i := strings.Index(text, " (actual "); i >= 0 {
		name, rest = text[:i], text[i+1:]
	} else if i := strings.Index(text, " (never executed)"); i >= 0 {
		name, rest = text[:i], text[i+1:]
	} else if strict {
		// COSTS OFF prints bare names; accept only a known one.
		rest = ""
	}
	if err := n.parseName(strings.TrimSpace(name)); err != nil {
		return false, err
	}
	if n.NodeType == "" || (strict && !known(n)) {
		return false, nil
	}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		if rest[0] != '(' {
			return false, fmt.Errorf("unexpected %q after the node's figures: %w", clip(rest), ErrNotAPlan)
		}
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return false, fmt.Errorf("%q stops inside its figures; the plan looks cut off: %w", clip(text), ErrTruncated)
		}
		group := rest[1:end]
		rest = rest[end+1:]
		switch {
		case group == "never executed":
			n.NeverExecuted = true
		case strings.HasPrefix(group, "cost="):
			for _, kv := range strings.Fields(group) {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "cost":
					a, b, _ := strings.Cut(v, "..")
					n.StartupCost, n.TotalCost = num(a), num(b)
				case "rows":
					n.PlanRows = num(v)
				case "width":
					n.PlanWidth = int(num(v))
				}
			}
		case strings.HasPrefix(group, "actual"):
			for _, kv := range strings.Fields(strings.TrimPrefix(group, "actual")) {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "time":
					a, b, _ := strings.Cut(v, "..")
					n.ActualStartupMS, n.ActualTotalMS = num(a), num(b)
				case "rows":
					n.ActualRows = num(v)
				case "loops":
					n.ActualLoops = num(v)
				}
			}
		}
	}
	return true, nil
}

// known says whether a node type is one PostgreSQL prints, so that a
// header line that merely looks like a node is not taken for one.
func known(n *Node) bool {
	switch n.NodeType {
	case "Aggregate", "Hash Join", "Merge Join", "ModifyTable", "SetOp", "Custom Scan":
		return true
	}
	for _, h := range knownHeads {
		if n.NodeType == h {
			return true
		}
	}
	return false
}

// modifyHeads are how TEXT names a ModifyTable, and a foreign table
// modified directly by its wrapper (a Foreign Scan that EXPLAIN names
// after the operation).
var modifyHeads = func() (out []struct{ head, nodeType, op string }) {
	for _, op := range []string{"Insert", "Update", "Delete", "Merge"} {
		out = append(out, struct{ head, nodeType, op string }{op + " on ", "ModifyTable", op},
			struct{ head, nodeType, op string }{"Foreign " + op + " on ", "Foreign Scan", op})
	}
	return out
}()

// aggregateStrategies are TEXT's names of an Aggregate by its strategy.
var aggregateStrategies = map[string]string{"Aggregate": "Plain", "GroupAggregate": "Sorted", "HashAggregate": "Hashed", "MixedAggregate": "Mixed"}

// parseName fills the node type and the names from "Parallel Index Scan
// Backward using idx on public.t x" and its siblings.
func (n *Node) parseName(s string) error {
	if s == "" {
		return nil
	}
	if r, ok := strings.CutPrefix(s, "Parallel "); ok {
		n.ParallelAware, s = true, r
	}
	for _, mode := range []string{"Partial ", "Finalize "} {
		if r, ok := strings.CutPrefix(s, mode); ok {
			n.PartialMode, s = strings.TrimSpace(mode), r
		}
	}
	for _, m := range modifyHeads {
		if r, ok := strings.CutPrefix(s, m.head); ok {
			n.NodeType, n.Operation = m.nodeType, m.op
			return n.target(r)
		}
	}
	if r, ok := strings.CutPrefix(s, "Custom Scan ("); ok {
		prov, after, _ := strings.Cut(r, ")")
		n.NodeType, n.CustomProvider = "Custom Scan", prov
		if t, ok := strings.CutPrefix(strings.TrimSpace(after), "on "); ok {
			return n.target(t)
		}
		return nil
	}
	// Joins: "Hash Left Join", "Nested Loop Anti Join", "Merge Join".
	for _, base := range []string{"Nested Loop", "Hash", "Merge"} {
		r, ok := strings.CutPrefix(s, base)
		if !ok || (r != "" && r[0] != ' ') {
			continue
		}
		r = strings.TrimSpace(r)
		if base == "Nested Loop" && r == "" {
			n.NodeType, n.JoinType = "Nested Loop", "Inner"
			return nil
		}
		if jt, ok := strings.CutSuffix(r, "Join"); ok {
			jt = strings.TrimSpace(jt)
			if jt == "" {
				jt = "Inner"
			}
			n.NodeType, n.JoinType = base+" Join", jt
			if base == "Nested Loop" {
				n.NodeType = "Nested Loop"
			}
			return nil
		}
	}
	if strategy, ok := aggregateStrategies[s]; ok {
		n.NodeType, n.Strategy = "Aggregate", strategy
		return nil
	}
	for _, so := range []string{"HashSetOp ", "SetOp "} {
		if r, ok := strings.CutPrefix(s, so); ok {
			n.NodeType, n.Command, n.Strategy = "SetOp", r, "Sorted"
			if so == "HashSetOp " {
				n.Strategy = "Hashed"
			}
			return nil
		}
	}
	head, tail := s, ""
	if i := strings.Index(s, " using "); i >= 0 {
		head, tail = s[:i], s[i:]
	} else if i := strings.Index(s, " on "); i >= 0 {
		head, tail = s[:i], s[i:]
	}
	if h, ok := strings.CutSuffix(head, " Backward"); ok {
		head, n.ScanDirection = h, "Backward"
	}
	n.NodeType = head
	if r, ok := strings.CutPrefix(tail, " using "); ok {
		idx, after, _ := strings.Cut(r, " on ")
		n.IndexName = unquote(idx)
		tail = " on " + after
		if after == "" {
			tail = ""
		}
	}
	if r, ok := strings.CutPrefix(tail, " on "); ok {
		if head == "Bitmap Index Scan" {
			n.IndexName = unquote(r)
			return nil
		}
		return n.target(r)
	}
	return nil
}

// target reads "[schema.]name [alias]" after " on ".
func (n *Node) target(s string) error {
	toks := identTokens(s)
	if len(toks) == 0 {
		return nil
	}
	parts := splitDots(toks[0])
	name := unquote(parts[len(parts)-1])
	schema := ""
	if len(parts) > 1 {
		schema = unquote(parts[len(parts)-2])
	}
	alias := name
	if len(toks) > 1 {
		alias = unquote(toks[1])
	}
	switch {
	case relationScans[n.NodeType]:
		n.RelationName, n.Schema = name, schema
	case n.NodeType == "CTE Scan" || n.NodeType == "WorkTable Scan":
		n.CTEName = name
	case n.NodeType == "Function Scan":
		n.FunctionName, n.Schema = name, schema
	default:
		if len(toks) == 1 {
			alias = unquote(toks[0])
		}
	}
	n.Alias = alias
	return nil
}

// identTokens splits on spaces outside double quotes. The tokens are
// pieces of s (quotes included).
func identTokens(s string) []string {
	var out []string
	inQ, start := false, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			inQ = !inQ
		case c == ' ' && !inQ:
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// splitDots cuts a qualified name at the dots outside double quotes.
func splitDots(s string) []string {
	var out []string
	inQ, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			inQ = !inQ
		case s[i] == '.' && !inQ:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote undoes quote_identifier: "My ""T""" -> My "T".
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}
