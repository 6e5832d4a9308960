package collect

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// sequencesSQL reads every sequence of the database with the column that
// owns it (a serial column's dependency is 'a', an identity column's 'i'),
// and the server's clock, so that two readings give a rate in the server's
// own time. pg_sequence_last_value reads the sequence itself (no lock
// that blocks nextval); it is asked only where the role may read it, and
// never of another session's temporary sequence, which it cannot read.
const sequencesSQL = `SELECT s.seqrelid, n.nspname, c.relname, format_type(s.seqtypid, NULL),
		CASE WHEN has_sequence_privilege(c.oid, 'SELECT,USAGE') THEN pg_sequence_last_value(c.oid) END,
		NOT has_sequence_privilege(c.oid, 'SELECT,USAGE'),
		s.seqmin, s.seqmax, s.seqincrement, s.seqcycle,
		coalesce(tn.nspname, ''), coalesce(t.relname, ''), coalesce(a.attname, ''), coalesce(format_type(a.atttypid, a.atttypmod), ''),
		coalesce(d.deptype = 'i', false), extract(epoch FROM clock_timestamp())::float8
	FROM pg_sequence s
	JOIN pg_class c ON c.oid = s.seqrelid
	JOIN pg_namespace n ON n.oid = c.relnamespace
	LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_class'::regclass
		AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0
	LEFT JOIN pg_class t ON t.oid = d.refobjid
	LEFT JOIN pg_namespace tn ON tn.oid = t.relnamespace
	LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
	WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' AND NOT pg_is_other_temp_schema(n.oid)
		AND s.seqrelid > $1
	ORDER BY s.seqrelid
	LIMIT $2`

// readSequences reads the sequences, a page at a time (a database with
// a serial key per table of a schema per tenant has as many sequences as
// tables, and each last value is read from the sequence itself), and the
// server's time of the last page.
func readSequences(ctx context.Context, q envelope.Conn) ([]model.Sequence, float64, error) {
	var out []model.Sequence
	var at float64
	for after := uint32(0); ; {
		rows, err := q.Query(ctx, envelope.Tag+sequencesSQL, after, catalogPage)
		if err != nil {
			return nil, 0, err
		}
		n := 0
		for rows.Next() {
			var sq model.Sequence
			if err := rows.Scan(&after, &sq.Schema, &sq.Name, &sq.Type, &sq.Last, &sq.Hidden, &sq.Min, &sq.Max, &sq.Increment, &sq.Cycle,
				&sq.Table.Schema, &sq.Table.Name, &sq.Column, &sq.ColumnType, &sq.Identity, &at); err != nil {
				rows.Close()
				return nil, 0, err
			}
			out = append(out, sq)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
		if n < catalogPage {
			return out, at, nil
		}
	}
}

// sequences reads the sequences once, before sampling; sequencesAfter
// reads their last values again once the sampling window is over.
func sequences(ctx context.Context, q envelope.Conn, s *model.Snapshot) float64 {
	seqs, at, err := readSequences(ctx, q)
	if err != nil {
		s.Missing[model.SrcSequences] = skipFor(s, "cannot read the sequences", err)
		return 0
	}
	s.Sequences = seqs
	return at
}

func sequencesAfter(ctx context.Context, q envelope.Conn, s *model.Snapshot, before float64) {
	if len(s.Sequences) == 0 || before == 0 {
		return
	}
	seqs, at, err := readSequences(ctx, q)
	if err != nil || at <= before {
		return // the rate is evidence, not a source: the rule judges without it
	}
	last := map[string]*int64{}
	for _, sq := range seqs {
		last[sq.Schema+"."+sq.Name] = sq.Last
	}
	for i := range s.Sequences {
		if v := last[s.Sequences[i].Schema+"."+s.Sequences[i].Name]; v != nil {
			s.Sequences[i].LastAfter, s.Sequences[i].Seconds = v, at-before
		}
	}
}
