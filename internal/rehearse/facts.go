package rehearse

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// columnFactsSQL reads what a column's move to a new column must keep: NOT
// NULL, identity, default and the sequence a serial's default takes from,
// and the table's kind; $1 is the table, $2 the column.
const columnFactsSQL = `SELECT a.attnum::int, a.attnotnull, a.attidentity::text,
	coalesce((SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum), ''),
	CASE WHEN a.attidentity = '' THEN coalesce(pg_get_serial_sequence($1, $2), '') ELSE '' END,
	c.relkind::text, c.relispartition
	FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped`

// columnIndexesSQL reads the indexes whose keys, expressions or predicate
// name the column, with the PRIMARY KEY or UNIQUE constraint each backs;
// an exclusion constraint's index is reported as one ('x').
const columnIndexesSQL = `SELECT c.relname::text, pg_get_indexdef(i.indexrelid), coalesce(con.conname::text, ''), coalesce(con.contype::text, '')
	FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid AND con.contype IN ('p', 'u', 'x')
	WHERE i.indrelid = to_regclass($1) AND ($2::int2 = ANY (i.indkey::int2[]) OR EXISTS (SELECT FROM pg_depend dp
		WHERE dp.classid = 'pg_class'::regclass AND dp.objid = i.indexrelid AND dp.refobjid = i.indrelid AND dp.refobjsubid = $2))
	ORDER BY c.relname`

// columnBlockersSQL names what else depends on the column: foreign keys
// from or to it, CHECK constraints, views and rules, triggers, policies,
// generated columns, extended statistics. Each would stop DROP COLUMN or
// go with it, and none is moved by the safe form's steps.
//
// A constraint, a generated column's expression and extended statistics
// depend on a column automatically ('a'), views, rules, triggers and
// policies normally ('n'); the column's own default, its serial's or
// identity's sequence, its indexes and the keys they back are moved by
// the steps and left out here.
const columnBlockersSQL = `SELECT pg_describe_object(dp.classid, dp.objid, dp.objsubid) FROM pg_depend dp
	WHERE dp.refclassid = 'pg_class'::regclass AND dp.refobjid = to_regclass($1) AND dp.refobjsubid = $2 AND dp.deptype IN ('n', 'a')
	AND NOT (dp.classid = 'pg_class'::regclass AND EXISTS (SELECT FROM pg_class r WHERE r.oid = dp.objid AND r.relkind IN ('i', 'I', 'S')))
	AND NOT (dp.classid = 'pg_constraint'::regclass AND EXISTS (SELECT FROM pg_constraint k WHERE k.oid = dp.objid AND k.contype IN ('p', 'u', 'n')))
	AND NOT (dp.classid = 'pg_attrdef'::regclass AND EXISTS (SELECT FROM pg_attrdef d WHERE d.oid = dp.objid AND d.adrelid = dp.refobjid AND d.adnum = $2))
	UNION ALL
	SELECT pg_describe_object('pg_constraint'::regclass, k.oid, 0) || ' of ' || k.conrelid::regclass::text FROM pg_constraint k
	WHERE k.contype = 'f' AND k.confrelid = to_regclass($1) AND $2::int2 = ANY (k.confkey)
	ORDER BY 1`

// Facts reads a column's facts from a database the migration runs on
// (the twin's), through conn.
func Facts(ctx context.Context, conn *pgx.Conn) migration.Facts {
	return func(table sqlparse.Name, column string) (*migration.ColumnFacts, error) {
		rel := sqlparse.QuoteQualified(table.Schema, table.Name)
		f := &migration.ColumnFacts{}
		var attnum int
		var kind string
		var partition bool
		err := conn.QueryRow(ctx, envelope.Tag+columnFactsSQL, rel, column).Scan(&attnum, &f.NotNull, &f.Identity, &f.Default, &f.Sequence, &kind, &partition)
		if err == pgx.ErrNoRows {
			return nil, fmt.Errorf("%s has no column %s on the twin", rel, column)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s.%s: %s", rel, column, envelope.Message(err))
		}
		if kind == "p" || partition {
			f.Blockers = append(f.Blockers, fmt.Sprintf("%s is partitioned, or a partition: a column is added and dropped for the whole tree", rel))
		}
		rows, err := conn.Query(ctx, envelope.Tag+columnIndexesSQL, rel, attnum)
		if err != nil {
			return nil, fmt.Errorf("reading the indexes of %s: %s", rel, envelope.Message(err))
		}
		for rows.Next() {
			var ix migration.IndexFact
			var contype string
			if err := rows.Scan(&ix.Name, &ix.Def, &ix.Constraint, &contype); err != nil {
				rows.Close()
				return nil, err
			}
			if contype == "x" {
				f.Blockers = append(f.Blockers, "the exclusion constraint "+ix.Constraint+" reads it")
				continue
			}
			ix.Primary = contype == "p"
			f.Indexes = append(f.Indexes, ix)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		deps, err := conn.Query(ctx, envelope.Tag+columnBlockersSQL, rel, attnum)
		if err != nil {
			return nil, fmt.Errorf("reading what depends on %s.%s: %s", rel, column, envelope.Message(err))
		}
		blockers, err := pgx.CollectRows(deps, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		for _, b := range slices.Compact(blockers) {
			f.Blockers = append(f.Blockers, b+" depends on it")
		}
		return f, nil
	}
}
