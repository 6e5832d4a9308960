package twin

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// definition is what the twin needs to recreate a table: its columns
// with their types and collations, its reloptions, the enums it uses,
// and what is built after the rows are in (constraints, indexes).
type definition struct {
	ref         model.RelRef
	columns     []column
	reloptions  []string
	enums       []enum
	constraints []string // ALTER TABLE ... ADD CONSTRAINT ...
	indexes     []string // CREATE INDEX ...
	noRows      bool     // the definition only (Options.DefinitionOnly)
	// partitionBy is a partitioned table's key (pg_get_partkeydef) and
	// partitions its leaves with their bounds; bytes is the heap the
	// copy reads (the leaves', for a partitioned table).
	partitionBy string
	partitions  []partition
	bytes       int64
	// locked says the table had an ACCESS EXCLUSIVE lock held or queued
	// on it when it was defined: its indexes (pg_get_indexdef opens
	// them) and rows are not read, since the read would wait in the
	// queue until pgmedic's lock_timeout cancelled it, an ERROR in the
	// target's log.
	locked bool
}

type partition struct {
	ref   model.RelRef
	bound string // FOR VALUES ... or DEFAULT
}

type column struct {
	name, typ, collation string
	notNull              bool
	generated            string // the expression of a stored generated column
	// def is the column's default (not a generated column's), identity
	// its attidentity ('a' always, 'd' by default, "" none).
	def, identity string
}

type enum struct {
	name   string // qualified and quoted
	labels []string
}

const columnsSQL = `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
	CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
		THEN quote_ident(cn.nspname) || '.' || quote_ident(co.collname) ELSE '' END,
	cn.nspname IS NOT NULL AND cn.nspname <> 'pg_catalog' AND a.attcollation <> t.typcollation,
	t.typtype::text, tn.nspname::text, quote_ident(tn.nspname) || '.' || quote_ident(t.typname),
	coalesce(CASE WHEN a.attgenerated = 's' AND NOT $2 THEN pg_get_expr(d.adbin, d.adrelid) END, ''),
	CASE WHEN t.typtype = 'e' THEN ARRAY(SELECT enumlabel::text FROM pg_enum WHERE enumtypid = t.oid ORDER BY enumsortorder) ELSE '{}'::text[] END,
	coalesce(CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, 0) END, ''), a.attidentity::text
	FROM pg_attribute a
	JOIN pg_type t ON t.oid = a.atttypid
	JOIN pg_namespace tn ON tn.oid = t.typnamespace
	LEFT JOIN pg_collation co ON co.oid = a.attcollation
	LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
	LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`

// columnsSQL's $2 says the table is locked: its generated columns'
// expressions are not read. pg_get_expr given a table opens it, under
// ACCESS SHARE, to name its columns, and so queues behind a schema
// change's lock; a default names no column (PostgreSQL refuses one that
// does), so it is read with no table given, which opens nothing.

// define reads a table's definition from the target's catalog, or says
// why the twin cannot hold it.
func define(ctx context.Context, q envelope.Conn, t *model.Table) (*definition, string) {
	d := &definition{ref: model.RelRef{Schema: t.Schema, Name: t.Name}, bytes: t.HeapBytes}
	if t.Partitioned {
		if why := d.partitioned(ctx, q, t); why != "" {
			return nil, why
		}
	}
	// A table with an ACCESS EXCLUSIVE lock held or queued (a schema
	// change) is read from the catalogs alone: its column defaults and
	// generated expressions (pg_get_expr opens the table) are not read,
	// nor its indexes or rows, or the read would queue behind the lock
	// into lock_timeout, an ERROR in the target's log.
	rows, err := d.columnRows(ctx, q, t.OID)
	if err != nil {
		return nil, err.Error()
	}
	for rows.Next() {
		var c column
		var ownCollation bool
		var typtype, typNamespace, typName string
		var labels []string
		if err := rows.Scan(&c.name, &c.typ, &c.notNull, &c.collation, &ownCollation, &typtype, &typNamespace, &typName, &c.generated, &labels, &c.def, &c.identity); err != nil {
			rows.Close()
			return nil, "reading its columns: " + envelope.Message(err)
		}
		switch {
		case ownCollation:
			rows.Close()
			return nil, fmt.Sprintf("column %s uses the collation %s, made on the target, which the twin does not recreate", c.name, c.collation)
		case typtype == "e":
			d.enums = append(d.enums, enum{name: typName, labels: labels})
		case typNamespace != "pg_catalog" && typNamespace != "information_schema":
			rows.Close()
			return nil, fmt.Sprintf("column %s has the type %s (a domain, composite, range or extension's type), which the twin does not recreate", c.name, c.typ)
		}
		d.columns = append(d.columns, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "reading its columns: " + envelope.Message(err)
	}
	if len(d.columns) == 0 {
		return nil, "no columns were visible"
	}
	if err := q.QueryRow(ctx, envelope.Tag+`SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::oid`, t.OID).Scan(&d.reloptions); err != nil {
		return nil, "reading its storage options: " + envelope.Message(err)
	}
	// Primary keys, unique and check constraints shape plans (and a
	// unique index is what an upsert needs); foreign keys would need
	// the tables they point to, and exclusion constraints their
	// operator classes' extensions.
	if d.constraints, err = strings1(ctx, q, `SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s', $2::text, conname, pg_get_constraintdef(oid))
		FROM pg_constraint WHERE conrelid = $1::oid AND contype IN ('p', 'u', 'c') ORDER BY contype DESC, conname`, t.OID, d.qualified()); err != nil {
		return nil, "reading its constraints: " + envelope.Message(err)
	}
	if d.locked {
		return d, ""
	}
	// A partitioned table's index reads "ON ONLY parent" (the leaves'
	// indexes are attached one by one); on the twin, built on the parent
	// after the rows are in, it makes the leaves' indexes itself.
	//
	// An index a failed concurrent build left invalid is held as the
	// target holds it. One that is not ready (the build failed before
	// it, as a unique build over duplicate keys does) is written by no
	// statement and read by none: it is left out. One that is ready is
	// written by every insert and read by no plan: the twin builds it
	// without UNIQUE (the duplicate keys that failed the build are in
	// the rows) and marks it invalid, so its plans do not read it either.
	if d.indexes, err = strings1(ctx, q, `SELECT CASE WHEN i.indisvalid THEN replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ')
		ELSE regexp_replace(pg_get_indexdef(i.indexrelid), '^CREATE UNIQUE INDEX', 'CREATE INDEX') || '; ' || `+markInvalid+` END
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.indrelid = $1::oid AND i.indisready AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid)
		ORDER BY i.indexrelid`, t.OID); err != nil {
		return nil, "reading its indexes: " + envelope.Message(err)
	}
	return d, ""
}

// markInvalid is SQL, run on the target, that writes the twin's statement
// marking an index (i.indexrelid) invalid after it is built: the catalog's
// flag set by a superuser, as PostgreSQL's own failed build leaves it; on
// a scratch database where pgmedic's role may not, the index is dropped
// (a trapped error, which the server does not log).
const markInvalid = `format('DO $pgmedic$ BEGIN UPDATE pg_catalog.pg_index SET indisvalid = false WHERE indexrelid = %L::regclass; ' ||
		'EXCEPTION WHEN insufficient_privilege THEN DROP INDEX %s; END $pgmedic$',
		quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(n.nspname) || '.' || quote_ident(c.relname))`

// columnRows reads whether the table is locked, then its columns.
func (d *definition) columnRows(ctx context.Context, q envelope.Conn, oid uint32) (pgx.Rows, error) {
	var err error
	if d.locked, err = exclusivelyLocked(ctx, q, oid); err != nil {
		return nil, fmt.Errorf("reading its locks: %s", envelope.Message(err))
	}
	rows, err := q.Query(ctx, envelope.Tag+columnsSQL, oid, d.locked)
	if err != nil {
		return nil, fmt.Errorf("reading its columns: %s", envelope.Message(err))
	}
	return rows, nil
}

// exclusivelyLocked says whether a schema change's ACCESS EXCLUSIVE lock
// is held or queued on the relation.
func exclusivelyLocked(ctx context.Context, q envelope.Conn, oid uint32) (bool, error) {
	var locked bool
	err := q.QueryRow(ctx, envelope.Tag+`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'relation' AND relation = $1::oid
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND mode = 'AccessExclusiveLock')`, oid).Scan(&locked)
	return locked, err
}

func strings1(ctx context.Context, q envelope.Conn, sql string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, envelope.Tag+sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (d *definition) qualified() string { return quote(d.ref) }

// columnList names the columns COPY moves: all but the generated ones,
// which the twin computes itself.
func (d *definition) columnList() string {
	var names []string
	for _, c := range d.columns {
		if c.generated == "" {
			names = append(names, sqlparse.QuoteIdent(c.name))
		}
	}
	return strings.Join(names, ", ")
}

// create is the twin's CREATE TABLE (and its partitions'), without
// constraints or indexes:
// they are built once the rows are in, which is faster than keeping them
// up to date row by row.
func (d *definition) create() []string {
	var cols []string
	for _, c := range d.columns {
		s := sqlparse.QuoteIdent(c.name) + " " + c.typ
		if c.collation != "" {
			s += " COLLATE " + c.collation
		}
		if c.generated != "" {
			s += " GENERATED ALWAYS AS (" + c.generated + ") STORED"
		}
		if c.notNull {
			s += " NOT NULL"
		}
		cols = append(cols, s)
	}
	q := "CREATE TABLE " + d.qualified() + " (" + strings.Join(cols, ", ") + ")"
	if d.partitionBy != "" {
		q += " PARTITION BY " + d.partitionBy
	}
	if len(d.reloptions) > 0 {
		q += " WITH (" + strings.Join(d.reloptions, ", ") + ")"
	}
	out := []string{q}
	for _, p := range d.partitions {
		out = append(out, "CREATE TABLE "+quote(p.ref)+" PARTITION OF "+d.qualified()+" "+p.bound)
	}
	return out
}

// partitioned reads a partitioned table's key and its leaves, one level
// deep: COPY into the parent routes each row to its leaf as on the
// target, and the parent's indexes and keys cascade to the leaves.
func (d *definition) partitioned(ctx context.Context, q envelope.Conn, t *model.Table) string {
	if err := q.QueryRow(ctx, envelope.Tag+`SELECT pg_get_partkeydef($1::oid)`, t.OID).Scan(&d.partitionBy); err != nil {
		return "reading its partition key: " + envelope.Message(err)
	}
	// A partition with a schema change's lock held or queued on it
	// (ATTACH, DETACH) is not opened: pg_get_expr and pg_relation_size
	// would wait behind it into lock_timeout.
	rows, err := q.Query(ctx, envelope.Tag+`WITH locked AS (SELECT relation FROM pg_locks WHERE locktype = 'relation' AND mode = 'AccessExclusiveLock'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
		SELECT n.nspname::text, c.relname::text, coalesce(CASE WHEN c.oid NOT IN (SELECT relation FROM locked) THEN pg_get_expr(c.relpartbound, c.oid) END, ''),
		c.relkind::text, CASE WHEN c.oid IN (SELECT relation FROM locked) THEN c.relpages::int8 * current_setting('block_size')::int8 ELSE pg_relation_size(c.oid) END
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.inhparent = $1::oid ORDER BY c.relname`, t.OID)
	if err != nil {
		return "reading its partitions: " + envelope.Message(err)
	}
	defer rows.Close()
	d.bytes = 0
	for rows.Next() {
		var p partition
		var kind string
		var size int64
		if err := rows.Scan(&p.ref.Schema, &p.ref.Name, &p.bound, &kind, &size); err != nil {
			return "reading its partitions: " + envelope.Message(err)
		}
		switch {
		case p.bound == "":
			return fmt.Sprintf("its partition %s has a schema change's lock held or queued on it, and reading its bounds would wait behind it", name(p.ref))
		case kind == "p":
			return fmt.Sprintf("its partition %s is itself partitioned, which the twin does not recreate", name(p.ref))
		case p.ref.Schema != t.Schema:
			return fmt.Sprintf("its partition %s is in another schema, which the twin does not recreate", name(p.ref))
		case kind != "r":
			return fmt.Sprintf("its partition %s is a foreign table, whose rows are not on this server", name(p.ref))
		}
		d.partitions = append(d.partitions, p)
		d.bytes += size
	}
	if err := rows.Err(); err != nil {
		return "reading its partitions: " + envelope.Message(err)
	}
	return ""
}

// after is what is built once the rows are in.
func (d *definition) after() []string {
	return append(append(append([]string{}, d.constraints...), d.indexes...), d.defaults()...)
}

// defaults are the columns' defaults, set once the rows are in, so that a
// replayed INSERT that leaves a column out gets what it gets on the
// target. A serial column's nextval of a sequence, and an identity
// column, become an identity column on the twin, started past the rows
// copied (the sequence itself is not copied). Any other default is set
// as the target's catalog prints it, and left off, silently, where the
// twin cannot take it (a function the target has and the twin lacks).
func (d *definition) defaults() []string {
	var out []string
	table := d.qualified()
	for _, c := range d.columns {
		col := sqlparse.QuoteIdent(c.name)
		switch {
		case c.identity != "" || (strings.HasPrefix(c.def, "nextval(") && c.notNull):
			kind := "BY DEFAULT"
			if c.identity == "a" {
				kind = "ALWAYS"
			}
			out = append(out, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s ADD GENERATED %s AS IDENTITY", table, col, kind),
				fmt.Sprintf("SELECT setval(pg_get_serial_sequence(%s, %s), coalesce(max(%s), 0) + 1, false) FROM %s",
					sqlparse.QuoteLiteral(table), sqlparse.QuoteLiteral(c.name), col, table))
		case c.def != "" && !strings.HasPrefix(c.def, "nextval("):
			out = append(out, fmt.Sprintf("DO $pgmedic$ BEGIN ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s; EXCEPTION WHEN OTHERS THEN NULL; END $pgmedic$",
				table, col, strings.ReplaceAll(c.def, "$pgmedic$", "")))
		}
	}
	return out
}

// createTypes makes the schemas and the enums the tables use on the twin
// (dropping tables of the same names first, on a scratch database).
func createTypes(ctx context.Context, c *pgx.Conn, defs []*definition) error {
	schemas, enums := map[string]bool{}, map[string]bool{}
	for _, d := range defs {
		if d.ref.Schema != "" && !schemas[d.ref.Schema] {
			schemas[d.ref.Schema] = true
			if _, err := c.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+sqlparse.QuoteIdent(d.ref.Schema)); err != nil {
				return fmt.Errorf("creating schema %s on the twin: %s", d.ref.Schema, envelope.Message(err))
			}
		}
		if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS "+d.qualified()+" CASCADE"); err != nil {
			return fmt.Errorf("replacing %s on the twin: %s", name(d.ref), envelope.Message(err))
		}
	}
	for _, d := range defs {
		for _, e := range d.enums {
			if enums[e.name] {
				continue
			}
			enums[e.name] = true
			schema, _, _ := strings.Cut(e.name, ".")
			labels := make([]string, len(e.labels))
			for i, l := range e.labels {
				labels[i] = "'" + strings.ReplaceAll(l, "'", "''") + "'"
			}
			for _, q := range []string{"CREATE SCHEMA IF NOT EXISTS " + schema, "DROP TYPE IF EXISTS " + e.name + " CASCADE",
				"CREATE TYPE " + e.name + " AS ENUM (" + strings.Join(labels, ", ") + ")"} {
				if _, err := c.Exec(ctx, q); err != nil {
					return fmt.Errorf("creating the enum %s on the twin: %s", e.name, envelope.Message(err))
				}
			}
		}
	}
	return nil
}

// planSettings are the settings that change plans and their costs: the
// twin's session takes the target's values, so a statement is planned
// there as it is on the target.
var planSettings = []string{
	"work_mem", "hash_mem_multiplier", "maintenance_work_mem", "random_page_cost", "seq_page_cost", "effective_cache_size",
	"effective_io_concurrency", "cpu_tuple_cost", "cpu_index_tuple_cost", "cpu_operator_cost", "default_statistics_target",
	"jit", "jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost", "from_collapse_limit", "join_collapse_limit",
	"max_parallel_workers_per_gather", "plan_cache_mode", "enable_seqscan", "enable_indexscan", "enable_bitmapscan",
	"enable_hashjoin", "enable_mergejoin", "enable_nestloop", "enable_sort", "enable_hashagg", "enable_partitionwise_join",
}

// settings gives the twin's session the target's planner settings (on a
// lab cluster, its database too, for the experiments' own sessions).
func settings(ctx context.Context, target, tw *pgx.Conn, lab, setOnly bool) error {
	q := envelope.Tag + `SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY($1)`
	if setOnly {
		// reset_val is the server's value for this role and database,
		// before pgmedic's own session settings (its jit = off): those
		// that differ from the binary's default are the configuration.
		q = envelope.Tag + `SELECT name, reset_val FROM pg_settings WHERE name = ANY($1) AND reset_val IS DISTINCT FROM boot_val`
	}
	rows, err := target.Query(ctx, q, planSettings)
	if err != nil {
		return fmt.Errorf("reading the target's planner settings: %s", envelope.Message(err))
	}
	type kv struct{ k, v string }
	var all []kv
	for rows.Next() {
		var s kv
		if rows.Scan(&s.k, &s.v) == nil {
			all = append(all, s)
		}
	}
	rows.Close()
	var failed []string
	for _, s := range all {
		if _, err := tw.Exec(ctx, "SELECT set_config($1, $2, false)", s.k, s.v); err != nil {
			failed = append(failed, s.k)
			continue
		}
		if lab {
			tw.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET %s = '%s'", DBName, s.k, strings.ReplaceAll(s.v, "'", "''")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("the twin did not take the target's %s", strings.Join(failed, ", "))
	}
	return nil
}
