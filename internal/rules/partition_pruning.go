package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// PartitionPruningID is the stable id of the rule.
const PartitionPruningID = "partition-pruning"

// Thresholds (see docs/rules/partition-pruning.md).
const (
	pruningMinCalls      = 2
	pruningMinPartitions = 4
	pruningWarnShare     = 0.05
	pruningWarnMeanMS    = 100.0
)

// partitionPruning finds statements on a partitioned table whose
// predicate on the partition key hides the key (inside a function or a
// cast, or compared with a volatile function's value): PostgreSQL prunes
// partitions only with comparisons of the key itself, so each call scans
// every partition. The fix is the predicate written as a range on the
// key, which the experiment runs beside the statement as written.
func partitionPruning(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	skipped := hiddenStatements(s, PartitionPruningID, "whether they scan every partition is unknown")
	dbTotal := totalExecMS(s)
	for _, st := range s.Statements {
		if st.Parsed == nil || st.Calls < pruningMinCalls {
			continue
		}
		for _, r := range st.Parsed.Relations() {
			t := s.Table(model.RelRef{Schema: r.Schema, Name: r.Name})
			if t == nil || !t.Partitioned || len(t.PartitionKey) == 0 || t.Partitions < pruningMinPartitions {
				continue
			}
			key := t.PartitionKey[0]
			hidden := st.Parsed.HiddenKeys(key)
			if len(hidden) == 0 {
				continue
			}
			out = append(out, pruningFinding(s, st, t, key, hidden, dbTotal))
			break
		}
	}
	return out, skipped
}

func pruningFinding(s *model.Snapshot, st model.Statement, t *model.Table, key string, hidden []sqlparse.HiddenKey, dbTotal float64) model.Finding {
	share := timeShare(st, dbTotal)
	sev := model.Info
	if share >= pruningWarnShare || st.MeanExecMS() >= pruningWarnMeanMS {
		sev = model.Warning
	}
	var preds []string
	for _, h := range hidden {
		preds = append(preds, h.Predicate)
	}
	f := model.Finding{
		Rule:     PartitionPruningID,
		Severity: sev,
		Title:    fmt.Sprintf("every call reads all %d partitions of %s: %s", t.Partitions, t.Name, hidden[0].Why),
		Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 120), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: []model.Evidence{
			{Label: fmt.Sprintf("partitions of %s (partitioned on %s)", t.Name, strings.Join(t.PartitionKey, ", ")), Value: float64(t.Partitions)},
			{Label: "the predicate on the key: " + strings.Join(preds, "; "), Value: float64(len(preds)), Fact: true},
			{Label: "calls", Value: float64(st.Calls)},
			{Label: "mean execution", Value: model.Round(st.MeanExecMS(), 2), Unit: "ms"},
		},
		Impact: model.Impact{
			Summary: fmt.Sprintf("%s of this database's statement time; the partitions the predicate does not need are scanned on every call", pct(share)),
			Share:   model.Round(share, 4),
		},
		Verification: model.NotRunBecause("not verified yet"),
		Docs:         docsPath(PartitionPruningID),
	}
	fixed, n, err := st.Parsed.PruneOnKey(key)
	if err != nil || n == 0 {
		f.Fix = model.Fix{Summary: fmt.Sprintf("compare %s itself with a value (a range: %s >= start AND %s < end) instead of an expression of it, so the planner can leave out the partitions outside the range", key, key, key)}
		f.Verification = model.NotRunBecause("pgmedic has no rewrite for this predicate, so there is nothing to measure it against")
		return f
	}
	f.Fix = model.Fix{
		Summary: fmt.Sprintf("write the predicate as a range on %s itself, which partition pruning can use (the same rows for the values the expression compares)", key),
		SQL:     fixed.Text(),
	}
	f.Experiment = &model.Experiment{Kind: model.ExpPartitionPruning, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role,
		Calls: st.Calls, Rows: st.Rows, MeanMS: st.MeanExecMS(), Table: model.RelRef{Schema: t.Schema, Name: t.Name},
		Rewrite: fixed.Text(), AppSettings: roleSettingsFor(s, st.Role, "jit", "work_mem", "search_path", "TimeZone")}
	return f
}
