package rules

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// DuplicateIndexID is the stable id of the rule.
const DuplicateIndexID = "duplicate-index"

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
