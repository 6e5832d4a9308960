package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Rule ids of the indexes nobody reads: never scanned, covered by
// another, or left invalid by a failed build.
const (
	UnusedIndexID    = "unused-index"
	DuplicateIndexID = "duplicate-index"
	InvalidIndexID   = "invalid-index"
)

// Thresholds of unused-index. pg_stat_user_indexes counts scans since the
// statistics were reset, but an index built a minute ago has had no time
// to be read: the index's own age, in transactions since its catalog row
// was written (CREATE INDEX or REINDEX), says how long its counter has
// counted. The table must be written, or the index costs nothing.
const (
	unusedMinAge    = 5000
	unusedMinWrites = 10000
)

// enforces says whether an index enforces a constraint (a primary key, a
// unique key): dropping it changes what the table accepts, whatever reads
// it.
func enforces(ix model.Index) bool { return ix.Primary || ix.Unique }

// tableWrites is the rows a table wrote since the statistics were reset:
// each insert, update and delete, every one of which wrote each of its
// indexes (an update that stays on the page, HOT, writes none).
func tableWrites(t *model.Table) int64 {
	return t.Inserted + (t.Updated - t.HOTUpdated) + t.Deleted
}

// coveredBy is the index of the same table that covers ix: a valid
// B-tree with the same predicate whose key ix's key columns lead, in
// order and direction (of two with the same columns, the one whose name
// sorts first is the covered one, unless the other enforces a
// constraint). Nil when none does, or when ix enforces one itself.
func coveredBy(s *model.Snapshot, ix model.Index) *model.Index {
	if ix.Method != "btree" || enforces(ix) || !ix.Valid || len(ix.Columns) == 0 || slices.Contains(ix.Columns, "") || len(ix.Include) > 0 {
		return nil
	}
	// The table's own indexes: a database of a million relations has
	// hundreds of thousands of indexes, and each is asked about.
	same := s.TableIndexes(&model.Table{Schema: ix.Schema, Name: ix.Table})
	for i, b := range same {
		if b.Name == ix.Name || b.Method != "btree" || !b.Valid || b.Predicate != ix.Predicate ||
			!leads(ix, b) || (len(b.Columns) == len(ix.Columns) && b.Name < ix.Name && !enforces(b)) {
			continue
		}
		return &same[i]
	}
	return nil
}

// duplicateIndex finds B-tree indexes whose key columns lead another
// B-tree index of the same table, with the same predicate: every read the
// shorter one serves, the longer serves too, and every write pays both.
// An index that enforces a constraint is never the one to drop.
func duplicateIndex(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	for _, a := range s.Indexes {
		b := coveredBy(s, a)
		if b == nil {
			continue
		}
		t := s.Table(model.RelRef{Schema: a.Schema, Name: a.Table})
		writes := int64(0)
		if t != nil {
			writes = tableWrites(t)
		}
		covered := "the same columns"
		if len(b.Columns) > len(a.Columns) {
			covered = "its columns as a prefix (" + strings.Join(b.Columns, ", ") + ")"
		}
		f := model.Finding{Rule: DuplicateIndexID, Severity: model.Warning,
			Title:  fmt.Sprintf("index %s on %s.%s (%s) is covered by %s, which has %s", a.Name, a.Schema, a.Table, strings.Join(a.Columns, ", "), b.Name, covered),
			Object: model.Object{Kind: "index", Name: a.Schema + "." + a.Name, Database: s.Database},
			Evidence: []model.Evidence{ev("scans of the covered index", float64(a.Scans), ""), ev("scans of the covering index", float64(b.Scans), ""),
				ev("size of the covered index", float64(a.Bytes)/(1<<20), "MB"), ev("rows the table wrote (inserted, updated not HOT, deleted)", float64(writes), "")},
			Impact: model.Impact{Summary: fmt.Sprintf("every read %s serves, %s serves too (a B-tree reads a prefix of its key as well as the whole); every write pays for both", a.Name, b.Name)},
			Fix: model.Fix{Summary: fmt.Sprintf("drop %s without blocking writes; the planner uses %s for the same conditions (a wider key is a little larger to read, rarely measurable)", a.Name, b.Name),
				SQL: fmt.Sprintf("DROP INDEX CONCURRENTLY %s;", sqlparse.QuoteQualified(a.Schema, a.Name))},
			Verification: model.NotRunBecause("read from the catalog (pg_index); check --twin measures what it costs the writes: rows inserted into a copy of the table with and without it"),
			Docs:         docsPath(DuplicateIndexID),
		}
		if writes > 0 {
			f.Experiment = &model.Experiment{Kind: model.ExpIndexWrites, Table: model.RelRef{Schema: a.Schema, Name: a.Table}, Indexes: []string{a.Name}}
		}
		out = append(out, f)
	}
	Sort(out)
	return out, nil
}

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

// indexKey writes an index's key columns ("expression" for one that is).
func indexKey(ix model.Index) string {
	cols := make([]string, len(ix.Columns))
	for i, c := range ix.Columns {
		cols[i] = c
		if c == "" {
			cols[i] = "expression"
		}
	}
	return strings.Join(cols, ", ")
}

// leads says whether a's key columns, in order and direction, begin b's.
func leads(a, b model.Index) bool {
	if len(a.Columns) > len(b.Columns) {
		return false
	}
	for i, c := range a.Columns {
		if b.Columns[i] != c || desc(a, i) != desc(b, i) || keyClass(a, i) != keyClass(b, i) {
			return false
		}
	}
	return true
}

// keyClass is a key column's operator class and collation ("" when not
// collected): a text_pattern_ops index does not order by the column's
// collation, so it covers no index that does.
func keyClass(ix model.Index, i int) string {
	if i < len(ix.KeyClasses) {
		return ix.KeyClasses[i]
	}
	return ""
}

func desc(ix model.Index, i int) bool { return i < len(ix.Desc) && ix.Desc[i] }

// invalidIndex finds indexes marked invalid: what CREATE INDEX
// CONCURRENTLY or REINDEX CONCURRENTLY leaves when it fails (a duplicate
// key for a unique index, a cancel, a deadlock). The planner never uses
// one, but writes still maintain it.
func invalidIndex(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	for _, ix := range s.Indexes {
		if ix.Valid {
			continue
		}
		name := sqlparse.QuoteQualified(ix.Schema, ix.Name)
		f := model.Finding{Rule: InvalidIndexID, Severity: model.Warning,
			Title:    fmt.Sprintf("index %s on %s.%s is invalid: a CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY that failed left it; no query uses it, every write still maintains it", ix.Name, ix.Schema, ix.Table),
			Object:   model.Object{Kind: "index", Name: ix.Schema + "." + ix.Name, Database: s.Database},
			Evidence: []model.Evidence{ev("pg_index.indisvalid = false", 1, ""), ev("pg_index.indisready (writes maintain it)", b2f(ix.Ready), ""), ev("scans of the index", float64(ix.Scans), "")},
			Impact:   model.Impact{Summary: "the planner never chooses an invalid index, so whatever it was built for still reads the table without it, while inserts and updates keep writing it"},
			Fix: model.Fix{Summary: "drop it and build it again concurrently, once what made the build fail is fixed (for a unique index: the duplicate keys); REINDEX INDEX CONCURRENTLY rebuilds it in one step",
				SQL: fmt.Sprintf("DROP INDEX CONCURRENTLY %s;\n-- then, once the cause is fixed, CREATE INDEX CONCURRENTLY with its definition (pg_get_indexdef), or in one step:\n-- REINDEX INDEX CONCURRENTLY %s;", name, name)},
			Verification: model.NotRunBecause("a fact of the catalog (pg_index.indisvalid, indisready): decisive without an experiment"),
			Docs:         docsPath(InvalidIndexID),
		}
		if ix.Unique && ix.Ready {
			// An invalid unique index that is ready is still checked on
			// every insert: new duplicates are refused, old ones stay.
			f.Impact.Summary += "; being unique and ready, it still refuses new duplicate keys, while the duplicates that failed its build stay"
		}
		if !ix.Ready {
			// A concurrent build sets indisready once the index is
			// built: one that failed before (a unique build meeting
			// duplicate keys, the commonest failure) is written by no
			// statement. It costs its disk and the index that was meant
			// to be there, nothing on each write.
			f.Severity = model.Info
			f.Title = fmt.Sprintf("index %s on %s.%s is invalid and was never ready: a CREATE INDEX CONCURRENTLY failed while building it (for a unique index: duplicate keys); no query uses it and no write maintains it", ix.Name, ix.Schema, ix.Table)
			f.Impact.Summary = "the index the build was for does not exist: whatever it was meant to serve still reads the table without it, and the leftover costs only its disk"
			f.Verification = model.NotRunBecause("a fact of the catalog (pg_index.indisvalid and indisready both false): no write maintains it, so there is no write cost to measure")
		}
		// A failed build's index has no relpages until VACUUM or ANALYZE
		// counts it: a size of 0 would be a figure nobody measured.
		if ix.Bytes > 0 {
			f.Evidence = append(f.Evidence, ev("index size", float64(ix.Bytes)/(1<<20), "MB"))
		}
		if t := s.Table(model.RelRef{Schema: ix.Schema, Name: ix.Table}); t != nil && tableWrites(t) > 0 && ix.Ready {
			f.Experiment = &model.Experiment{Kind: model.ExpIndexWrites, Table: model.RelRef{Schema: ix.Schema, Name: ix.Table}, Indexes: []string{ix.Name}}
		}
		out = append(out, f)
	}
	Sort(out)
	return out, nil
}

// b2f is a catalog flag as an evidence value: 1 true, 0 false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
