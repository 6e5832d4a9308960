package sqlparse

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// The rewrites below turn a schema change into the form of it that holds
// a strong table lock briefly or not at all. Each keeps the statement's
// effect: the same index, constraint or column, under the same name when
// it was given one (and the name PostgreSQL would have chosen when not).

// Concurrently is CREATE INDEX, DROP INDEX, REINDEX or REFRESH
// MATERIALIZED VIEW with CONCURRENTLY: ShareUpdateExclusiveLock instead
// of a lock that blocks writes (or reads). False when the statement has
// no concurrent form or already is one.
func (s *Statement) Concurrently() (string, bool) {
	if s == nil || s.root == nil {
		return "", false
	}
	out, n, err := s.rewrite("CONCURRENTLY", func(c *Statement) int {
		switch {
		case c.root.GetIndexStmt() != nil:
			ix := c.root.GetIndexStmt()
			if ix.Concurrent {
				return 0
			}
			ix.Concurrent = true
			return 1
		case c.root.GetDropStmt() != nil:
			d := c.root.GetDropStmt()
			// DROP INDEX CONCURRENTLY takes one index and no CASCADE.
			if d.RemoveType != pgast.ObjectType_OBJECT_INDEX || d.Concurrent || len(d.Objects) != 1 || d.Behavior == pgast.DropBehavior_DROP_CASCADE {
				return 0
			}
			d.Concurrent = true
			return 1
		case c.root.GetReindexStmt() != nil:
			r := c.root.GetReindexStmt()
			if hasOption(r.Params, "concurrently") || r.Kind == pgast.ReindexObjectType_REINDEX_OBJECT_SYSTEM {
				return 0
			}
			r.Params = append(r.Params, pgast.MakeSimpleDefElemNode("concurrently", nil, -1))
			return 1
		}
		return 0
	})
	if err != nil || n == 0 {
		return "", false
	}
	return out.text, true
}

// alterOne is the statement's single ALTER TABLE subcommand, on a copy of
// the tree, and the table's quoted name.
func (s *Statement) alterOne() (*pgast.AlterTableCmd, *pgast.RangeVar, bool) {
	if s == nil || s.root == nil {
		return nil, nil, false
	}
	a := s.root.GetAlterTableStmt()
	if a == nil || a.Relation == nil || len(a.Cmds) != 1 || a.Cmds[0].GetAlterTableCmd() == nil {
		return nil, nil, false
	}
	return a.Cmds[0].GetAlterTableCmd(), a.Relation, true
}

// Actions cuts an ALTER TABLE with several subcommands into one statement
// per subcommand, in order, so that each can take its own safer form.
// Nil when there is one subcommand or the statement is not ALTER TABLE.
func (s *Statement) Actions() []*Statement {
	if s == nil || s.root == nil {
		return nil
	}
	a := s.root.GetAlterTableStmt()
	if a == nil || len(a.Cmds) < 2 {
		return nil
	}
	var out []*Statement
	for i := range a.Cmds {
		one, _, err := s.rewrite("ALTER TABLE subcommand", func(c *Statement) int {
			ca := c.root.GetAlterTableStmt()
			ca.Cmds = ca.Cmds[i : i+1]
			return 1
		})
		if err != nil {
			return nil
		}
		out = append(out, one)
	}
	return out
}

// NotValid splits ADD FOREIGN KEY or ADD CHECK into the constraint added
// NOT VALID (a short lock, no scan of the rows) and VALIDATE CONSTRAINT
// (ShareUpdateExclusiveLock: reads and writes go on while it scans).
func (s *Statement) NotValid() (steps []string, ok bool) {
	cmd, rel, ok := s.alterOne()
	if !ok || cmd.Subtype != pgast.AlterTableType_AT_AddConstraint {
		return nil, false
	}
	con := cmd.GetDef().GetConstraint()
	if con == nil || con.SkipValidation || (con.Contype != pgast.ConstrType_CONSTR_FOREIGN && con.Contype != pgast.ConstrType_CONSTR_CHECK) {
		return nil, false
	}
	name := con.Conname
	if name == "" {
		name = constraintName(rel.Relname, con)
	}
	out, _, err := s.rewrite("NOT VALID", func(c *Statement) int {
		cc, _, _ := c.alterOne()
		k := cc.GetDef().GetConstraint()
		k.SkipValidation, k.InitiallyValid, k.Conname = true, false, name
		return 1
	})
	if err != nil {
		return nil, false
	}
	table := QuoteQualified(rel.Schemaname, rel.Relname)
	return []string{out.text, "ALTER TABLE " + table + " VALIDATE CONSTRAINT " + QuoteIdent(name)}, true
}

// NotNullByCheck is SET NOT NULL proved by a validated CHECK constraint:
// PostgreSQL 12 and later skip SET NOT NULL's full scan (under
// AccessExclusiveLock) when a valid CHECK (col IS NOT NULL) exists.
func (s *Statement) NotNullByCheck() (steps []string, ok bool) {
	cmd, rel, ok := s.alterOne()
	if !ok || cmd.Subtype != pgast.AlterTableType_AT_SetNotNull {
		return nil, false
	}
	return notNullSteps(QuoteQualified(rel.Schemaname, rel.Relname), rel.Relname, cmd.Name), true
}

func notNullSteps(table, relname, column string) []string {
	check := QuoteIdent(truncName(relname + "_" + column + "_not_null"))
	col := QuoteIdent(column)
	return []string{
		fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s CHECK (%s IS NOT NULL) NOT VALID", table, check, col),
		fmt.Sprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", table, check),
		fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", table, col),
		fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", table, check),
	}
}

// UniqueByIndex is ADD PRIMARY KEY or ADD UNIQUE built as a unique index
// CONCURRENTLY first, then attached with ADD CONSTRAINT ... USING INDEX,
// which only takes the lock briefly.
func (s *Statement) UniqueByIndex() (steps []string, ok bool) {
	cmd, rel, ok := s.alterOne()
	if !ok || cmd.Subtype != pgast.AlterTableType_AT_AddConstraint {
		return nil, false
	}
	con := cmd.GetDef().GetConstraint()
	if con == nil || con.Indexname != "" || len(con.Keys) == 0 || len(con.Exclusions) > 0 ||
		(con.Contype != pgast.ConstrType_CONSTR_PRIMARY && con.Contype != pgast.ConstrType_CONSTR_UNIQUE) {
		return nil, false
	}
	var cols []string
	for _, k := range con.Keys {
		cols = append(cols, QuoteIdent(k.GetString_().GetSval()))
	}
	name := con.Conname
	kind := "UNIQUE"
	if name == "" {
		name = constraintName(rel.Relname, con)
	}
	if con.Contype == pgast.ConstrType_CONSTR_PRIMARY {
		kind = "PRIMARY KEY"
	}
	table := QuoteQualified(rel.Schemaname, rel.Relname)
	return []string{
		fmt.Sprintf("CREATE UNIQUE INDEX CONCURRENTLY %s ON %s (%s)", QuoteIdent(name), table, strings.Join(cols, ", ")),
		fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s USING INDEX %s", table, QuoteIdent(name), kind, QuoteIdent(name)),
	}, true
}

// DefaultByBackfill is ADD COLUMN ... DEFAULT expr made in steps when the
// default rewrites the table (a volatile one: random(), clock_timestamp(),
// gen_random_uuid()): the column added without it (catalog only), the
// default set for new rows, the existing rows filled in batches of batch
// rows (Backfill, run until it updates none: each batch a short
// transaction holding only its rows' locks), and NOT NULL, when the
// column had it, proved by a CHECK as in NotNullByCheck.
func (s *Statement) DefaultByBackfill(batch int) (steps []string, backfill string, after []string, ok bool) {
	cmd, rel, ok := s.alterOne()
	if !ok || cmd.Subtype != pgast.AlterTableType_AT_AddColumn {
		return nil, "", nil, false
	}
	col := cmd.GetDef().GetColumnDef()
	if col == nil {
		return nil, "", nil, false
	}
	var def *pgast.Node
	notNull := col.IsNotNull
	for _, c := range col.Constraints {
		k := c.GetConstraint()
		switch {
		case k == nil:
		case k.Contype == pgast.ConstrType_CONSTR_DEFAULT:
			def = k.RawExpr
		case k.Contype == pgast.ConstrType_CONSTR_NOTNULL:
			notNull = true
		case k.Contype != pgast.ConstrType_CONSTR_NULL:
			// A key, a check or a reference on the new column: left to a
			// person, the steps would not keep its meaning.
			return nil, "", nil, false
		}
	}
	if def == nil {
		return nil, "", nil, false
	}
	add, _, err := s.rewrite("ADD COLUMN without its default", func(c *Statement) int {
		cc, _, _ := c.alterOne()
		cd := cc.GetDef().GetColumnDef()
		cd.IsNotNull, cd.Constraints = false, nil
		return 1
	})
	if err != nil {
		return nil, "", nil, false
	}
	setDefault, _, err := s.rewrite("SET DEFAULT", func(c *Statement) int {
		cc, _, _ := c.alterOne()
		cc.Subtype, cc.Name, cc.Def = pgast.AlterTableType_AT_ColumnDefault, col.Colname, def
		return 1
	})
	if err != nil {
		return nil, "", nil, false
	}
	table := QuoteQualified(rel.Schemaname, rel.Relname)
	c := QuoteIdent(col.Colname)
	// SET c = DEFAULT evaluates the column's default per row, as the
	// rewrite would have; ctid picks a batch without needing a key.
	backfill = fmt.Sprintf("UPDATE %s SET %s = DEFAULT WHERE ctid = ANY (ARRAY(SELECT ctid FROM %s WHERE %s IS NULL LIMIT %d))", table, c, table, c, batch)
	if notNull {
		after = notNullSteps(table, rel.Relname, col.Colname)
	}
	return []string{add.text, setDefault.text}, backfill, after, true
}

// constraintName is the name PostgreSQL gives an unnamed constraint
// (ChooseConstraintName): the table, the columns, and a suffix.
func constraintName(table string, con *pgast.Constraint) string {
	var cols []string
	keys, suffix := con.Keys, "key"
	switch con.Contype {
	case pgast.ConstrType_CONSTR_FOREIGN:
		keys, suffix = con.FkAttrs, "fkey"
	case pgast.ConstrType_CONSTR_PRIMARY:
		return truncName(table + "_pkey")
	case pgast.ConstrType_CONSTR_CHECK:
		return truncName(table + "_check")
	}
	for _, k := range keys {
		cols = append(cols, k.GetString_().GetSval())
	}
	return truncName(table + "_" + strings.Join(cols, "_") + "_" + suffix)
}

// truncName cuts a name to NAMEDATALEN-1 bytes, as PostgreSQL does.
func truncName(s string) string {
	if len(s) > 63 {
		return s[:63]
	}
	return s
}

// volatileFuncs are built-in functions whose value changes per row: a
// column default calling one is evaluated for every existing row, which
// rewrites the table.
var volatileFuncs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"random": true, "gen_random_uuid": true, "uuid_generate_v1": true, "uuid_generate_v1mc": true,
		"uuid_generate_v4": true, "uuidv4": true, "uuidv7": true, "clock_timestamp": true, "timeofday": true, "nextval": true, "random_normal": true}
})

// VolatileDefault says whether ALTER TABLE ... ADD COLUMN fills the new
// column per row, rewriting the table: a default that calls a volatile
// function, a stored generated column, or an identity column. A default
// that is a constant, or a stable call such as now(), is stored once in
// the catalog (PostgreSQL 11 and later). A function pgmedic does not
// know is taken as not volatile; the rehearsal measures whether the
// table was rewritten.
func (s *Statement) VolatileDefault() bool {
	cmd, _, ok := s.alterOne()
	if !ok || cmd.Subtype != pgast.AlterTableType_AT_AddColumn {
		return false
	}
	col := cmd.GetDef().GetColumnDef()
	if col == nil {
		return false
	}
	if col.Identity != "" || col.Generated != "" {
		return true
	}
	volatile := false
	for _, c := range col.Constraints {
		k := c.GetConstraint()
		if k == nil {
			continue
		}
		switch k.Contype {
		case pgast.ConstrType_CONSTR_IDENTITY, pgast.ConstrType_CONSTR_GENERATED:
			return true
		case pgast.ConstrType_CONSTR_DEFAULT:
			if k.RawExpr == nil {
				continue
			}
			var rec func(m pgast.Message) bool
			rec = func(m pgast.Message) bool {
				if fc, ok := m.(*pgast.FuncCall); ok && len(fc.Funcname) > 0 &&
					volatileFuncs()[fc.Funcname[len(fc.Funcname)-1].GetString_().GetSval()] {
					volatile = true
				}
				return pgast.EachChild(m, rec)
			}
			rec(k.RawExpr)
		}
	}
	return volatile
}

// TypeChange reads ALTER TABLE t ALTER COLUMN c [SET DATA] TYPE type
// [USING expr]: the table, the column, the new type as SQL, and the
// expression that computes a row's new value from its old one (c::type
// without USING). ok is false for any other statement, for a type with a
// COLLATE clause, and for a USING that reads a column other than c (a
// trigger fed one row's c could not compute it).
func (s *Statement) TypeChange() (table Name, column, typ, using string, ok bool) {
	cmd, rel, ok := s.alterOne()
	if !ok || cmd.Subtype != pgast.AlterTableType_AT_AlterColumnType {
		return Name{}, "", "", "", false
	}
	def := cmd.GetDef().GetColumnDef()
	if def == nil || def.TypeName == nil || def.CollClause != nil {
		return Name{}, "", "", "", false
	}
	cast := exprText(&pgast.Node{Node: &pgast.TypeCast{Arg: &pgast.Node{Node: &pgast.A_Const{Isnull: true}}, TypeName: def.TypeName}})
	typ, found := strings.CutPrefix(cast, "NULL::")
	if !found {
		return Name{}, "", "", "", false
	}
	column = cmd.Name
	using = QuoteIdent(column) + "::" + typ
	if def.RawDefault != nil {
		using = exprText(def.RawDefault)
		st, err := Parse("SELECT " + using)
		if err != nil {
			return Name{}, "", "", "", false
		}
		for _, c := range st.ColumnNames() {
			if c != column {
				return Name{}, "", "", "", false
			}
		}
	}
	return Name{Schema: rel.Schemaname, Name: rel.Relname}, column, typ, using, true
}

// IndexMoved is a CREATE INDEX (pg_get_indexdef's text) rewritten for a
// column's replacement: named name, built CONCURRENTLY, with the column
// from replaced by to in its keys, expressions and predicate.
func IndexMoved(def, from, to, name string) (string, error) {
	st, err := Parse(def)
	if err != nil {
		return "", err
	}
	if st.root.GetIndexStmt() == nil {
		return "", fmt.Errorf("not a CREATE INDEX: %s", def)
	}
	out, _, err := st.rewrite("the index on the new column", func(c *Statement) int {
		ix := c.root.GetIndexStmt()
		ix.Idxname, ix.Concurrent = name, true
		n := 0
		c.walk(func(m pgast.Message) bool {
			switch x := m.(type) {
			case *pgast.IndexElem:
				if x.Name == from {
					x.Name = to
					n++
				}
			case *pgast.ColumnRef:
				if len(x.Fields) > 0 {
					if s := x.Fields[len(x.Fields)-1].GetString_(); s != nil && s.Sval == from {
						s.Sval = to
						n++
					}
				}
			}
			return true
		})
		return max(n, 1)
	})
	if err != nil {
		return "", err
	}
	return out.text, nil
}
