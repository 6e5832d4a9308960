package sqlparse

import (
	"strings"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// Describe parses one statement and returns its shape: relations,
// predicates per column, ORDER BY, LIMIT and, for queue claims, how the
// claimed rows are locked. pg_query's own summary misses predicates in JOIN
// ... ON, HAVING and subqueries, so the clauses are walked here.
func Describe(sql string) (*QueryShape, error) {
	st, err := Parse(sql)
	if err != nil {
		return nil, err
	}
	return st.Shape(), nil
}

// Shape describes an already parsed statement. It is worked out once and
// shared: callers must not change it.
func (s *Statement) Shape() *QueryShape {
	if s.shape == nil {
		s.shape = s.describe()
	}
	return s.shape
}

// describe walks the tree once for the relations (with their aliases), the
// column predicates of WHERE, JOIN ... ON and HAVING, the ORDER BY columns,
// LIMIT, the columns an UPDATE sets and the shape of a queue claim.
func (s *Statement) describe() *QueryShape {
	b := &shapeBuilder{stmt: s, sh: &QueryShape{Command: "OTHER"}, aliases: map[string]RelRef{}}
	b.relations()
	quals, root := b.command()
	var limited []*pgast.SelectStmt
	s.walk(func(m pgast.Message) bool {
		switch n := m.(type) {
		case *pgast.SelectStmt:
			quals = append(quals, n.WhereClause, n.HavingClause)
			if n.LimitCount != nil {
				limited = append(limited, n)
			}
		case *pgast.JoinExpr:
			quals = append(quals, n.Quals)
		}
		return true
	})
	for _, q := range quals {
		if q != nil {
			walkShallow(q, b.predicate)
		}
	}
	// The ORDER BY that matters for an index is the one next to a LIMIT
	// (a top-N sort); without a LIMIT, the outer query's.
	sorted := root
	if len(limited) > 0 {
		b.sh.HasLimit = true
		sorted = limited[0]
	}
	if sorted != nil {
		b.orderBy(sorted.SortClause)
	}
	b.sh.Claim = s.claim(b.sh)
	return b.sh
}

// shapeBuilder reads one statement's shape: the relations it names (and
// their aliases), then its command, predicates and ORDER BY, each column
// resolved to its relation.
type shapeBuilder struct {
	stmt    *Statement
	sh      *QueryShape
	aliases map[string]RelRef
	single  RelRef // the only relation, which unqualified columns belong to
}

// relations lists the relations the statement reads, once each, without
// its CTE names, and records every alias.
func (b *shapeBuilder) relations() {
	seen := map[RelRef]bool{}
	b.stmt.walk(func(m pgast.Message) bool {
		if rv, ok := m.(*pgast.RangeVar); ok {
			r := RelRef{Schema: rv.Schemaname, Name: rv.Relname}
			if !seen[r] {
				seen[r] = true
				b.sh.Relations = append(b.sh.Relations, r)
			}
			b.aliases[rv.Relname] = r
			if rv.Alias != nil && rv.Alias.Aliasname != "" {
				b.aliases[rv.Alias.Aliasname] = r
			}
		}
		return true
	})
	// CTE names are not relations.
	b.stmt.walk(func(m pgast.Message) bool {
		if cte, ok := m.(*pgast.CommonTableExpr); ok {
			r := RelRef{Name: cte.Ctename}
			if seen[r] {
				delete(seen, r)
				for i, x := range b.sh.Relations {
					if x == r {
						b.sh.Relations = append(b.sh.Relations[:i], b.sh.Relations[i+1:]...)
						break
					}
				}
			}
		}
		return true
	})
	if len(b.sh.Relations) == 1 {
		b.single = b.sh.Relations[0]
	}
}

// command reads the statement's command and target, and returns the
// top-level WHERE of an UPDATE or DELETE and the SELECT at the root.
func (b *shapeBuilder) command() (quals []*pgast.Node, root *pgast.SelectStmt) {
	n, sh := b.stmt.root, b.sh
	switch {
	case n.GetSelectStmt() != nil:
		sh.Command, root = "SELECT", n.GetSelectStmt()
	case n.GetUpdateStmt() != nil:
		u := n.GetUpdateStmt()
		sh.Command, sh.Target = "UPDATE", relRef(u.Relation)
		quals = append(quals, u.WhereClause)
		for _, t := range u.TargetList {
			if rt := t.GetResTarget(); rt != nil && rt.Name != "" {
				sh.SetColumns = append(sh.SetColumns, rt.Name)
			}
		}
	case n.GetDeleteStmt() != nil:
		d := n.GetDeleteStmt()
		sh.Command, sh.Target = "DELETE", relRef(d.Relation)
		quals = append(quals, d.WhereClause)
	case n.GetInsertStmt() != nil:
		sh.Command, sh.Target = "INSERT", relRef(n.GetInsertStmt().Relation)
	case n.GetMergeStmt() != nil:
		sh.Command, sh.Target = "MERGE", relRef(n.GetMergeStmt().Relation)
	}
	return quals, root
}

// resolve names a column reference's relation: the only relation for a
// bare column, the aliased or named one for a qualified column.
func (b *shapeBuilder) resolve(cr *pgast.ColumnRef) (RelRef, string, bool) {
	var parts []string
	for _, f := range cr.Fields {
		str := f.GetString_()
		if str == nil {
			return RelRef{}, "", false
		}
		parts = append(parts, str.Sval)
	}
	switch len(parts) {
	case 1:
		return b.single, parts[0], true
	case 2:
		if r, ok := b.aliases[parts[0]]; ok {
			return r, parts[1], true
		}
		return RelRef{Name: parts[0]}, parts[1], true
	case 3:
		return RelRef{Schema: parts[0], Name: parts[1]}, parts[2], true
	}
	return RelRef{}, "", false
}

// add records a predicate on the column expr refers to, if it does; join
// says the other side is a column.
func (b *shapeBuilder) add(expr *pgast.Node, op string, join bool) {
	if cr, cast := columnOf(expr); cr != nil {
		if rel, col, ok := b.resolve(cr); ok {
			b.sh.Predicates = append(b.sh.Predicates, Predicate{Rel: rel, Column: col, Op: op, Cast: cast, Join: join})
		}
	}
}

// predicate reads one node of a WHERE, HAVING or join condition.
func (b *shapeBuilder) predicate(m pgast.Message) {
	switch n := m.(type) {
	case *pgast.A_Expr:
		op := exprOp(n)
		l, _ := columnOf(n.Lexpr)
		r, _ := columnOf(n.Rexpr)
		join := l != nil && r != nil
		b.add(n.Lexpr, op, join)
		b.add(n.Rexpr, op, join)
	case *pgast.SubLink:
		// col IN (SELECT ...) / col = ANY (SELECT ...)
		if n.SubLinkType == pgast.SubLinkType_ANY_SUBLINK {
			b.add(n.Testexpr, OpEq, false)
		}
	case *pgast.NullTest:
		op := OpNotNull
		if n.Nulltesttype == pgast.NullTestType_IS_NULL {
			op = OpIsNull
		}
		b.add(n.Arg, op, false)
	}
}

// orderBy reads the columns of an ORDER BY.
func (b *shapeBuilder) orderBy(sortClause []*pgast.Node) {
	for _, n := range sortClause {
		sb := n.GetSortBy()
		if sb == nil {
			continue
		}
		if cr, _ := columnOf(sb.Node); cr != nil {
			if rel, col, ok := b.resolve(cr); ok {
				b.sh.OrderBy = append(b.sh.OrderBy, OrderColumn{Rel: rel, Column: col, Desc: sb.SortbyDir == pgast.SortByDir_SORTBY_DESC})
			}
		}
	}
}

func relRef(rv *pgast.RangeVar) RelRef {
	if rv == nil {
		return RelRef{}
	}
	return RelRef{Schema: rv.Schemaname, Name: rv.Relname}
}

// exprOp classifies a comparison by what a B-tree can do with it:
// equality, range, or other.
func exprOp(e *pgast.A_Expr) string {
	name := ""
	if len(e.Name) > 0 {
		if s := e.Name[len(e.Name)-1].GetString_(); s != nil {
			name = s.Sval
		}
	}
	switch e.Kind {
	case pgast.A_Expr_Kind_AEXPR_IN:
		if name == "=" {
			return OpEq
		}
	case pgast.A_Expr_Kind_AEXPR_OP_ANY:
		if name == "=" {
			return OpEq
		}
	case pgast.A_Expr_Kind_AEXPR_BETWEEN, pgast.A_Expr_Kind_AEXPR_BETWEEN_SYM:
		return OpRange
	case pgast.A_Expr_Kind_AEXPR_OP:
		switch name {
		case "=":
			return OpEq
		case "<", "<=", ">", ">=":
			return OpRange
		}
	}
	return OpOther
}

// columnOf returns the column on one side of a comparison, looking through
// casts (and saying so: a cast on the column side can defeat an index).
func columnOf(n *pgast.Node) (*pgast.ColumnRef, bool) {
	cast := false
	for n != nil {
		if cr := n.GetColumnRef(); cr != nil {
			return cr, cast
		}
		if tc := n.GetTypeCast(); tc != nil {
			n, cast = tc.Arg, true
			continue
		}
		return nil, false
	}
	return nil, false
}

// walkShallow visits the nodes of one clause without entering subqueries:
// their own clauses are visited on their own, with their own scope.
func walkShallow(n *pgast.Node, visit func(pgast.Message)) {
	var rec func(m pgast.Message) bool
	rec = func(m pgast.Message) bool {
		if _, ok := m.(*pgast.SelectStmt); ok {
			return true
		}
		visit(m)
		return pgast.EachChild(m, rec)
	}
	if n != nil {
		rec(n)
	}
}

// claim recognises a queue claim: an UPDATE or DELETE whose rows come from a
// subquery (FROM, WHERE ... IN/=, or a WITH) over the same table with a
// LIMIT; or a SELECT ... LIMIT ... FOR UPDATE that waits for locks.
func (s *Statement) claim(sh *QueryShape) *Claim {
	var sel *pgast.SelectStmt
	pos := ""
	switch sh.Command {
	case "UPDATE", "DELETE":
		var from, where []*pgast.Node
		var with *pgast.WithClause
		if u := s.root.GetUpdateStmt(); u != nil {
			from, where, with = u.FromClause, []*pgast.Node{u.WhereClause}, u.WithClause
		} else {
			d := s.root.GetDeleteStmt()
			from, where, with = d.UsingClause, []*pgast.Node{d.WhereClause}, d.WithClause
		}
		find := func(nodes []*pgast.Node, where string) {
			for _, n := range nodes {
				if n == nil || sel != nil {
					continue
				}
				sub := &Statement{root: n}
				sub.walk(func(m pgast.Message) bool {
					if st, ok := m.(*pgast.SelectStmt); ok && st.LimitCount != nil && selects(st, sh.Target) {
						sel, pos = st, where
						return false
					}
					return true
				})
			}
		}
		find(from, "FROM")
		find(where, "WHERE")
		if with != nil {
			find(with.Ctes, "WITH")
		}
	case "SELECT":
		root := s.root.GetSelectStmt()
		if root.LimitCount != nil && len(root.LockingClause) > 0 && len(sh.Relations) > 0 {
			sel, pos = root, "SELECT"
			sh.Target = sh.Relations[0]
		}
	}
	if sel == nil {
		return nil
	}
	c := &Claim{Table: sh.Target, Position: pos, Wait: WaitBlock}
	for _, n := range sel.LockingClause {
		if lc := n.GetLockingClause(); lc != nil {
			c.Lock, c.Wait = lockStrengths[lc.Strength], lockWaits[lc.WaitPolicy]
		}
	}
	if c.Lock != LockNone && c.Wait == WaitSkipLocked {
		return c
	}
	// Rewrite: keep an existing exclusive strength, else FOR UPDATE; and
	// SKIP LOCKED so that workers pass over each other's rows.
	old := sel.LockingClause
	strength := pgast.LockClauseStrength_LCS_FORUPDATE
	if c.Lock == LockNoKeyUpd {
		strength = pgast.LockClauseStrength_LCS_FORNOKEYUPDATE
	}
	sel.LockingClause = []*pgast.Node{{Node: &pgast.LockingClause{
		Strength: strength, WaitPolicy: pgast.LockWaitPolicy_LockWaitSkip}}}
	if out, err := pgast.Deparse(s.tree); err == nil {
		c.Rewrite = out
	}
	sel.LockingClause = old
	return c
}

// lockStrengths and lockWaits name a locking clause's strength and wait
// policy.
var (
	lockStrengths = map[pgast.LockClauseStrength]string{
		pgast.LockClauseStrength_LCS_FORUPDATE:      LockForUpdate,
		pgast.LockClauseStrength_LCS_FORNOKEYUPDATE: LockNoKeyUpd,
		pgast.LockClauseStrength_LCS_FORSHARE:       LockForShare,
		pgast.LockClauseStrength_LCS_FORKEYSHARE:    LockForKeyShr,
	}
	lockWaits = map[pgast.LockWaitPolicy]string{
		pgast.LockWaitPolicy_LockWaitBlock: WaitBlock,
		pgast.LockWaitPolicy_LockWaitSkip:  WaitSkipLocked,
		pgast.LockWaitPolicy_LockWaitError: WaitNoWait,
	}
)

// selects says whether a SELECT reads the given table in its own FROM.
func selects(st *pgast.SelectStmt, table RelRef) bool {
	for _, n := range st.FromClause {
		found := false
		(&Statement{root: n}).walk(func(m pgast.Message) bool {
			if rv, ok := m.(*pgast.RangeVar); ok && rv.Relname == table.Name &&
				(table.Schema == "" || rv.Schemaname == "" || rv.Schemaname == table.Schema) {
				found = true
				return false
			}
			if _, ok := m.(*pgast.SelectStmt); ok {
				return false
			}
			return true
		})
		if found {
			return true
		}
	}
	return false
}

// Retarget rewrites every reference to table so that it reads
// toSchema.toName instead, keeping the old name as the alias so qualified
// column references still resolve. It returns the rewritten statement and
// how many references it changed. The verification engine uses it to run a
// statement against a temporary copy of a table.
func (s *Statement) Retarget(table RelRef, toSchema, toName string) (*Statement, int, error) {
	return s.rewrite("rewriting the statement for a copy of "+table.Name, func(c *Statement) int {
		n := 0
		c.walk(func(m pgast.Message) bool {
			rv, ok := m.(*pgast.RangeVar)
			if !ok || rv.Relname != table.Name || (rv.Schemaname != "" && rv.Schemaname != table.Schema) {
				return true
			}
			if rv.Alias == nil || rv.Alias.Aliasname == "" {
				rv.Alias = &pgast.Alias{Aliasname: rv.Relname}
			}
			rv.Schemaname, rv.Relname = toSchema, toName
			n++
			return true
		})
		return n
	})
}

// OnlyRelation reports whether every relation the statement reads or writes
// is the given one (CTE names aside).
func OnlyRelation(sh *QueryShape, table RelRef) bool {
	for _, r := range sh.Relations {
		if r.Name != table.Name || (r.Schema != "" && table.Schema != "" && !strings.EqualFold(r.Schema, table.Schema)) {
			return false
		}
	}
	return len(sh.Relations) > 0
}
