package migration

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ColumnFacts are what the safe form of a column's type change must keep
// of the column, read from the catalog of the database it runs on: the
// statement alone does not say whether the column is a key, has a
// default or is indexed.
type ColumnFacts struct {
	NotNull bool
	// Identity is its attidentity: "a" (ALWAYS), "d" (BY DEFAULT) or "".
	Identity string
	// Default is its default as pg_get_expr prints it ("" for none), and
	// Sequence the sequence a nextval() default takes from, quoted.
	Default  string
	Sequence string
	// Indexes are the indexes whose keys or predicate name the column.
	Indexes []IndexFact
	// Blockers say why the column cannot be moved to a new one by these
	// steps (a foreign key from or to it, a view or rule reading it, a
	// generated column or a CHECK computed from it, extended statistics
	// on it, a partitioned table): the change then keeps its form as
	// written, and the report says why.
	Blockers []string
}

// IndexFact is an index on the column: its name and definition
// (pg_get_indexdef), and the PRIMARY KEY or UNIQUE constraint it backs.
type IndexFact struct {
	Name, Def  string
	Constraint string // "" when none
	Primary    bool
}

// Facts reads a column's facts from the database the migration runs on;
// nil where there is none (a migration read without --source).
type Facts func(table sqlparse.Name, column string) (*ColumnFacts, error)

// TypeByNewColumn is ALTER COLUMN ... TYPE made without rewriting the
// table under ACCESS EXCLUSIVE: a new column of the new type (catalog
// only), a trigger that keeps it filled for the rows the application
// writes meanwhile, the existing rows filled in batches (each a short
// transaction holding only its rows' locks), the column's NOT NULL proved
// by a CHECK validated without blocking, its indexes built CONCURRENTLY
// on the new column, then the switch: one short transaction under ACCESS
// EXCLUSIVE that moves the key, the default or identity and the indexes'
// names to the new column, drops the old one and takes its name. The
// column ends last in the table's column order (SELECT * sees it there).
// ok is false when the statement is no type change pgmedic can move or
// the facts name a blocker; why then says what.
func TypeByNewColumn(st *sqlparse.Statement, f *ColumnFacts, batch int) (steps []Step, why string, ok bool) {
	table, column, typ, using, ok := st.TypeChange()
	if !ok {
		return nil, "", false
	}
	if f == nil {
		return nil, "the column's keys, default and indexes were not read", false
	}
	if len(f.Blockers) > 0 {
		return nil, strings.Join(f.Blockers, "; "), false
	}
	m := newMove(table, column)
	retry := func(sql string) Step { return Step{SQL: sql, Retry: true} }
	plain := func(sql string) Step { return Step{SQL: sql} }
	t, c, n := m.table, m.col, m.newCol
	steps = append(steps,
		retry(fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", t, n, typ)),
		// The trigger computes the new value from the row's old one, as
		// USING would: the expression reads the column through a
		// one-row subquery that names it.
		plain(fmt.Sprintf("CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $pgmedic$BEGIN NEW.%s := (SELECT %s FROM (SELECT NEW.%s AS %s) AS old); RETURN NEW; END$pgmedic$",
			m.fn, n, using, c, c)),
		retry(fmt.Sprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE OF %s ON %s FOR EACH ROW EXECUTE FUNCTION %s()", m.trig, c, t, m.fn)),
		Step{SQL: fmt.Sprintf("UPDATE %s SET %s = %s WHERE ctid = ANY (ARRAY(SELECT ctid FROM %s WHERE %s IS DISTINCT FROM (%s) LIMIT %d))", t, n, using, t, n, using, batch), Batches: true})
	if f.NotNull {
		steps = append(steps,
			retry(fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s CHECK (%s IS NOT NULL) NOT VALID", t, m.check, n)),
			plain(fmt.Sprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", t, m.check)))
	}
	for _, ix := range f.Indexes {
		def, err := sqlparse.IndexMoved(ix.Def, column, m.bareNew, shortName(ix.Name+"__new"))
		if err != nil {
			return nil, "its index " + ix.Name + " could not be rewritten for the new column: " + err.Error(), false
		}
		steps = append(steps, plain(def))
	}
	return append(steps, retry(m.switchOver(f))), "", true
}

// shortName cuts a name to PostgreSQL's 63 bytes.
func shortName(s string) string {
	if len(s) > 63 {
		return s[:63]
	}
	return s
}

// move names what a column's move to a new one creates: the new column,
// the trigger and its function, the NOT NULL check; quoted, the table
// qualified.
type move struct {
	schema, table, col, newCol, bareNew, fn, trig, check string
}

func newMove(table sqlparse.Name, column string) move {
	bareNew := shortName(column + "__new")
	return move{schema: table.Schema, table: sqlparse.QuoteQualified(table.Schema, table.Name),
		col: sqlparse.QuoteIdent(column), newCol: sqlparse.QuoteIdent(bareNew), bareNew: bareNew,
		fn:    sqlparse.QuoteQualified(table.Schema, shortName(table.Name+"_"+column+"_to_new")),
		trig:  sqlparse.QuoteIdent(shortName(table.Name + "_" + column + "_to_new")),
		check: sqlparse.QuoteIdent(shortName(table.Name + "_" + bareNew + "_not_null"))}
}

// switchOver is the switch: one transaction (the statements of one query
// run in one), which a lock_timeout ends whole. The trigger names the old
// column (UPDATE OF) and goes first, since the column cannot be dropped
// while something depends on it; then the keys on the old column, its
// identity or default (a serial's sequence re-owned, or it would go with
// the column), the old column, the new one's name, NOT NULL (proved from
// the validated CHECK without reading the table, PostgreSQL 12 and
// later), and the indexes' names and keys.
func (m move) switchOver(f *ColumnFacts) string {
	t, c, n := m.table, m.col, m.newCol
	sw := []string{fmt.Sprintf("LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", t),
		fmt.Sprintf("DROP TRIGGER %s ON %s", m.trig, t), fmt.Sprintf("DROP FUNCTION %s()", m.fn)}
	for _, ix := range f.Indexes {
		if ix.Constraint != "" {
			sw = append(sw, fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", t, sqlparse.QuoteIdent(ix.Constraint)))
		}
	}
	switch {
	case f.Identity != "":
		kind := "BY DEFAULT"
		if f.Identity == "a" {
			kind = "ALWAYS"
		}
		sw = append(sw, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP IDENTITY", t, c),
			fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", t, n),
			fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s ADD GENERATED %s AS IDENTITY", t, n, kind),
			fmt.Sprintf("SELECT setval(pg_get_serial_sequence(%s, %s), coalesce(max(%s), 0) + 1, false) FROM %s",
				sqlparse.QuoteLiteral(t), sqlparse.QuoteLiteral(m.bareNew), n, t))
	case f.Default != "":
		sw = append(sw, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s", t, n, f.Default))
		if f.Sequence != "" {
			sw = append(sw, fmt.Sprintf("ALTER SEQUENCE %s OWNED BY %s.%s", f.Sequence, t, n))
		}
	}
	sw = append(sw, fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", t, c),
		fmt.Sprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", t, n, c))
	if f.NotNull {
		sw = append(sw, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", t, c),
			fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", t, m.check))
	}
	for _, ix := range f.Indexes {
		tmp := shortName(ix.Name + "__new")
		if ix.Constraint != "" {
			kind := "UNIQUE"
			if ix.Primary {
				kind = "PRIMARY KEY"
			}
			sw = append(sw, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s USING INDEX %s", t, sqlparse.QuoteIdent(ix.Constraint), kind, sqlparse.QuoteIdent(tmp)))
			continue
		}
		sw = append(sw, fmt.Sprintf("ALTER INDEX %s RENAME TO %s", sqlparse.QuoteQualified(m.schema, tmp), sqlparse.QuoteIdent(ix.Name)))
	}
	return strings.Join(sw, "; ")
}
