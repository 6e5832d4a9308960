package sqlparse

import (
	"errors"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// Batched rewrites a statement that looks one row up by a key (col = $n,
// the statement's only comparison with a parameter) into the form that
// looks up many in one call: col = ANY($n), with $n an array. It returns
// the rewritten statement, n and the column.
func (s *Statement) Batched() (*Statement, int, Column, error) {
	cols := s.ParamColumns()
	if s.ParamCount() != 1 || len(cols[1]) == 0 {
		return nil, 0, Column{}, errors.New("not a lookup by one parameter")
	}
	var col Column
	out, n, err := s.rewrite("batching the lookup", func(c *Statement) int {
		n := 0
		c.walk(func(m pgast.Message) bool {
			e, ok := m.(*pgast.A_Expr)
			if !ok || e.Kind != pgast.A_Expr_Kind_AEXPR_OP || opName(e) != "=" {
				return true
			}
			if e.Lexpr.GetParamRef() != nil {
				e.Lexpr, e.Rexpr = e.Rexpr, e.Lexpr
			}
			if e.Rexpr.GetParamRef() == nil || unwrapColumn(e.Lexpr) == nil {
				return true
			}
			e.Kind = pgast.A_Expr_Kind_AEXPR_OP_ANY
			n++
			return true
		})
		return n
	})
	if err != nil {
		return nil, 0, Column{}, err
	}
	if n != 1 {
		return nil, 0, Column{}, errors.New("the parameter is not compared with a column by =")
	}
	col = cols[1][0]
	return out, 1, col, nil
}
