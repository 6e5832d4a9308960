package rules

import (
	"fmt"
	"slices"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// UnusedIndexID is the stable id of the rule.
const UnusedIndexID = "unused-index"

// Thresholds of unused-index. pg_stat_user_indexes counts scans since the
// statistics were reset, but an index built a minute ago has had no time
// to be read: the index's own age, in transactions since its catalog row
// was written (CREATE INDEX or REINDEX), says how long its counter has
// counted. The table must be written, or the index costs nothing.
const (
	unusedMinAge    = 5000
	unusedMinWrites = 10000
)

// unusedIndex finds indexes no statement has scanned since the statistics
// were reset, old enough in transactions for that to mean something, on
// tables that are written: every insert (and every update that is not
// HOT) writes them, and nothing reads them. Indexes that enforce a
// constraint, invalid ones and those another index covers are the other
// rules' (or no one's) business.
func unusedIndex(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	nonHOT := map[*model.Table]*model.Finding{}
	for _, ix := range s.Indexes {
		t := unusedOn(s, ix)
		if t == nil {
			continue
		}
		// The updates it keeps from being HOT: table-bloat's finding
		// names it and measures it (one index, one finding).
		if _, ok := nonHOT[t]; !ok {
			nonHOT[t] = nonHOTFinding(s, t) // once per table: it reads every statement
		}
		if f := nonHOT[t]; f != nil && slices.Contains(f.Experiment.Indexes, ix.Name) {
			continue
		}
		name := sqlparse.QuoteQualified(ix.Schema, ix.Name)
		since := "since statistics began (this database has never had them reset)"
		if r := s.DatabaseStats.StatsReset; r != nil {
			since = fmt.Sprintf("since the statistics were reset %s ago", heldText(s.CollectedAt.Sub(*r)))
		}
		f := model.Finding{Rule: UnusedIndexID, Severity: model.Warning,
			Title: fmt.Sprintf("index %s on %s.%s (%s) was never scanned %s, while the table wrote %s rows", ix.Name, ix.Schema, ix.Table,
				indexKey(ix), since, printable.Count(float64(tableWrites(t)))),
			Object: model.Object{Kind: "index", Name: ix.Schema + "." + ix.Name, Database: s.Database},
			Evidence: []model.Evidence{ev("scans of the index", 0, ""),
				ev("transactions since it was built (age of its catalog row)", float64(ix.AgeXacts), ""),
				ev("rows the table wrote (inserted, updated not HOT, deleted)", float64(tableWrites(t)), "")},
			Impact: model.Impact{Summary: "every insert, and every update that is not HOT, writes it (and its WAL, which replicas and backups carry); no query reads it. Scans on standbys are counted on the standbys, not here"},
			Fix: model.Fix{Summary: fmt.Sprintf("drop it without blocking writes, after checking that no standby reads it (pg_stat_user_indexes there) and that no rare job (a month-end report) needs it; keep its definition to build it again: %s", orUnknown(ix.Def)),
				SQL: fmt.Sprintf("DROP INDEX CONCURRENTLY %s;", name)},
			Verification: model.NotRunBecause("read from the statistics (pg_stat_user_indexes); check --twin measures what it costs the writes: rows inserted into a copy of the table with and without it"),
			Docs:         docsPath(UnusedIndexID),
			Experiment:   &model.Experiment{Kind: model.ExpIndexWrites, Table: model.RelRef{Schema: ix.Schema, Name: ix.Table}, Indexes: []string{ix.Name}},
		}
		if ix.Def == "" {
			f.Fix.Summary = "drop it without blocking writes, after checking that no standby reads it (pg_stat_user_indexes there) and that no rare job (a month-end report) needs it; keep its definition (pg_get_indexdef) to build it again"
		}
		if ix.Bytes > 0 {
			f.Evidence = append(f.Evidence, ev("index size", float64(ix.Bytes)/(1<<20), "MB"))
		}
		// The checks of a parent's delete or key change look for child
		// rows through this index; they are scans, so none happened yet,
		// but one delete of a parent without it reads the whole table.
		if ix.ForeignKey {
			f.Severity = model.Info
			f.Impact.Summary += "; its first column is a foreign key's: a parent row's delete or key change would read the whole table without it"
		}
		out = append(out, f)
	}
	Sort(out)
	return out, nil
}

// unusedOn is the written table an index nobody scans slows down, or nil
// when the index is read, enforces a constraint, is invalid or covered
// (the other rules'), is too young for its zero to mean anything, or its
// table is barely written.
func unusedOn(s *model.Snapshot, ix model.Index) *model.Table {
	if ix.Scans > 0 || enforces(ix) || !ix.Valid || coveredBy(s, ix) != nil || (ix.AgeXacts >= 0 && ix.AgeXacts < unusedMinAge) {
		return nil
	}
	t := s.Table(model.RelRef{Schema: ix.Schema, Name: ix.Table})
	if t == nil || tableWrites(t) < unusedMinWrites {
		return nil
	}
	return t
}
