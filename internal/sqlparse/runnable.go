package sqlparse

import (
	"fmt"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
	tree := proto.Clone(s.tree).(*pg_query.ParseResult)
	(&Statement{tree: tree, root: tree.Stmts[0].Stmt}).walk(func(m proto.Message) bool {
		if f, ok := m.(*pg_query.FuncCall); ok && extractOfParam(f) {
			f.Funcformat = pg_query.CoercionForm_COERCE_EXPLICIT_CALL
		}
		return true
	})
	out, err := pg_query.Deparse(tree)
	if err != nil {
		return "", fmt.Errorf("rewriting the typed literals pg_stat_statements left with $n: %w", err)
	}
	again, err := pg_query.Parse(out)
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
	s.walk(func(m proto.Message) bool {
		switch n := m.(type) {
		case *pg_query.TypeCast:
			if n.Location < 0 && n.Arg != nil && n.Arg.GetParamRef() != nil {
				found = true
			}
		case *pg_query.FuncCall:
			found = found || extractOfParam(n)
		}
		return !found
	})
	return found
}

// extractOfParam is EXTRACT($n FROM x) written in SQL syntax.
func extractOfParam(f *pg_query.FuncCall) bool {
	return f.Funcformat == pg_query.CoercionForm_COERCE_SQL_SYNTAX && funcName(f) == "extract" &&
		len(f.Args) == 2 && f.Args[0].GetParamRef() != nil
}

// sameTree compares two parse trees ignoring token positions and how a
// function call is spelled (SQL syntax or an ordinary call).
func sameTree(a, b *pg_query.ParseResult) bool {
	a, b = proto.Clone(a).(*pg_query.ParseResult), proto.Clone(b).(*pg_query.ParseResult)
	for _, r := range []*pg_query.ParseResult{a, b} {
		for _, st := range r.Stmts {
			st.StmtLocation, st.StmtLen = 0, 0
			clearPositions(st.Stmt.ProtoReflect())
		}
	}
	return proto.Equal(a, b)
}

func clearPositions(m protoreflect.Message) {
	var clear []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Name() == "location" || fd.Name() == "funcformat":
			clear = append(clear, fd)
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				clearPositions(l.Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			clearPositions(v.Message())
		}
		return true
	})
	for _, fd := range clear {
		m.Clear(fd)
	}
}
