package collect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

const userSchemas = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'`

// catalog reads tables, indexes, columns with their statistics, and the
// installed extensions. Only a failure to read pg_extension is fatal: the
// rest degrade to Missing entries.
//
// Nothing is cut off silently. Every user table is read unless there are
// more than opts.MaxTables; then the largest by pg_class.relpages are kept
// and the rest are counted in Missing, with the flag that includes them.
// Indexes and columns are read for the tables kept. The queries avoid
// per-relation work that grows with the number of files (no
// pg_total_relation_size, pg_get_indexdef only for expression indexes), so
// a database with 100,000 relations costs about a second of server time.
func catalog(ctx context.Context, q envelope.Conn, s *model.Snapshot, opts Options) error {
	s.Extensions = map[string]string{}
	rows, err := q.Query(ctx, envelope.Tag+`SELECT extname, extversion FROM pg_extension`)
	if err != nil {
		return fmt.Errorf("reading pg_extension: %w", err)
	}
	for rows.Next() {
		var name, version string
		if err := rows.Scan(&name, &version); err != nil {
			rows.Close()
			return fmt.Errorf("reading pg_extension: %w", err)
		}
		s.Extensions[name] = version
	}
	rows.Close()
	limit := opts.MaxTables
	if limit <= 0 {
		limit = Defaults().MaxTables
	}
	if err := tables(ctx, q, s, limit); err != nil {
		s.Missing[model.SrcTables] = skipFor(s, "cannot read table statistics", err)
	}
	// Columns first: index keys are resolved to names through them.
	kept := keptByOID(s)
	if err := columns(ctx, q, s, kept); err != nil {
		s.Missing[model.SrcColumns] = skipFor(s, "cannot read column statistics", err)
	}
	if err := indexes(ctx, q, s, kept); err != nil {
		s.Missing[model.SrcIndexes] = skipFor(s, "cannot read indexes", err)
	}
	return nil
}

// tableOIDs is the array parameter naming the tables kept; the queries
// join it through unnest, which the planner hashes (= ANY of a parameter
// array would be compared element by element for every row).
func tableOIDs(s *model.Snapshot) []uint32 {
	out := make([]uint32, len(s.Tables))
	for i, t := range s.Tables {
		out[i] = t.OID
	}
	return out
}

// catalogPage is how many tables one catalog read covers. A database of
// a million relations (schema per tenant) is read in pages keyed by oid,
// each well within the statement timeout, instead of one statement that
// joins every relation at once. (A variable: a test reads in pages of two.)
var catalogPage = 20000

// tablesSQL reads one page of tables with their statistics, through the
// functions pg_stat_user_tables is built on: the view groups every
// relation with its indexes before any row can be filtered, which at a
// million relations takes longer than a statement timeout. (IdxScan, the
// sum of its indexes' scans, is added up when the indexes are read.)
var tablesSQL = `SELECT c.oid, n.nspname, c.relname, c.reltuples::float8, c.relpages::int8,
		CASE WHEN c.oid IN ` + exclusivelyLocked + ` OR ` + sizeKnown("c.oid", "c") + ` THEN c.relpages::int8 * $3 ELSE pg_relation_size(c.oid) END, c.relkind = 'p',
		pg_stat_get_numscans(c.oid), pg_stat_get_tuples_returned(c.oid),
		pg_stat_get_tuples_inserted(c.oid), pg_stat_get_tuples_updated(c.oid), pg_stat_get_tuples_hot_updated(c.oid), pg_stat_get_tuples_deleted(c.oid),
		pg_stat_get_live_tuples(c.oid), pg_stat_get_dead_tuples(c.oid), pg_stat_get_mod_since_analyze(c.oid),
		greatest(pg_stat_get_last_vacuum_time(c.oid), pg_stat_get_last_autovacuum_time(c.oid)),
		greatest(pg_stat_get_last_analyze_time(c.oid), pg_stat_get_last_autoanalyze_time(c.oid)),
		pg_stat_get_vacuum_count(c.oid) + pg_stat_get_autovacuum_count(c.oid), pg_stat_get_analyze_count(c.oid) + pg_stat_get_autoanalyze_count(c.oid),
		CASE WHEN c.relkind = 'p' THEN 0 ELSE greatest(age(c.relfrozenxid), (SELECT age(x.relfrozenxid) FROM pg_class x WHERE x.oid = c.reltoastrelid)) END::int8,
		CASE WHEN c.relkind = 'p' THEN 0 ELSE mxid_age(c.relminmxid) END::int8,
		c.reloptions,
		CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(array_agg(a.attname::text ORDER BY k.ord), '{}')
			FROM pg_partitioned_table pt CROSS JOIN LATERAL unnest(pt.partattrs::int2[]) WITH ORDINALITY AS k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.attnum WHERE pt.partrelid = c.oid) ELSE '{}' END,
		CASE WHEN c.relkind = 'p' THEN (SELECT count(*) FROM pg_partition_tree(c.oid) p WHERE p.isleaf) ELSE 0 END,
		ARRAY(SELECT array_to_string(ARRAY(SELECT a.attname::text FROM unnest(e.stxkeys::int2[]) AS k(n)
			JOIN pg_attribute a ON a.attrelid = e.stxrelid AND a.attnum = k.n ORDER BY a.attname), ',')
			FROM pg_statistic_ext e WHERE e.stxrelid = c.oid)
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('r', 'p', 'm') AND ` + userSchemas + ` AND c.oid > $1
	ORDER BY c.oid
	LIMIT $2`

// tables reads the user tables in pages and keeps the limit largest (by
// relpages, then rows): the table rules judge those.
func tables(ctx context.Context, q envelope.Conn, s *model.Snapshot, limit int) error {
	// Each page in a slice of its own, joined once at the end: the total
	// is not known before, and a slice grown by append copies itself
	// over and over (370 MB allocated for 170,000 tables).
	var pages [][]model.Table
	for after := uint32(0); ; {
		page := make([]model.Table, 0, catalogPage)
		n, err := tablesPage(ctx, q, after, s.BlockSize(), &page)
		if err != nil {
			return err
		}
		pages = append(pages, page)
		if n < catalogPage {
			break
		}
		after = page[len(page)-1].OID
	}
	all := slices.Concat(pages...)
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.RelPages != b.RelPages {
			return a.RelPages > b.RelPages
		}
		if a.Live+a.Dead != b.Live+b.Dead {
			return a.Live+a.Dead > b.Live+b.Dead
		}
		return a.OID < b.OID
	})
	if left := len(all) - limit; left > 0 {
		s.Missing[model.SrcTablesCut] = model.Skip{
			Reason: fmt.Sprintf("the database has %d tables; the %d largest (by pg_class.relpages) were read and %d smaller ones were left out of every table rule", len(all), limit, left),
			Fix:    fmt.Sprintf("pgmedic check --max-tables %d reads them all", len(all))}
		all = all[:limit]
	}
	s.Tables = all
	return nil
}

// tablesPage appends the tables after oid after, up to a page of them,
// and says how many it read.
func tablesPage(ctx context.Context, q envelope.Conn, after uint32, block int64, all *[]model.Table) (int, error) {
	rows, err := q.Query(ctx, envelope.Tag+tablesSQL, after, catalogPage, block)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var t model.Table
		var opts []string
		if err := rows.Scan(&t.OID, &t.Schema, &t.Name, &t.Reltuples, &t.RelPages, &t.HeapBytes, &t.Partitioned,
			&t.SeqScan, &t.SeqTupRead, &t.Inserted, &t.Updated, &t.HOTUpdated, &t.Deleted,
			&t.Live, &t.Dead, &t.ModSinceAnalyze, &t.LastVacuum, &t.LastAnalyze, &t.VacuumCount, &t.AnalyzeCount,
			&t.FrozenAge, &t.MxidAge, &opts, &t.PartitionKey, &t.Partitions, &t.ExtendedStats); err != nil {
			return n, err
		}
		storageOptions(&t, opts)
		*all = append(*all, t)
		n++
	}
	return n, rows.Err()
}

// keptByOID finds the tables kept by their oid: the rows of the per-table
// catalogs carry it, and take the table's names from it instead of holding
// copies of their own.
func keptByOID(s *model.Snapshot) map[uint32]*model.Table {
	kept := make(map[uint32]*model.Table, len(s.Tables))
	for i := range s.Tables {
		kept[s.Tables[i].OID] = &s.Tables[i]
	}
	return kept
}

// byTablePages runs read once per page of the tables kept (size tables a
// page), with their oids: the per-table catalogs (indexes, columns) are
// read a page at a time, each statement within the timeout however many
// tables there are. left is how many tables the pages after this one hold.
func byTablePages(s *model.Snapshot, size int, read func(oids []uint32, left int) error) error {
	oids := tableOIDs(s)
	for len(oids) > 0 {
		n := min(len(oids), size)
		if err := read(oids[:n], len(oids)-n); err != nil {
			return err
		}
		oids = oids[n:]
	}
	return nil
}

// presize makes room, after the first page of done tables, for the rows
// of the left ones at the same rate (and a tenth more): grown by append
// instead, the copies of a slice of 680,000 indexes or columns came to
// several times the slice, and set check's peak memory.
func presize[T any](list []T, done, left int) []T {
	if done == 0 || left == 0 {
		return list
	}
	return slices.Grow(list, len(list)*left/done*11/10)
}

// sizeKnown is SQL that says a table's pg_class.relpages is its size now,
// so it need not be opened to be measured: at a million relations,
// pg_relation_size opened 340,000 tables and indexes (building each one's
// relcache entry in pgmedic's backend) and was half of check's server time.
// relpages is exact as of the VACUUM, ANALYZE or CREATE INDEX that last
// wrote it, and a heap only grows by writes, which the statistics count:
//   - written by nothing since its last VACUUM or ANALYZE: no change since
//     ANALYZE (n_mod_since_analyze), no insert since VACUUM, aborted ones
//     included (n_ins_since_vacuum), and the statistics hold the time of
//     one of them, so they were not reset or lost since;
//   - or never vacuumed nor analysed (relpages 0, reltuples unknown) and
//     never inserted into, by statistics that were never reset or lost
//     (pg_stat_database.stats_reset is null: from 15 a crash's discarded
//     statistics set it too, and before 15 it is always set).
//
// A standby counts none of its writes (they are replayed): there every
// table is measured. Writes the statistics have not counted yet (a
// transaction still open, or a session's last second before it reports)
// are not seen: a table being loaded in one long transaction keeps the
// size it had until the load commits.
func sizeKnown(oid, class string) string {
	return `(` + unwritten(oid) + ` AND (greatest(pg_stat_get_last_vacuum_time(` + oid + `), pg_stat_get_last_autovacuum_time(` + oid + `),
		pg_stat_get_last_analyze_time(` + oid + `), pg_stat_get_last_autoanalyze_time(` + oid + `)) IS NOT NULL OR ` + neverWritten(oid, class) + `))`
}

// unwritten is SQL that says the statistics count no write to a table
// since its last ANALYZE and no insert since its last VACUUM, on a
// primary (see sizeKnown).
func unwritten(oid string) string {
	return `NOT pg_is_in_recovery() AND pg_stat_get_mod_since_analyze(` + oid + `) = 0 AND pg_stat_get_ins_since_vacuum(` + oid + `) = 0`
}

// neverWritten is SQL that says a table was never vacuumed, analysed nor
// inserted into, by statistics never reset or lost (see sizeKnown). The
// sub-select on pg_stat_database has no outer reference: PostgreSQL runs
// it once for the whole statement.
func neverWritten(oid, class string) string {
	return `(` + class + `.relpages = 0 AND ` + class + `.reltuples <= 0 AND pg_stat_get_tuples_inserted(` + oid + `) = 0 AND
		(SELECT stats_reset IS NULL FROM pg_stat_database WHERE datname = current_database()))`
}

// indexSizeKnown is sizeKnown for an index of table t: an index's relpages
// is written by CREATE INDEX, by ANALYZE, and by a VACUUM only when the
// index was scanned (a B-tree's cleanup can skip it, and leave relpages
// older than the VACUUM). So it is trusted when nothing was written to the
// table since its last ANALYZE, and no VACUUM came after that ANALYZE; or
// when the table was never written at all.
var indexSizeKnown = `(` + unwritten("t.oid") + ` AND (greatest(pg_stat_get_last_analyze_time(t.oid), pg_stat_get_last_autoanalyze_time(t.oid)) >=
		coalesce(greatest(pg_stat_get_last_vacuum_time(t.oid), pg_stat_get_last_autovacuum_time(t.oid)), '-infinity') OR ` + neverWritten("t.oid", "t") + `))`

// exclusivelyLocked are the relations of this database a session holds
// or waits for an ACCESS EXCLUSIVE lock on (a schema change, and the queue
// behind it): measuring one with pg_relation_size would wait behind it
// until lock_timeout ended the read, an ERROR in the server's log, and
// the whole list with it. Their size comes from relpages instead, as of
// the last VACUUM or ANALYZE. The subquery is not correlated: PostgreSQL
// reads pg_locks once and hashes it.
const exclusivelyLocked = `(SELECT relation FROM pg_locks WHERE locktype = 'relation' AND mode = 'AccessExclusiveLock'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`

// indexes reads the indexes of the tables collected: key columns (names
// resolved client-side), direction, predicate, method, operator classes
// and scans. Only unique indexes are measured with pg_relation_size; the
// others use relpages.
//
// Per-index work is kept to what is cheap, since it is paid 680,000 times
// at a million relations: key numbers are resolved to names from the
// columns already read, operator classes and collations from one read of
// pg_opclass and pg_collation (a few hundred rows each; looked up per
// index in SQL they took 0.4 ms an index, 25 s a page of 60,000), and the
// table's names are the kept table's own strings.
func indexes(ctx context.Context, q envelope.Conn, s *model.Snapshot, kept map[uint32]*model.Table) error {
	r, err := newIndexRows(ctx, q, s, kept)
	if err != nil {
		return err
	}
	scans := map[uint32]int64{}
	first := true
	err = byTablePages(s, catalogPage, func(oids []uint32, left int) error {
		if first {
			defer func() { s.Indexes = presize(s.Indexes, len(oids), left) }()
			first = false
		}
		rows, err := q.Query(ctx, envelope.Tag+indexesSQL, oids, s.BlockSize())
		if err != nil {
			return err
		}
		defer rows.Close()
		// A table's indexes are kept together, by name: the model's lookup
		// takes each table's run of them as it is. They are put in order
		// here rather than by ORDER BY, which would make the server finish
		// the page before sending its first row; unsorted, the rows are
		// read while the server makes the next ones.
		start := len(s.Indexes)
		defer func() {
			slices.SortStableFunc(s.Indexes[start:], func(a, b model.Index) int {
				return cmp.Or(cmp.Compare(a.Schema, b.Schema), cmp.Compare(a.Table, b.Table), cmp.Compare(a.Name, b.Name))
			})
		}()
		for rows.Next() {
			ix, table, err := r.scan(rows)
			if err != nil {
				return err
			}
			if table != 0 {
				scans[table] += ix.Scans
				s.Indexes = append(s.Indexes, ix)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	// A table's index scans are its indexes' (pg_stat_user_tables sums
	// them the same way); summed here instead of by a sub-select per
	// table in the table pages, which cost 2.9 s at 170,000 tables.
	for i := range s.Tables {
		s.Tables[i].IdxScan = scans[s.Tables[i].OID]
	}
	return nil
}

// indexRows turns the rows of indexesSQL into model.Index, with what
// they are resolved through.
type indexRows struct {
	classes map[uint32]string
	colls   map[uint32]collation
	kept    map[uint32]*model.Table
	names   columnNames
	intern  interner
}

func newIndexRows(ctx context.Context, q envelope.Conn, s *model.Snapshot, kept map[uint32]*model.Table) (*indexRows, error) {
	classes, err := opclasses(ctx, q)
	if err != nil {
		return nil, err
	}
	colls, err := collations(ctx, q)
	if err != nil {
		return nil, err
	}
	return &indexRows{classes: classes, colls: colls, kept: kept, names: keyNames(s), intern: interner{}}, nil
}

// scan reads one index and the oid of its table (0 for a table not
// asked for, which the join on the page's oids does not return).
func (r *indexRows) scan(rows pgx.Rows) (model.Index, uint32, error) {
	var ix model.Index
	var table uint32
	var nkey int
	var keyv, optv, clsv, collv string
	if err := rows.Scan(&table, &ix.Name, &ix.Method, &ix.Unique, &ix.Primary, &ix.Valid, &ix.Ready,
		&ix.Bytes, &ix.Scans, &ix.Def, &ix.Predicate, &nkey, &keyv, &optv, &ix.AgeXacts, &ix.ForeignKey, &clsv, &collv); err != nil {
		return ix, 0, err
	}
	t := r.kept[table]
	if t == nil {
		return ix, 0, nil
	}
	keys, options := vector(keyv), vector(optv)
	ix.Schema, ix.Table, ix.Method = t.Schema, t.Name, r.intern.str(ix.Method)
	cols := make([]string, len(keys))
	for i, k := range keys {
		cols[i] = r.names.of(table, int(k)) // 0, an expression, stays ""
	}
	for i, o := range options {
		if o&1 == 1 { // INDOPTION_DESC; nil when every key ascends
			if ix.Desc == nil {
				ix.Desc = make([]bool, len(options))
			}
			ix.Desc[i] = true
		}
	}
	ix.PrefixKeys, ix.KeyClasses = keyClasses(vector(clsv), vector(collv), r.classes, r.colls, r.intern)
	nkey = min(nkey, len(cols))
	ix.Columns, ix.Include = cols[:nkey], cols[nkey:]
	return ix, table, nil
}

// keyClasses are an index's per-key facts from its operator classes and
// collations (pg_index.indclass, indcollation): whether the key can serve
// LIKE 'abc%' (a pattern operator class, or a collation that compares as
// C does), and the class with its collation, as duplicate-index compares
// them ("text_ops en-x-icu"). Include columns have neither, so the lists
// follow the key columns.
func keyClasses(cls, coll []uint32, classes map[uint32]string, colls map[uint32]collation, intern interner) (prefix []bool, names []string) {
	for i, c := range cls {
		name := classes[c]
		var co collation
		var hasColl bool
		if i < len(coll) {
			co, hasColl = colls[coll[i]]
		}
		if strings.HasSuffix(name, "pattern_ops") || (hasColl && co.cLike) {
			if prefix == nil { // nil when no key can
				prefix = make([]bool, len(cls))
			}
			prefix[i] = true
		}
		if hasColl {
			name += " " + co.name
		}
		names = append(names, intern.str(name))
	}
	return prefix, names
}

// vector reads an int2vector's or oidvector's text ("1 3 2"), which is
// how the index rows carry pg_index's key columns, options, operator
// classes and collations: read as arrays, they were a third of the
// client's time at a million relations. Anything that is not a number
// reads as 0 (no column, no class).
func vector(text string) []uint32 {
	if text == "" {
		return nil
	}
	out := make([]uint32, 0, strings.Count(text, " ")+1)
	for f := range strings.FieldsSeq(text) {
		n, _ := strconv.ParseUint(f, 10, 32)
		out = append(out, uint32(n))
	}
	return out
}

// opclasses are the operator classes' names by oid.
func opclasses(ctx context.Context, q envelope.Conn) (map[uint32]string, error) {
	out := map[uint32]string{}
	rows, err := q.Query(ctx, envelope.Tag+`SELECT oid, opcname FROM pg_opclass`)
	if err != nil {
		return nil, err
	}
	var oid uint32
	var name string
	_, err = pgx.ForEachRow(rows, []any{&oid, &name}, func() error { out[oid] = name; return nil })
	return out, err
}

// collation is a pg_collation row as the index rules need it.
type collation struct {
	name  string
	cLike bool // compares as C does (see cLikeCollation)
}

// collations are the collations by oid.
func collations(ctx context.Context, q envelope.Conn) (map[uint32]collation, error) {
	out := map[uint32]collation{}
	rows, err := q.Query(ctx, envelope.Tag+`SELECT co.oid, co.collname, `+cLikeCollation("co")+` FROM pg_collation co`)
	if err != nil {
		return nil, err
	}
	var oid uint32
	var c collation
	_, err = pgx.ForEachRow(rows, []any{&oid, &c.name, &c.cLike}, func() error { out[oid] = c; return nil })
	return out, err
}

// columnNames resolves a table's attribute numbers to its columns' names,
// from the columns already read.
type columnNames map[uint32][]attName

type attName struct {
	num  int
	name string
}

func keyNames(s *model.Snapshot) columnNames {
	out := make(columnNames, len(s.Tables))
	for _, c := range s.Columns {
		out[c.TableOID] = append(out[c.TableOID], attName{c.Num, c.Name})
	}
	return out
}

func (n columnNames) of(table uint32, num int) string {
	for _, c := range n[table] {
		if c.num == num {
			return c.name
		}
	}
	return ""
}

// interner hands out one copy of each string: at a million relations the
// same few method, type and operator-class names are otherwise held once
// per row.
type interner map[string]string

func (in interner) str(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	in[s] = s
	return s
}

// cLikeCollation is SQL that says whether the collation of the
// pg_collation row alias compares strings byte by byte, as "C" does: only
// then can a B-tree of the default operator class serve LIKE 'abc%'.
// "default" is the database's: libc's C or POSIX, or the builtin
// provider of 17 (its C and C.UTF-8 sort by code point).
func cLikeCollation(alias string) string {
	return `(` + alias + `.collname IN ('C', 'POSIX', 'ucs_basic', 'pg_c_utf8') OR (` + alias + `.collname = 'default' AND
		(SELECT (d.datcollate IN ('C', 'POSIX') AND coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c') OR to_jsonb(d) ->> 'datlocprovider' = 'b'
		FROM pg_database d WHERE d.datname = current_database())))`
}

// indexesSQL reads the indexes of a page of tables. pg_get_indexdef and
// pg_get_expr open the table, and wait behind a schema change's lock held
// or queued on it: a locked table's expression and predicate texts are
// not read (its indexes are still listed, by their key columns).
var indexesSQL = `SELECT x.indrelid, i.relname, am.amname, x.indisunique, x.indisprimary, x.indisvalid, x.indisready,
		CASE WHEN x.indisunique AND NOT (i.oid IN ` + exclusivelyLocked + ` OR t.oid IN ` + exclusivelyLocked + ` OR ` + indexSizeKnown + `) THEN pg_relation_size(i.oid) ELSE i.relpages::int8 * $2 END,
		coalesce(pg_stat_get_numscans(i.oid), 0),
		CASE WHEN x.indexprs IS NOT NULL AND NOT (i.oid IN ` + exclusivelyLocked + ` OR t.oid IN ` + exclusivelyLocked + `) THEN pg_get_indexdef(i.oid) ELSE '' END,
		CASE WHEN x.indpred IS NULL THEN '' WHEN i.oid IN ` + exclusivelyLocked + ` OR t.oid IN ` + exclusivelyLocked + ` THEN '(not read: a schema change holds its lock)' ELSE pg_get_expr(x.indpred, x.indrelid) END,
		x.indnkeyatts::int, x.indkey::text, x.indoption::text,
		age(i.xmin)::int8, EXISTS (SELECT FROM pg_constraint fk WHERE fk.conrelid = x.indrelid AND fk.contype = 'f' AND fk.conkey[1] = x.indkey[0]),
		x.indclass::text, x.indcollation::text
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
		JOIN pg_am am ON am.oid = i.relam
		JOIN unnest($1::oid[]) AS kept(oid) ON kept.oid = x.indrelid`

// columns reads the columns of the tables collected with their planner
// statistics (null fraction, distinct values, width, correlation, the
// most common values' frequencies).
//
// The statistics are the read that runs out of time on a loaded server:
// pg_stats, joined by names, makes PostgreSQL scan and hash every row of
// pg_statistic with a privilege check on each, whatever page of tables is
// asked for, so paging does not bound it. Each column's statistics are
// looked up instead (a lateral subquery the planner keeps apart, OFFSET
// 0, so each lookup goes through the catalogs' indexes), in pages of
// columnPage tables: each statement's work follows its page, and each
// stays well within the statement timeout. A superuser reads
// pg_statistic itself, which pg_stats is built on, without the per-row
// privilege checks (it passes them all).
func columns(ctx context.Context, q envelope.Conn, s *model.Snapshot, kept map[uint32]*model.Table) error {
	var super bool
	if err := q.QueryRow(ctx, envelope.Tag+"SELECT current_setting('is_superuser') = 'on'").Scan(&super); err != nil {
		return err
	}
	sql := columnsSQL(super)
	intern := interner{}
	page := columnPage
	if super {
		page = columnPageSuper
	}
	first := true
	return byTablePages(s, min(page, catalogPage), func(oids []uint32, left int) error {
		if err := columnsOf(ctx, q, s, sql, oids, kept, intern); err != nil {
			return err
		}
		if first {
			s.Columns = presize(s.Columns, len(oids), left)
			first = false
		}
		return nil
	})
}

// columnPage is how many tables' columns one statement reads through
// pg_stats; columnPageSuper through pg_statistic, which skips a privilege
// check per row (40 ms for 1,000 tables at a million relations, on two
// cores: at 5,000 a page, 34 statements instead of 170 saved 2 s).
var columnPage, columnPageSuper = 1000, 5000

func columnsOf(ctx context.Context, q envelope.Conn, s *model.Snapshot, sql string, oids []uint32, kept map[uint32]*model.Table, intern interner) error {
	rows, err := q.Query(ctx, envelope.Tag+sql, oids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c model.Column
		if err := rows.Scan(&c.TableOID, &c.Name, &c.Num, &c.Type, &c.NotNull, &c.Default, &c.Identity,
			&c.HasStats, &c.NullFrac, &c.NDistinct, &c.Correlation, &c.AvgWidth, &c.MostCommonFreqSum, &c.MostCommonFreqMax,
			&c.Collation, &c.CLike); err != nil {
			return err
		}
		t := kept[c.TableOID]
		if t == nil {
			continue // not asked for: cannot happen, the join is on the page's oids
		}
		c.Schema, c.Table = t.Schema, t.Name
		c.Name, c.Type, c.Collation = intern.str(c.Name), intern.str(c.Type), intern.str(c.Collation)
		s.Columns = append(s.Columns, c)
	}
	return rows.Err()
}

// columnsSQL reads the columns of a page of tables. A column default's
// text (pg_get_expr) opens its table, which would wait behind a schema
// change's ACCESS EXCLUSIVE lock into lock_timeout: a locked table's
// defaults are left unread.
func columnsSQL(superuser bool) string {
	stats := `SELECT st.null_frac, st.n_distinct, st.correlation, st.avg_width, st.most_common_freqs FROM pg_stats st
		     WHERE st.schemaname = n.nspname AND st.tablename = c.relname AND st.attname = a.attname AND st.inherited = (c.relkind = 'p')`
	if superuser {
		// pg_stats' columns from pg_statistic's slots: kind 1 holds
		// the most common values' frequencies, kind 3 the correlation.
		slot := func(kind string) string {
			var parts []string
			for i := 1; i <= 5; i++ {
				parts = append(parts, fmt.Sprintf("WHEN s.stakind%d = %s THEN s.stanumbers%d", i, kind, i))
			}
			return "CASE " + strings.Join(parts, " ") + " END"
		}
		stats = `SELECT s.stanullfrac AS null_frac, s.stadistinct AS n_distinct, (` + slot("3") + `)[1] AS correlation,
		     s.stawidth AS avg_width, ` + slot("1") + ` AS most_common_freqs FROM pg_statistic s
		     WHERE s.starelid = a.attrelid AND s.staattnum = a.attnum AND s.stainherit = (c.relkind = 'p')`
	}
	return `SELECT a.attrelid, a.attname, a.attnum::int, format_type(a.atttypid, a.atttypmod), a.attnotnull,
		CASE WHEN c.oid IN ` + exclusivelyLocked + ` THEN '' ELSE coalesce(pg_get_expr(d.adbin, d.adrelid), '') END, a.attidentity <> '',
		st.null_frac IS NOT NULL, coalesce(st.null_frac, 0)::float8, coalesce(st.n_distinct, 0)::float8,
		coalesce(st.correlation, 0)::float8, coalesce(st.avg_width, 0),
		coalesce((SELECT sum(f) FROM unnest(st.most_common_freqs) f), 0)::float8,
		coalesce(st.most_common_freqs[1], 0)::float8,
		coalesce(co.collname, ''), coalesce(` + cLikeCollation("co") + `, true)
		FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		LEFT JOIN LATERAL (` + stats + ` OFFSET 0) st ON true
		JOIN unnest($1::oid[]) AS kept(oid) ON kept.oid = a.attrelid
		WHERE a.attnum > 0 AND NOT a.attisdropped`
}

// shapes parses every statement, once: the parsed statement stays on the
// model (Statement.Parsed) for the plans, the rules and the experiments,
// and its shape (predicates, claims, relations) is what the rules read.
func shapes(s *model.Snapshot) {
	s.Shapes = map[int64]*model.QueryShape{}
	for i := range s.Statements {
		st := &s.Statements[i]
		st.Fingerprint, _ = sqlparse.Fingerprint(st.Query)
		parsed, err := sqlparse.Parse(st.Query)
		if err != nil {
			s.Unparsed++
			continue
		}
		st.Parsed = parsed
		s.Shapes[st.QueryID] = parsed.Shape()
	}
}

const planStmt = "pgmedic_plan"

// planned are the commands whose plans collect reads: every DML statement.
// EXPLAIN without ANALYZE executes none of them.
var planned = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true}
})

// plans EXPLAINs (without ANALYZE: nothing is executed) the statements with
// the most total time. Statements with $n parameters are prepared and
// explained with plan_cache_mode = force_generic_plan: that plan does not
// depend on values, so NULLs can stand in for them, and it is the plan a
// prepared statement settles on after five executions.
func plans(ctx context.Context, q envelope.Conn, s *model.Snapshot, top int) {
	s.Plans, s.PlanErrors, s.PlanErrorFixes, s.GuessedTypes = map[int64]*plan.Explain{}, map[int64]string{}, map[int64]string{}, map[int64]bool{}
	n := 0
	for _, st := range s.Statements {
		if n >= top || ctx.Err() != nil {
			break
		}
		sh := s.Shapes[st.QueryID]
		if sh == nil || !planned()[sh.Command] {
			continue
		}
		n++
		ex, guessed, err := explainGeneric(ctx, q, st.Parsed, s.ColumnType)
		if err != nil {
			s.PlanErrors[st.QueryID] = err.Error()
			s.PlanErrorFixes[st.QueryID] = planFix(s.User, err.Error(), sh.Command)
			continue
		}
		s.Plans[st.QueryID] = ex
		if guessed {
			s.GuessedTypes[st.QueryID] = true
		}
	}
	clientTypes(ctx, q, s)
	var tables []string
	for _, ex := range s.Plans {
		tables = append(tables, ex.Tables()...)
	}
	for _, ct := range s.ClientTypes {
		tables = append(tables, ct.Plan.Tables()...)
	}
	if cat, err := CastCatalog(ctx, q, tables); err == nil {
		s.Casts = cat
	} else {
		s.Missing[model.SrcCasts] = skipFor(s, "cannot read column types and operator families", err)
	}
}

// explainGeneric is the generic plan of a statement with $n parameters
// (prepared, then EXPLAIN EXECUTE with NULLs under force_generic_plan), or
// the plain plan of one without: nothing is executed. guessed says the
// parameters' types were pgmedic's fallbacks, not PostgreSQL's inference.
func explainGeneric(ctx context.Context, q envelope.Conn, stmt *sqlparse.Statement, columnType func(sqlparse.Column) string) (ex *plan.Explain, guessed bool, err error) {
	query, err := stmt.Runnable()
	if err != nil {
		return nil, false, err
	}
	n := stmt.ParamCount()
	ex, err = generic(ctx, q, query, n, func() error {
		var err error
		guessed, err = envelope.PrepareGuessing(ctx, q, planStmt, query, stmt.FallbackCandidates(n, columnType))
		return err
	})
	return ex, guessed, err
}

// generic EXPLAINs (VERBOSE, without ANALYZE) the generic plan of a query
// with n parameters, which prepare has prepared as planStmt: EXECUTE with
// NULLs under force_generic_plan, since that plan does not depend on the
// values. A query without parameters is explained as it is.
func generic(ctx context.Context, q envelope.Conn, query string, n int, prepare func() error) (*plan.Explain, error) {
	target := query
	if n > 0 {
		if err := prepare(); err != nil {
			return nil, fmt.Errorf("cannot prepare the statement: %s", envelope.Message(err))
		}
		// Prepared statements outlive transactions: drop it in any case.
		defer q.Exec(context.WithoutCancel(ctx), envelope.Tag+"DEALLOCATE "+planStmt)
		nulls := make([]string, n)
		for i := range nulls {
			nulls[i] = "NULL"
		}
		target = "EXECUTE " + planStmt + "(" + strings.Join(nulls, ", ") + ")"
	}
	var ex *plan.Explain
	err := envelope.RolledBack(ctx, q, envelope.ReadOnly, func() error {
		if n > 0 {
			if _, err := q.Exec(ctx, envelope.Tag+"SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
				return fmt.Errorf("asking for a generic plan: %s", envelope.Message(err))
			}
		}
		var err error
		if ex, err = envelope.Explain(ctx, q, "VERBOSE", target); err != nil {
			return fmt.Errorf("EXPLAIN failed: %s", envelope.Message(err))
		}
		return nil
	})
	return ex, err
}

// Reparse parses a snapshot's statements again, for a snapshot read back
// from JSON (a watch bundle), where the parsed statements are not kept.
func Reparse(s *model.Snapshot) { shapes(s) }
