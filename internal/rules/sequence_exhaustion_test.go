package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

func seqAt(typ, colType string, last int64, after int64, seconds float64) model.Sequence {
	sq := model.Sequence{Schema: "public", Name: "readings_id_seq", Type: typ, Min: 1, Increment: 1,
		Table: model.RelRef{Schema: "public", Name: "readings"}, Column: "id", ColumnType: colType}
	sq.Max, _ = typeMax(typ)
	if last > 0 {
		sq.Last = &last
	}
	if after > 0 {
		sq.LastAfter, sq.Seconds = &after, seconds
	}
	return sq
}

// TestSequenceExhaustion: the limit is the smaller of the sequence's and
// the column's; the severity follows the share used and, for a sequence
// half used, the days left at the measured rate; cycling, unused and
// unreadable sequences are not judged (the last are counted as unseen).
func TestSequenceExhaustion(t *testing.T) {
	for _, c := range []struct {
		name string
		sq   model.Sequence
		want model.Severity // -1: no finding
		in   string         // in the title
		fix  string         // in the fix
	}{
		{"an integer serial at 80%", seqAt("integer", "integer", 1_720_000_000, 0, 0), model.Warning, "integer the column id holds", "ALTER SEQUENCE public.readings_id_seq AS bigint"},
		{"at 95%", seqAt("integer", "integer", 2_040_000_000, 0, 0), model.Critical, "95.0%", "CREATE UNIQUE INDEX CONCURRENTLY"},
		{"a bigint sequence feeding an integer column", seqAt("bigint", "integer", 1_720_000_000, 0, 0), model.Warning, "integer the column id holds", "ADD COLUMN id_new bigint"},
		{"the same value in a bigint column", seqAt("bigint", "bigint", 1_720_000_000, 0, 0), -1, "", ""},
		{"60% used, days left at the rate", seqAt("integer", "integer", 1_300_000_000, 1_300_030_000, 10), model.Critical, "per second measured", ""},
		{"60% used, a slow rate", seqAt("integer", "integer", 1_300_000_000, 1_300_000_010, 10), -1, "", ""},
		{"20% used, a burst", seqAt("integer", "integer", 400_000_000, 400_100_000, 1), -1, "", ""},
		{"never used", seqAt("integer", "integer", 0, 0, 0), -1, "", ""},
		{"cycling", func() model.Sequence { s := seqAt("integer", "integer", 2_100_000_000, 0, 0); s.Cycle = true; return s }(), -1, "", ""},
		{"standalone smallint", func() model.Sequence {
			s := seqAt("smallint", "", 30_000, 0, 0)
			s.Column, s.Table = "", model.RelRef{}
			return s
		}(), model.Critical, "sequence's maximum (smallint)", "AS bigint"},
	} {
		fs, _ := sequenceExhaustion(&model.Snapshot{Database: "telemetry", Sequences: []model.Sequence{c.sq}})
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want no finding, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 {
			t.Fatalf("%s: want one finding, got %d", c.name, len(fs))
		}
		f := fs[0]
		if f.Severity != c.want || !strings.Contains(f.Title, c.in) || !strings.Contains(f.Fix.SQL, c.fix) {
			t.Errorf("%s: got %s %q, fix %q", c.name, f.Severity, f.Title, f.Fix.SQL)
		}
		if strings.Contains(f.Fix.SQL, "ALTER COLUMN") {
			t.Errorf("%s: the fix rewrites the table: %s", c.name, f.Fix.SQL)
		}
	}
	hidden := seqAt("integer", "integer", 0, 0, 0)
	hidden.Hidden = true
	_, skips := sequenceExhaustion(&model.Snapshot{User: "monitor", Sequences: []model.Sequence{hidden}})
	if len(skips) != 1 || !strings.Contains(skips[0].Fix, "GRANT SELECT ON ALL SEQUENCES") {
		t.Errorf("an unreadable sequence is not said: %+v", skips)
	}
}
