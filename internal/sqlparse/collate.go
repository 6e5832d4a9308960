package sqlparse

import (
	"github.com/pgmedic/pgmedic/internal/pgast"
)

// A sort under a linguistic collation (an ICU locale, or a libc one such
// as en_US.UTF-8) compares every pair of text keys through the locale's
// rules, which costs several times a byte comparison. COLLATE "C" on the
// key sorts by bytes: the same rows, in a different order (upper case
// before lower case, accented letters after z), which is fine for keys
// people never read in order: keyset pagination, deduplication, merge
// input, grouping.

// SortKeys counts the sort keys CollateSortKeys can give a collation, in
// the order it numbers them: the ORDER BY of every SELECT in the
// statement (subqueries included), of window definitions and of ordered
// aggregates. A key that already names its collation does not count, nor
// does a constant that is not an output column's position.
func (s *Statement) SortKeys() int {
	n := 0
	s.eachSortKey(func(sb *pgast.SortBy, _ *pgast.Node) { n++ })
	return n
}

// CollateSortKeys gives the sort keys whose numbers are in which (as
// SortKeys counts them) the collation: "ORDER BY name" becomes "ORDER BY
// name COLLATE "C"". A key that is an output column's position or name is
// replaced by that column's expression first, since a collated
// expression is resolved against the input columns, not the output's
// names. It returns the rewritten statement and how many keys changed.
func (s *Statement) CollateSortKeys(collation string, which []int) (*Statement, int, error) {
	want := map[int]bool{}
	for _, i := range which {
		want[i] = true
	}
	return s.rewrite("collating the sort keys", func(c *Statement) int {
		i, n := 0, 0
		c.eachSortKey(func(sb *pgast.SortBy, expr *pgast.Node) {
			if want[i] {
				sb.Node = &pgast.Node{Node: &pgast.CollateClause{
					Arg:      expr.Clone(),
					Collname: []*pgast.Node{{Node: &pgast.String{Sval: collation}}},
					Location: -1}}
				n++
			}
			i++
		})
		return n
	})
}

// eachSortKey calls fn with every countable sort key and the expression
// it sorts by (an output column's expression for a position or a name).
func (s *Statement) eachSortKey(fn func(sb *pgast.SortBy, expr *pgast.Node)) {
	visit := func(keys []*pgast.Node, targets []*pgast.Node) {
		for _, k := range keys {
			sb := k.GetSortBy()
			if sb == nil || sb.Node == nil || sb.Node.GetCollateClause() != nil {
				continue
			}
			expr := sb.Node
			if out := outputColumn(sb.Node, targets); out != nil {
				expr = out
			} else if sb.Node.GetAConst() != nil {
				continue
			}
			fn(sb, expr)
		}
	}
	s.walk(func(m pgast.Message) bool {
		switch x := m.(type) {
		case *pgast.SelectStmt:
			// A set operation's ORDER BY names the result's columns, which
			// no expression can reach.
			if x.Op == pgast.SetOperation_SETOP_NONE {
				visit(x.SortClause, x.TargetList)
			}
		case *pgast.WindowDef:
			visit(x.OrderClause, nil)
		case *pgast.FuncCall:
			visit(x.AggOrder, nil)
		}
		return true
	})
}

// outputColumn is the expression of the output column a sort key names
// by position (ORDER BY 2) or by its name (ORDER BY total for "sum(x) AS
// total"), or nil when the key is an expression of its own. A bare name
// that is both an output name and an input column means the output
// column, as PostgreSQL resolves it.
func outputColumn(key *pgast.Node, targets []*pgast.Node) *pgast.Node {
	if len(targets) == 0 {
		return nil
	}
	if c := key.GetAConst(); c != nil {
		if iv := c.GetIval(); iv != nil && iv.Ival >= 1 && int(iv.Ival) <= len(targets) {
			if rt := targets[iv.Ival-1].GetResTarget(); rt != nil && rt.Val != nil && !star(rt.Val) {
				return rt.Val
			}
		}
		return nil
	}
	cr := key.GetColumnRef()
	if cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetString_() == nil {
		return nil
	}
	name := cr.Fields[0].GetString_().Sval
	for _, t := range targets {
		if rt := t.GetResTarget(); rt != nil && rt.Name == name && rt.Val != nil {
			return rt.Val
		}
	}
	return nil
}

// star says whether an output column is * or t.*, which a position
// cannot name one column of.
func star(n *pgast.Node) bool {
	cr := n.GetColumnRef()
	if cr == nil || len(cr.Fields) == 0 {
		return false
	}
	return cr.Fields[len(cr.Fields)-1].GetAStar() != nil
}
