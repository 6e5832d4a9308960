package sqlparse

import (
	"fmt"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// Runnable is the statement's text as the server will prepare it.
//
// pg_stat_statements replaces every constant by $n, including the string
// of a typed literal (interval '5 minutes' becomes interval $1, date
// '1994-01-01' becomes date $2) and the field of EXTRACT(year FROM x)
// (extract($3 FROM x)). pg_query's parser accepts both, PostgreSQL's
// grammar takes neither: PREPARE fails with a syntax error at the $n. So
// for such statements the text is deparsed from a copy of the tree in
// which the literal is an explicit cast ($1::interval, the same TypeCast
// node) and EXTRACT an ordinary call of pg_catalog.extract($3, x), the
// function it stands for. The result is parsed again and must give the
// same tree apart from positions and that call's spelling; otherwise it
// is refused, and the statement is never run. Other statements are sent
// as written.
func (s *Statement) Runnable() (string, error) {
	if n := s.ParamCount(); n > MaxParams {
		return "", fmt.Errorf("the statement names $%d; a statement can have at most %d parameters", n, MaxParams)
	}
	if !s.needsDeparse() {
		return s.text, nil
	}
	tree := s.tree.Clone()
	(&Statement{tree: tree, root: tree.Stmts[0].Stmt}).walk(func(m pgast.Message) bool {
		if f, ok := m.(*pgast.FuncCall); ok && extractOfParam(f) {
			f.Funcformat = pgast.CoercionForm_COERCE_EXPLICIT_CALL
		}
		return true
	})
	out, err := pgast.Deparse(tree)
	if err != nil {
		return "", fmt.Errorf("rewriting the typed literals pg_stat_statements left with $n: %w", err)
	}
	again, err := pgast.Parse(out)
	if err != nil {
		return "", fmt.Errorf("the statement rewritten for PREPARE does not parse: %w", err)
	}
	if !sameTree(s.tree, again) {
		return "", fmt.Errorf("the statement rewritten for PREPARE is not the same statement; it is not run")
	}
	return out, nil
}

// needsDeparse finds the $n the server's grammar does not take: a typed
// literal's string (a TypeCast the parser made without a :: of its own,
// so with no position) and EXTRACT's field.
func (s *Statement) needsDeparse() bool {
	found := false
	s.walk(func(m pgast.Message) bool {
		switch n := m.(type) {
		case *pgast.TypeCast:
			if n.Location < 0 && n.Arg != nil && n.Arg.GetParamRef() != nil {
				found = true
			}
		case *pgast.FuncCall:
			found = found || extractOfParam(n)
		}
		return !found
	})
	return found
}

// extractOfParam is EXTRACT($n FROM x) written in SQL syntax.
func extractOfParam(f *pgast.FuncCall) bool {
	return f.Funcformat == pgast.CoercionForm_COERCE_SQL_SYNTAX && funcName(f) == "extract" &&
		len(f.Args) == 2 && f.Args[0].GetParamRef() != nil
}

// sameTree compares two parse trees ignoring token positions and how a
// function call is spelled (SQL syntax or an ordinary call).
func sameTree(a, b *pgast.ParseResult) bool {
	a, b = a.Clone(), b.Clone()
	for _, r := range []*pgast.ParseResult{a, b} {
		for _, st := range r.Stmts {
			st.StmtLocation, st.StmtLen = 0, 0
			clearPositions(st.Stmt)
		}
	}
	return pgast.Equal(a, b)
}

// clearPositions zeroes where each token was and how each call was
// spelled, through the whole tree.
func clearPositions(m pgast.Message) {
	var rec func(m pgast.Message) bool
	rec = func(m pgast.Message) bool {
		pgast.Clear(m, "location")
		pgast.Clear(m, "funcformat")
		return pgast.EachChild(m, rec)
	}
	rec(m)
}
