package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// Thresholds of large-offset (see docs/rules/large-offset.md).
const (
	largeOffsetMinDiscarded = 1000
	largeOffsetMinShare     = 0.9 // share of the rows read that OFFSET discarded
)

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
	parts := plan.SplitList(sortKey)
	if len(parts) == 0 {
		parts = []string{""}
	}
	for _, part := range parts {
		add(part)
	}
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

// LargeOffsetID is the stable id of the rule.
const LargeOffsetID = "large-offset"
