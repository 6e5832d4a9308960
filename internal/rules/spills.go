package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Thresholds of the spill rules on observed statements (see
// docs/rules/sort-spill.md).
const (
	// One megabyte of temporary file per call: below it a spill is a
	// handful of pages, cheaper than the memory that would avoid it.
	spillMinBlocksPerCall = 128
	spillMinCalls         = 2
	// A spilling statement is a warning when it is this share of the
	// database's statement time, or when its temporary files add up to
	// spillWarnTotalBlocks (1 GB) whatever its time: that much temp I/O is
	// the disk's, shared with every other query.
	spillWarnShare       = 0.05
	spillWarnTotalBlocks = 131072
)

func spillStatements(s *model.Snapshot, rule string) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	skipped := hiddenStatements(s, rule, "whether they spill to disk is unknown")
	dbTotal := totalExecMS(s)
	for _, st := range s.Statements {
		if st.Calls < spillMinCalls || st.TempBlksWritten < spillMinBlocksPerCall*st.Calls {
			continue
		}
		kind := spillKind(s.Plans[st.QueryID], st.Parsed)
		if kind != rule {
			continue
		}
		out = append(out, spillFinding(s, st, kind, dbTotal))
	}
	return out, skipped
}

// spillKind says which rule a spilling statement belongs to: its plan's
// sorts or hashes, or, without a plan, whether the statement sorts or
// joins. A statement whose temporary files come from neither (a function
// scan's or a CTE's rows kept in a tuplestore, a materialisation) is
// neither rule's: "".
func spillKind(e *plan.Explain, st *sqlparse.Statement) string {
	if e == nil {
		switch {
		case st == nil:
			return ""
		case st.SortKeys() > 0:
			return SortSpillID
		case len(st.Relations()) > 1:
			return HashBatchesID
		}
		return ""
	}
	var sorts, hashes int
	e.Plan.Walk(func(n, _ *plan.Node) {
		switch {
		case strings.HasSuffix(n.NodeType, "Sort"):
			sorts++
		case n.NodeType == "Hash", n.Strategy == "Hashed", n.Strategy == "Mixed":
			hashes++
		}
	})
	switch {
	case sorts > 0:
		return SortSpillID
	case hashes > 0:
		return HashBatchesID
	}
	return ""
}

// spillFinding is one spilling statement, with the work_mem that would
// hold what it wrote and the experiment that re-runs it at that size.
func spillFinding(s *model.Snapshot, st model.Statement, rule string, dbTotal float64) model.Finding {
	calls := float64(st.Calls)
	perCallKB := float64(st.TempBlksWritten) * 8 / calls
	// An in-memory sort needs more than the rows' size on disk (tuple
	// headers, the array of pointers): three times. A hash gets work_mem
	// times hash_mem_multiplier (2 since PostgreSQL 15), so half as much.
	need := 3 * perCallKB
	if rule == HashBatchesID {
		need = 1.5 * perCallKB
	}
	proposed := workMemFor(need)
	current, source := effective(s, st.Role, "work_mem")
	share := timeShare(st, dbTotal)
	sev := model.Info
	if share >= spillWarnShare || st.TempBlksWritten >= spillWarnTotalBlocks {
		sev = model.Warning
	}
	what := "sorts"
	if rule == HashBatchesID {
		what = "hashes"
	}
	cost := model.WorkMemCost(s.Activity, proposed)
	role := st.Role
	if role == "" {
		role = "<role " + strconv.FormatUint(uint64(st.UserID), 10) + ">"
	}
	return model.Finding{
		Rule:     rule,
		Severity: sev,
		Title:    fmt.Sprintf("writes %s of temporary files per call: it %s past work_mem (%s)", printable.KB(perCallKB), what, model.MemoryText(model.MemoryKB(current))),
		Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 120), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: []model.Evidence{
			{Label: "temporary files written per call", Value: model.Round(perCallKB, 0), Unit: "kB"},
			{Label: "temporary files written in all", Value: model.Round(float64(st.TempBlksWritten)*8/1024, 1), Unit: "MB"},
			{Label: "calls", Value: calls},
			{Label: "mean execution", Value: model.Round(st.MeanExecMS(), 2), Unit: "ms"},
			{Label: fmt.Sprintf("work_mem for role %s (%s)", role, orDefaultSetting(source)), Value: model.MemoryKB(current), Unit: "kB", Fact: true},
		},
		Impact: model.Impact{
			Summary: fmt.Sprintf("%s of this database's statement time; %s of temporary files in all, written and read back through the disk every other query shares. %s",
				pct(share), printable.KB(float64(st.TempBlksWritten)*8), cost),
			Share: model.Round(share, 4),
		},
		Fix: model.Fix{
			Summary: fmt.Sprintf("give this statement work_mem = %s where it runs (SET LOCAL in its transaction, or for the role that runs it), not for the whole server; or change the statement so it %s fewer rows", proposed, map[bool]string{true: "hashes", false: "sorts"}[rule == HashBatchesID]),
			SQL: fmt.Sprintf("-- in the statement's transaction:\nSET LOCAL work_mem = '%s';\n-- or for the role that runs it:\nALTER ROLE %s IN DATABASE %s SET work_mem = '%s';",
				proposed, sqlparse.QuoteIdent(st.Role), sqlparse.QuoteIdent(s.Database), proposed),
		},
		Verification: model.NotRunBecause("not verified yet"),
		Docs:         docsPath(rule),
		Experiment: &model.Experiment{Kind: model.ExpWorkMem, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role,
			Calls: st.Calls, Rows: st.Rows, MeanMS: st.MeanExecMS(),
			AppSettings: roleSettingsFor(s, st.Role, "work_mem", "hash_mem_multiplier", "search_path"),
			FixSettings: map[string]string{"work_mem": proposed}},
	}
}

// orDefaultSetting shows a setting pg_settings did not give ("" for a role
// that may not read it) as unknown rather than blank.
func orDefaultSetting(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}
