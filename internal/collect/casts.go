package collect

import (
	"context"
	"fmt"
	"sort"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// CastCatalog reads what the implicit-cast rule needs to know about the
// columns of the named tables: each column's type, the valid indexes that
// lead with it, and which right-hand types those indexes' operator
// families compare directly; plus the binary-coercible casts.
//
// An index can serve "col op value" only through an operator of its
// operator family whose left type is the operator class's input type: a
// varchar column's text_ops index serves "(col)::text = 'x'::text"
// because varchar -> text is binary-coercible (a relabel), while int4's
// integer_ops has no (integer, numeric) operator, so "(col)::numeric =
// 5.0" is a filter on every row.
func CastCatalog(ctx context.Context, q envelope.Conn, tables []string) (*model.CastCatalog, error) {
	c := &model.CastCatalog{Columns: map[string]model.CastColumn{}, Binary: map[string]bool{}}
	if len(tables) == 0 {
		return c, nil
	}
	rows, err := q.Query(ctx, envelope.Tag+`
SELECT n.nspname, t.relname, a.attname, format_type(a.atttypid, a.atttypmod), format_type(a.atttypid, NULL),
       coalesce(ix.relname, ''), coalesce(format_type(opc.opcintype, NULL), ''),
       coalesce((SELECT array_agg(DISTINCT format_type(ao.amoprighttype, NULL)) FROM pg_amop ao
                 WHERE ao.amopfamily = opc.opcfamily AND ao.amoplefttype = opc.opcintype), '{}')
FROM pg_attribute a
JOIN pg_class t ON t.oid = a.attrelid AND t.relkind IN ('r', 'p', 'm', 'f')
JOIN pg_namespace n ON n.oid = t.relnamespace
LEFT JOIN pg_index i ON i.indrelid = t.oid AND i.indkey[0] = a.attnum AND i.indisvalid AND i.indpred IS NULL
LEFT JOIN pg_class ix ON ix.oid = i.indexrelid
LEFT JOIN pg_opclass opc ON opc.oid = i.indclass[0]
WHERE t.relname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
ORDER BY 1, 2, 3, 6`, tables)
	if err != nil {
		return nil, fmt.Errorf("reading column types and indexes for the cast check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema, table, column, typ, base, index, input string
		var accepts []string
		if err := rows.Scan(&schema, &table, &column, &typ, &base, &index, &input, &accepts); err != nil {
			return nil, fmt.Errorf("reading column types and indexes for the cast check: %w", err)
		}
		key := model.CastKey(schema, table, column)
		col, ok := c.Columns[key]
		if !ok {
			col = model.CastColumn{Schema: schema, Table: table, Column: column, Type: typ, BaseType: base}
		}
		if index != "" {
			sort.Strings(accepts)
			col.Indexes = append(col.Indexes, model.CastIndex{Name: index, InputType: input, Accepts: accepts})
		}
		c.Columns[key] = col
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading column types and indexes for the cast check: %w", err)
	}
	casts, err := q.Query(ctx, envelope.Tag+`SELECT format_type(castsource, NULL), format_type(casttarget, NULL) FROM pg_cast WHERE castmethod = 'b'`)
	if err != nil {
		return nil, fmt.Errorf("reading binary-coercible casts: %w", err)
	}
	defer casts.Close()
	for casts.Next() {
		var from, to string
		if err := casts.Scan(&from, &to); err != nil {
			return nil, fmt.Errorf("reading binary-coercible casts: %w", err)
		}
		c.Binary[from+">"+to] = true
	}
	return c, casts.Err()
}

// Activity samples pg_stat_activity into s.Activity, for the verification
// engine's load check when no full snapshot was collected.
func Activity(ctx context.Context, q envelope.Conn, s *model.Snapshot) error {
	if s.Missing == nil {
		s.Missing = map[string]model.Skip{}
	}
	activity(ctx, q, s)
	return nil
}
