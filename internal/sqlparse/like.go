package sqlparse

import (
	"github.com/pgmedic/pgmedic/internal/pgast"
)

// LikePrefix is a column matched with LIKE against a pattern that may
// start with a fixed prefix: a parameter (pg_stat_statements replaced the
// pattern), or a constant that does not start with a wildcard.
type LikePrefix struct {
	Column Column
	Param  int // the $n of the pattern; 0 for a constant
}

// LikePrefixes lists the columns the statement matches with LIKE (not
// ILIKE, whose prefix a B-tree serves only when it has no letters)
// against a pattern that can be a prefix, with aliases resolved.
func (s *Statement) LikePrefixes() []LikePrefix {
	resolve := s.columnResolver()
	var out []LikePrefix
	s.walk(func(m pgast.Message) bool {
		e, ok := m.(*pgast.A_Expr)
		// LIKE parses as a LIKE expression; its operator written out,
		// as a plan prints it (sku ~~ 'GZ4%'), as a plain operator.
		if !ok || (e.Kind != pgast.A_Expr_Kind_AEXPR_LIKE && e.Kind != pgast.A_Expr_Kind_AEXPR_OP) || opName(e) != "~~" {
			return true
		}
		cr := unwrapColumn(e.Lexpr)
		if cr == nil {
			return true
		}
		// A plan prints the pattern with its type: 'GZ4%'::text.
		pattern := e.Rexpr
		for pattern != nil && pattern.GetTypeCast() != nil {
			pattern = pattern.GetTypeCast().Arg
		}
		param := 0
		switch {
		case pattern == nil:
			return true
		case pattern.GetParamRef() != nil:
			param = int(pattern.GetParamRef().Number)
		case pattern.GetAConst() != nil && pattern.GetAConst().GetSval() != nil:
			if p := pattern.GetAConst().GetSval().Sval; p == "" || p[0] == '%' || p[0] == '_' {
				return true
			}
		default:
			return true
		}
		for _, c := range resolve(cr) {
			out = append(out, LikePrefix{Column: c, Param: param})
		}
		return true
	})
	return out
}

// ColumnNames lists, once each and in the order they first appear, the
// names of the columns the statement refers to (the last field of each
// column reference).
func (s *Statement) ColumnNames() []string {
	var out []string
	seen := map[string]bool{}
	s.walk(func(m pgast.Message) bool {
		if cr, ok := m.(*pgast.ColumnRef); ok {
			if name := lastField(cr); name != "" && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
		return true
	})
	return out
}
