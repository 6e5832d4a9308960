package sqlparse

import (
	"errors"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// UpdateEveryRow is an UPDATE's SET list applied to every row of another
// table (toName, of the same columns): the WHERE clause and RETURNING
// list are dropped, so the application's change of values can be made to
// many rows at once. An UPDATE that joins other tables (FROM) keeps them,
// each as one of its rows (FROM (SELECT * FROM t LIMIT 1) AS t): the SET
// list takes its values from a real joined row, and each row of the copy
// is updated once, as the application's join updates each row it matches
// once, without the join's WHERE. A join written as JOIN ... ON in the
// FROM list, or a WITH clause, is refused: without its WHERE it would not
// mean the same change.
func (s *Statement) UpdateEveryRow(toName string) (*Statement, error) {
	u := s.root.GetUpdateStmt()
	switch {
	case u == nil:
		return nil, errors.New("not an UPDATE")
	case u.WithClause != nil:
		return nil, errors.New("the UPDATE has a WITH clause")
	}
	var aliases []string
	for _, n := range u.FromClause {
		switch {
		case n.GetRangeVar() != nil:
			rv := n.GetRangeVar()
			alias := rv.Relname
			if rv.Alias != nil && rv.Alias.Aliasname != "" {
				alias = rv.Alias.Aliasname
			}
			aliases = append(aliases, alias)
		case n.GetRangeSubselect() != nil && n.GetRangeSubselect().Alias != nil:
			aliases = append(aliases, n.GetRangeSubselect().Alias.Aliasname)
		default:
			return nil, errors.New("the UPDATE joins other tables with JOIN in its FROM list")
		}
	}
	out, _, err := s.rewrite("applying the SET list to every row", func(c *Statement) int {
		u := c.root.GetUpdateStmt()
		for i, n := range u.FromClause {
			one, err := pgast.Parse("SELECT * FROM pgmedic_joined LIMIT 1")
			if err != nil {
				return 0
			}
			sel := one.Stmts[0].Stmt
			inner := n
			if rv := n.GetRangeVar(); rv != nil {
				rv.Alias = nil
			} else if rs := n.GetRangeSubselect(); rs != nil {
				rs.Alias = &pgast.Alias{Aliasname: "pgmedic_joined"}
			}
			sel.GetSelectStmt().FromClause = []*pgast.Node{inner}
			u.FromClause[i] = &pgast.Node{Node: &pgast.RangeSubselect{Subquery: sel, Alias: &pgast.Alias{Aliasname: aliases[i]}}}
		}
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
