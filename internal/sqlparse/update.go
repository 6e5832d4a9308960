package sqlparse

import (
	"errors"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// UpdateEveryRow is an UPDATE's SET list applied to every row of another
// table (toName, of the same columns): the WHERE clause and RETURNING
// list are dropped, so the application's change of values can be made to
// many rows at once. An UPDATE that joins other tables (FROM) or has a
// WITH clause is refused: without its WHERE it would not mean the same
// change.
func (s *Statement) UpdateEveryRow(toName string) (*Statement, error) {
	u := s.root.GetUpdateStmt()
	switch {
	case u == nil:
		return nil, errors.New("not an UPDATE")
	case len(u.FromClause) > 0:
		return nil, errors.New("the UPDATE joins other tables (FROM)")
	case u.WithClause != nil:
		return nil, errors.New("the UPDATE has a WITH clause")
	}
	out, _, err := s.rewrite("applying the SET list to every row", func(c *Statement) int {
		u := c.root.GetUpdateStmt()
		u.WhereClause, u.ReturningList = nil, nil
		// The SET list may name the table (SET n = jobs.n + 1): the alias
		// keeps those names pointing at the new table.
		alias := u.Relation.Relname
		if u.Relation.Alias != nil && u.Relation.Alias.Aliasname != "" {
			alias = u.Relation.Alias.Aliasname
		}
		u.Relation = &pgast.RangeVar{Relname: toName, Inh: true, Relpersistence: "p", Alias: &pgast.Alias{Aliasname: alias}, Location: -1}
		return 1
	})
	return out, err
}

// IndexOn is an index definition (as pg_get_indexdef prints it) made for
// another table, without a name so that PostgreSQL picks a free one.
func IndexOn(def, table string) (string, error) {
	tree, err := pgast.Parse(def)
	if err != nil {
		return "", fmt.Errorf("parsing the index definition: %w", err)
	}
	if len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetIndexStmt() == nil {
		return "", errors.New("not an index definition")
	}
	ix := tree.Stmts[0].Stmt.GetIndexStmt()
	ix.Idxname = ""
	ix.Relation = &pgast.RangeVar{Relname: table, Inh: true, Relpersistence: "p", Location: -1}
	out, err := pgast.Deparse(tree)
	if err != nil {
		return "", fmt.Errorf("rewriting the index definition: %w", err)
	}
	return out, nil
}
