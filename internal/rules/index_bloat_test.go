package rules

import (
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestIndexBloat: an index at twice (four times) the size its rows and
// key widths need is a warning (critical); a compact one, a small one, a
// partial one and one whose key has no statistics are not judged.
func TestIndexBloat(t *testing.T) {
	est := btreeEstimate(100000, 12) // two int4-ish keys' width
	snap := func(bytes float64, mod func(*model.Index)) *model.Snapshot {
		ix := model.Index{Schema: "public", Table: "samples", Name: "samples_pkey", Method: "btree", Valid: true, Primary: true, Unique: true,
			Columns: []string{"meter_id", "taken_at"}, Bytes: int64(bytes)}
		if mod != nil {
			mod(&ix)
		}
		return &model.Snapshot{
			Tables: []model.Table{{Schema: "public", Name: "samples", Reltuples: 100000}},
			Columns: []model.Column{{Schema: "public", Table: "samples", Name: "meter_id", HasStats: true, AvgWidth: 4},
				{Schema: "public", Table: "samples", Name: "taken_at", HasStats: true, AvgWidth: 8}},
			Indexes: []model.Index{ix}}
	}
	for _, c := range []struct {
		name string
		s    *model.Snapshot
		want model.Severity // -1: none
	}{
		{"fresh", snap(est*1.1, nil), -1},
		{"half empty", snap(est*2.5, nil), model.Warning},
		{"a tenth full", snap(est*10, nil), model.Critical},
		{"partial", snap(est*10, func(ix *model.Index) { ix.Predicate = "(kwh > 0)" }), -1},
		{"an expression key", snap(est*10, func(ix *model.Index) { ix.Columns = []string{"", "taken_at"} }), -1},
		{"not a B-tree", snap(est*10, func(ix *model.Index) { ix.Method = "gin" }), -1},
		{"never read: dropped, not rebuilt", func() *model.Snapshot {
			s := snap(est*10, func(ix *model.Index) {
				ix.Primary, ix.Unique, ix.Name, ix.AgeXacts = false, false, "samples_meter_taken", 90000
			})
			s.Tables[0].Inserted = 500000
			return s
		}(), -1},
		// A standby's live count is its own (0); pg_class says 100,000 rows
		// in 500 pages as of the last ANALYZE, and the heap is now ten times
		// that: the rows grew with it, and so did the index.
		{"grown since ANALYZE, seen on a standby", func() *model.Snapshot {
			s := snap(est*10, nil)
			s.Tables[0].RelPages, s.Tables[0].HeapBytes = 500, 5000*8192
			return s
		}(), -1},
		{"small, however empty", func() *model.Snapshot {
			s := snap(float64(indexBloatMinBytes)-1, nil)
			s.Tables[0].Reltuples = 1000
			return s
		}(), -1},
	} {
		fs, _ := indexBloat(c.s)
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want none, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Severity != c.want || fs[0].Experiment == nil || fs[0].Experiment.Kind != model.ExpIndexRebuild || fs[0].Fix.SQL != "REINDEX INDEX CONCURRENTLY public.samples_pkey;" {
			t.Errorf("%s: got %+v", c.name, fs)
		}
	}
}
