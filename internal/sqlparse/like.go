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
		if !ok || e.Kind != pgast.A_Expr_Kind_AEXPR_LIKE || opName(e) != "~~" {
			return true
		}
		cr := unwrapColumn(e.Lexpr)
		if cr == nil {
			return true
		}
		param := 0
		switch {
		case e.Rexpr.GetParamRef() != nil:
			param = int(e.Rexpr.GetParamRef().Number)
		case e.Rexpr.GetAConst() != nil && e.Rexpr.GetAConst().GetSval() != nil:
			if p := e.Rexpr.GetAConst().GetSval().Sval; p == "" || p[0] == '%' || p[0] == '_' {
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
