package rules

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// CollationPrefixID is the stable id of the rule.
const CollationPrefixID = "collation-prefix"

// Thresholds (see docs/rules/collation-prefix.md).
const (
	prefixMinCalls = 2
	// A prefix search that reads this many blocks a call for at most
	// prefixMaxRowsShare of them in rows is a scan, not an index lookup.
	prefixMinBlocksPerCall = 100
	prefixWarnShare        = 0.05
	prefixWarnMeanMS       = 10.0
)

// patternOps are the operator classes that compare strings byte by byte
// whatever the column's collation, per type.
var patternOps = map[string]string{"text": "text_pattern_ops", "character varying": "varchar_pattern_ops", "character": "bpchar_pattern_ops"}

// collationPrefix finds LIKE 'abc%' searches on a text column whose
// collation does not compare as C does (an ICU or libc language
// collation): a B-tree of the default operator class orders by that
// collation and cannot bound a byte prefix, so the search reads the whole
// table even with an index on the column. A text_pattern_ops index (or
// one with COLLATE "C") serves it; the experiment builds it.
func collationPrefix(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	skipped := hiddenStatements(s, CollationPrefixID, "whether they search text by prefix is unknown")
	dbTotal := totalExecMS(s)
	for _, st := range s.Statements {
		if st.Parsed == nil || st.Calls < prefixMinCalls {
			continue
		}
		blocks := float64(st.SharedBlksHit+st.SharedBlksRead) / float64(st.Calls)
		if blocks < prefixMinBlocksPerCall {
			continue
		}
		for _, l := range st.Parsed.LikePrefixes() {
			t := s.Table(model.RelRef{Schema: l.Column.Schema, Name: l.Column.Table})
			if t == nil {
				continue
			}
			col := s.Column(t, l.Column.Column)
			opclass := ""
			if col != nil {
				opclass = patternOps[strings.TrimSuffix(strings.SplitN(col.Type, "(", 2)[0], " ")]
			}
			if col == nil || col.CLike || opclass == "" || servesPrefix(s.TableIndexes(t), col.Name) {
				continue
			}
			out = append(out, prefixFinding(s, st, t, col, opclass, blocks, dbTotal))
			break
		}
	}
	return out, skipped
}

// servesPrefix says whether an index of the table leads with column in a
// way LIKE 'abc%' can use.
func servesPrefix(indexes []model.Index, column string) bool {
	for _, ix := range indexes {
		if ix.Method == "btree" && ix.Valid && ix.Predicate == "" && len(ix.Columns) > 0 && ix.Columns[0] == column && len(ix.PrefixKeys) > 0 && ix.PrefixKeys[0] {
			return true
		}
	}
	return false
}

func prefixFinding(s *model.Snapshot, st model.Statement, t *model.Table, col *model.Column, opclass string, blocks, dbTotal float64) model.Finding {
	share := timeShare(st, dbTotal)
	sev := model.Info
	if share >= prefixWarnShare || st.MeanExecMS() >= prefixWarnMeanMS {
		sev = model.Warning
	}
	var plain []string
	for _, ix := range s.TableIndexes(t) {
		if len(ix.Columns) > 0 && ix.Columns[0] == col.Name {
			plain = append(plain, ix.Name)
		}
	}
	have := "no index on " + col.Name
	if len(plain) > 0 {
		have = "the index on it (" + strings.Join(plain, ", ") + ") orders by that collation and cannot bound a prefix"
	}
	p := model.IndexProposal{Name: t.Name + "_" + col.Name + "_prefix", Table: model.RelRef{Schema: t.Schema, Name: t.Name},
		Keys: []model.IndexKey{{Column: col.Name, Opclass: opclass}}}
	collation := col.Collation
	if collation == "default" {
		collation = "the database's default"
	}
	return model.Finding{
		Rule:     CollationPrefixID,
		Severity: sev,
		Title:    fmt.Sprintf("LIKE 'prefix%%' on %s.%s reads the whole table: the column's collation (%s) is not C, and %s", t.Name, col.Name, collation, have),
		Object: model.Object{Kind: "statement", Name: t.Schema + "." + t.Name + ": " + printable.Shorten(st.Query, 100), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: []model.Evidence{
			{Label: "mean execution time", Value: model.Round(st.MeanExecMS(), 2), Unit: "ms"},
			{Label: "calls", Value: float64(st.Calls)},
			{Label: "shared buffers touched per call", Value: math.Round(blocks)},
			{Label: "rows returned per call", Value: model.Round(float64(st.Rows)/float64(st.Calls), 2)},
			{Label: fmt.Sprintf("collation of %s: %s", col.Name, collation), Value: 0, Fact: true},
		},
		Impact: model.Impact{Summary: fmt.Sprintf("%s of this database's statement time", pct(share)), Share: model.Round(share, 4)},
		Fix: model.Fix{
			Summary: fmt.Sprintf("an index with %s, which compares bytes and so serves LIKE 'abc%%' in any collation (it does not serve ORDER BY %s nor <, > in the column's collation: keep the existing index for those); or compare in C: WHERE %s COLLATE \"C\" LIKE ... with an index on (%s COLLATE \"C\")", opclass, col.Name, col.Name, col.Name),
			SQL:     p.SQL(true) + ";",
		},
		Verification: model.NotRunBecause("verification was not run"),
		Docs:         docsPath(CollationPrefixID),
		Experiment: &model.Experiment{Kind: model.ExpIndex, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role, Calls: st.Calls, Rows: st.Rows,
			MeanMS: st.MeanExecMS(), BuffersPerCall: st.BuffersPerCall(), ReadShare: float64(st.SharedBlksRead) / math.Max(float64(st.SharedBlksHit+st.SharedBlksRead), 1),
			Table: p.Table, Proposal: &p},
	}
}
