package rules

import (
	"fmt"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// InvalidIndexID is the stable id of the rule.
const InvalidIndexID = "invalid-index"

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
