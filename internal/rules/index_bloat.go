package rules

import (
	"fmt"
	"math"
	"slices"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// IndexBloatID is the rule id of B-tree indexes much larger than their
// rows need.
const IndexBloatID = "index-bloat"

// Thresholds of index-bloat. A B-tree page is freed only when every key
// on it is gone; deletes and updates scattered over the key range leave
// pages partly empty for good (VACUUM removes the keys, not the pages),
// and only inserts that land on those pages fill them again. An index at
// twice its estimated size is half empty; under a few MB it costs little
// whatever its shape.
const (
	indexBloatRatio    = 2.0
	indexBloatCritical = 4.0
	indexBloatMinBytes = 4 << 20
)

// btreeEstimate is the size a freshly built B-tree of these rows and key
// widths would have: each leaf tuple an 8-byte header and the key,
// aligned to 8 bytes, plus its 4-byte line pointer, on 8 kB pages filled
// to the default fillfactor of 90% after the page header and the B-tree's
// special space, plus about 1% for the inner pages. Deduplication (13+)
// makes a low-cardinality index smaller still, so the estimate errs
// large, towards silence.
func btreeEstimate(rows float64, keyWidth int) float64 {
	tuple := 8 + float64((keyWidth+7)&^7) + 4
	perPage := math.Floor((8192 - 24 - 16) * 0.9 / tuple)
	return math.Ceil(rows/perPage) * 8192 * 1.01
}

// keyWidth is the average width of an index's key columns (pg_stats);
// ok is false when one is an expression or has no statistics.
func keyWidth(s *model.Snapshot, t *model.Table, ix model.Index) (int, bool) {
	w := 0
	for _, c := range slices.Concat(ix.Columns, ix.Include) {
		col := s.Column(t, c)
		if c == "" || col == nil || !col.HasStats || col.AvgWidth == 0 {
			return 0, false
		}
		w += col.AvgWidth
	}
	return w, true
}

// indexBloat finds B-tree indexes at least twice the size a fresh build
// of the table's rows would have, estimated from the statistics (rows,
// key widths); the experiment measures the index and a fresh build of it.
func indexBloat(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	for _, ix := range s.Indexes {
		// An index nobody reads is to be dropped, not rebuilt
		// (unused-index says so).
		if ix.Method != "btree" || !ix.Valid || ix.Bytes < indexBloatMinBytes || unusedOn(s, ix) != nil {
			continue
		}
		t := s.Table(model.RelRef{Schema: ix.Schema, Name: ix.Table})
		if t == nil || t.Partitioned || t.Reltuples < 0 {
			continue
		}
		w, ok := keyWidth(s, t, ix)
		if !ok {
			continue
		}
		// Rows without a partial index's predicate are not in it: its
		// size cannot be estimated from the table's row count.
		if ix.Predicate != "" {
			continue
		}
		// Rows now: reltuples is as of the last VACUUM or ANALYZE, and a
		// table that grew since holds more keys than it says. Dead rows
		// keep their keys until VACUUM: those entries are table-bloat's
		// (VACUUM's), not a rebuild's.
		// A table that grew since also has more pages: the planner scales
		// reltuples by them, and so does this. On a standby the live and
		// dead counts are the standby's own (nothing it replays counts),
		// and the pages are the only sign of the rows added since.
		rows := max(t.Reltuples, float64(t.Live+t.Dead))
		if t.RelPages > 0 && t.HeapBytes > t.RelPages*8192 {
			rows = max(rows, t.Reltuples*float64(t.HeapBytes)/float64(t.RelPages*8192))
		}
		est := btreeEstimate(rows, w)
		ratio := float64(ix.Bytes) / est
		if ratio < indexBloatRatio {
			continue
		}
		sev := model.Warning
		if ratio >= indexBloatCritical {
			sev = model.Critical
		}
		name := sqlparse.QuoteQualified(ix.Schema, ix.Name)
		wasted := float64(ix.Bytes) - est
		out = append(out, model.Finding{Rule: IndexBloatID, Severity: sev,
			Title: fmt.Sprintf("index %s on %s.%s (%s) is %.1fx the size its %s rows need: about %.0f MB of its %.0f MB is empty space in its pages",
				ix.Name, ix.Schema, ix.Table, indexKey(ix), ratio, printable.Count(rows), wasted/(1<<20), float64(ix.Bytes)/(1<<20)),
			Object: model.Object{Kind: "index", Name: ix.Schema + "." + ix.Name, Database: s.Database},
			Evidence: []model.Evidence{ev("index size", float64(ix.Bytes)/(1<<20), "MB"),
				ev("size of a fresh build, estimated from the rows and key widths", est/(1<<20), "MB"),
				ev("rows in the table (the larger of reltuples and live plus dead rows)", rows, ""),
				ev("average key width (pg_stats)", float64(w), "bytes")},
			Impact: model.Impact{Summary: "every scan of a key range reads more pages than the keys fill, the index takes cache from the data, and each write to it may touch a page that is mostly empty"},
			Fix: model.Fix{Summary: "rebuild it without blocking reads or writes (PostgreSQL 12+); then find what leaves it sparse (deletes or updates scattered over the key range, a purge that keeps one row in ten) and whether a partial index or partitioning fits the pattern better",
				SQL: fmt.Sprintf("REINDEX INDEX CONCURRENTLY %s;", name)},
			Docs:       docsPath(IndexBloatID),
			Experiment: &model.Experiment{Kind: model.ExpIndexRebuild, Table: model.RelRef{Schema: ix.Schema, Name: ix.Table}, Index: ix.Name},
		})
	}
	Sort(out)
	return out, nil
}
