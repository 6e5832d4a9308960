package sqlparse

import (
	"fmt"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// CastToColumn rewrites comparisons of column so that the column stands
// bare and, unless keepValue, the other side is cast to colType: the fix
// for an implicit cast, e.g. "customer_id = 4242.0" becomes
// "customer_id = 4242.0::integer" and "placed_at::timestamptz > $1"
// becomes "placed_at > $1" (keepValue, for a cross-type operator the
// index's operator family has). It returns the rewritten statement and how many
// comparisons changed (the statement itself when none did).
func (s *Statement) CastToColumn(column, colType string, keepValue bool) (*Statement, int, error) {
	typ, err := typeName(colType)
	if err != nil {
		return nil, 0, err
	}
	return s.rewrite("rewriting the comparison of "+column, func(c *Statement) int {
		n := 0
		c.walk(func(m pgast.Message) bool {
			e, ok := m.(*pgast.A_Expr)
			if !ok || e.Lexpr == nil || e.Rexpr == nil {
				return true
			}
			switch e.Kind {
			case pgast.A_Expr_Kind_AEXPR_OP, pgast.A_Expr_Kind_AEXPR_IN, pgast.A_Expr_Kind_AEXPR_BETWEEN,
				pgast.A_Expr_Kind_AEXPR_NOT_BETWEEN, pgast.A_Expr_Kind_AEXPR_OP_ANY:
			default:
				return true
			}
			for _, side := range []struct{ col, val **pgast.Node }{{&e.Lexpr, &e.Rexpr}, {&e.Rexpr, &e.Lexpr}} {
				bare, ok := namesColumn(*side.col, column)
				if !ok || isColumn(*side.val) {
					continue
				}
				*side.col = bare
				if !keepValue {
					*side.val = castEach(*side.val, typ)
				}
				n++
				break
			}
			return true
		})
		return n
	})
}

// namesColumn returns the bare ColumnRef when n is the column, possibly
// wrapped in casts.
func namesColumn(n *pgast.Node, column string) (*pgast.Node, bool) {
	for n != nil {
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
			continue
		}
		if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) > 0 {
			if s := cr.Fields[len(cr.Fields)-1].GetString_(); s != nil && s.Sval == column {
				return n, true
			}
		}
		return nil, false
	}
	return nil, false
}

// isColumn says whether n is a column reference, possibly cast.
func isColumn(n *pgast.Node) bool {
	for n != nil {
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
			continue
		}
		return n.GetColumnRef() != nil
	}
	return false
}

// castEach casts a value, or each member of an IN / BETWEEN list.
func castEach(n *pgast.Node, typ *pgast.TypeName) *pgast.Node {
	if l := n.GetList(); l != nil {
		for i, item := range l.Items {
			l.Items[i] = castEach(item, typ)
		}
		return n
	}
	return &pgast.Node{Node: &pgast.TypeCast{Arg: n, TypeName: typ.Clone(), Location: -1}}
}

// typeName parses a type as format_type prints it ("numeric(12,2)",
// "timestamp without time zone", "character(8)").
func typeName(t string) (*pgast.TypeName, error) {
	tree, err := pgast.Parse("SELECT NULL::" + t)
	if err != nil {
		return nil, fmt.Errorf("parsing type %q: %w", t, err)
	}
	var tn *pgast.TypeName
	(&Statement{tree: tree, root: tree.Stmts[0].Stmt}).walk(func(m pgast.Message) bool {
		if x, ok := m.(*pgast.TypeName); ok && tn == nil {
			tn = x
		}
		return tn == nil
	})
	if tn == nil {
		return nil, fmt.Errorf("%q is not a type name", t)
	}
	return tn, nil
}

// CastToColumnOnce is CastToColumn for a value that PostgreSQL would
// otherwise compute for every row: the value is cast to the column's type
// inside a scalar subquery, which PostgreSQL evaluates once (an InitPlan).
// A stable expression such as now() - interval '1 day' in a sequential
// scan's filter is evaluated per row, cast and all; in a subquery, once.
// Constants and parameters are only cast.
func (s *Statement) CastToColumnOnce(column, colType string) (*Statement, int, error) {
	typ, err := typeName(colType)
	if err != nil {
		return nil, 0, err
	}
	return s.rewrite("computing the bound of "+column+" once", func(c *Statement) int {
		n := 0
		c.walk(func(m pgast.Message) bool {
			e, ok := m.(*pgast.A_Expr)
			if !ok || e.Lexpr == nil || e.Rexpr == nil || e.Kind != pgast.A_Expr_Kind_AEXPR_OP {
				return true
			}
			for _, side := range []struct{ col, val **pgast.Node }{{&e.Lexpr, &e.Rexpr}, {&e.Rexpr, &e.Lexpr}} {
				bare, ok := namesColumn(*side.col, column)
				if !ok || isColumn(*side.val) {
					continue
				}
				*side.col = bare
				cast := castEach(*side.val, typ)
				if constant(*side.val) {
					*side.val = cast
				} else {
					sel := &pgast.SelectStmt{TargetList: []*pgast.Node{{Node: &pgast.ResTarget{Val: cast, Location: -1}}},
						LimitOption: pgast.LimitOption_LIMIT_OPTION_DEFAULT, Op: pgast.SetOperation_SETOP_NONE}
					*side.val = &pgast.Node{Node: &pgast.SubLink{SubLinkType: pgast.SubLinkType_EXPR_SUBLINK,
						Subselect: &pgast.Node{Node: sel}, Location: -1}}
				}
				n++
				break
			}
			return true
		})
		return n
	})
}

// constant says whether n is a literal or a parameter, possibly cast.
func constant(n *pgast.Node) bool {
	for n != nil {
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
			continue
		}
		return n.GetAConst() != nil || n.GetParamRef() != nil
	}
	return false
}
