package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ExtendedStatisticsID is the stable id of the rule.
const ExtendedStatisticsID = "extended-statistics"

// Thresholds (see docs/rules/extended-statistics.md).
const (
	extMinCalls  = 2
	extMinMeanMS = 1.0
	// A nested loop over this few rows expected from the table is one
	// a larger count would not have chosen.
	extMaxPlannedRows = 10.0
	extMaxColumns     = 8 // CREATE STATISTICS takes at most 8 columns
)

// extendedStatistics finds statements that compare two or more columns of
// one table with values (a = $1 AND b = $2) in a plan whose cost hangs on
// how many rows that gives: the planner multiplies the columns'
// selectivities as if they were independent. When the columns are
// correlated (a zip code and its city, a carrier and its depots), common
// combinations bring far more rows than it expects (a nested loop runs
// for each) and absent ones none at all (a LIMIT over an index in the
// wrong order reads to the end). The
// rule only proposes: the experiment on a copy, with and without CREATE
// STATISTICS, says whether the estimate was wrong and whether it matters
// (the finding is info until it is measured).
func extendedStatistics(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	skipped := hiddenStatements(s, ExtendedStatisticsID, "whether they filter on correlated columns is unknown")
	dbTotal := totalExecMS(s)
	for _, st := range s.Statements {
		if st.Parsed == nil || st.Calls < extMinCalls || st.MeanExecMS() < extMinMeanMS {
			continue
		}
		t, cols := correlatedCandidates(s, st.Parsed)
		if t == nil {
			continue
		}
		e := s.Plans[st.QueryID]
		planned, bites := misestimateBites(e, t.Name)
		if e != nil && !bites {
			continue
		}
		out = append(out, extStatsFinding(s, st, t, cols, planned, e != nil, dbTotal))
	}
	return out, skipped
}

// correlatedCandidates is the first table the statement compares with
// values on two or more of its columns that no statistics object of the
// table covers. A join condition (the table's key against another's, a
// NOT EXISTS linking its subquery to the row) filters by no value and is
// not counted. CREATE STATISTICS takes at most eight columns: of more,
// it takes the eight with the fewest distinct values, the categories
// whose combinations the planner multiplies wrongly (a unique key's
// estimate is right alone).
func correlatedCandidates(s *model.Snapshot, st *sqlparse.Statement) (*model.Table, []string) {
	byTable := map[string][]string{}
	var order []string
	for _, p := range st.Shape().Predicates {
		if p.Op != sqlparse.OpEq || p.Cast || p.Join || p.Rel.Name == "" {
			continue
		}
		k := p.Rel.Schema + "." + p.Rel.Name
		if !slices.Contains(byTable[k], p.Column) {
			if len(byTable[k]) == 0 {
				order = append(order, k)
			}
			byTable[k] = append(byTable[k], p.Column)
		}
	}
	for _, k := range order {
		cols := byTable[k]
		if len(cols) < 2 {
			continue
		}
		schema, name, _ := strings.Cut(k, ".")
		t := s.Table(model.RelRef{Schema: schema, Name: name})
		if t == nil || t.Live < 1000 {
			continue
		}
		ok := true
		for _, c := range cols {
			if col := s.Column(t, c); col == nil || !col.HasStats {
				ok = false
			}
		}
		if !ok || coveredByStatistics(t, cols) {
			continue
		}
		if len(cols) > extMaxColumns {
			slices.SortStableFunc(cols, func(a, b string) int {
				return cmp.Compare(distinct(s, t, a), distinct(s, t, b))
			})
			cols = cols[:extMaxColumns]
		}
		slices.Sort(cols)
		return t, cols
	}
	return nil, nil
}

// coveredByStatistics says whether a statistics object of the table
// holds every one of cols.
func coveredByStatistics(t *model.Table, cols []string) bool {
	for _, set := range t.ExtendedStats {
		have := strings.Split(set, ",")
		all := true
		for _, c := range cols {
			all = all && slices.Contains(have, c)
		}
		if all {
			return true
		}
	}
	return false
}

// misestimateBites reads the generic plan for the shapes in which a wrong
// row count for the table changes what the plan costs: a scan of it that
// a nested loop repeats for each of the few rows expected, or one under a
// LIMIT, which the planner expects to stop early (a combination of values
// that is rarer than it thinks makes it read to the end). It returns the
// fewest rows the plan expects from the table.
func misestimateBites(e *plan.Explain, table string) (rows float64, bites bool) {
	if e == nil {
		return 0, false
	}
	rows = -1
	var walk func(n *plan.Node, loop, limit bool)
	walk = func(n *plan.Node, loop, limit bool) {
		if n.RelationName == table {
			if rows < 0 || n.PlanRows < rows {
				rows = n.PlanRows
			}
			bites = bites || limit || (loop && n.PlanRows <= extMaxPlannedRows)
		}
		loop = loop || n.NodeType == "Nested Loop"
		limit = limit || n.NodeType == "Limit"
		for _, c := range n.Children() {
			walk(c, loop, limit)
		}
	}
	walk(&e.Plan, false, false)
	return max(rows, 0), bites
}

func extStatsFinding(s *model.Snapshot, st model.Statement, t *model.Table, cols []string, planned float64, hasPlan bool, dbTotal float64) model.Finding {
	share := timeShare(st, dbTotal)
	name := objectName(append([]string{t.Name}, cols...), "_stats")
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = sqlparse.QuoteIdent(c)
	}
	ev := []model.Evidence{
		{Label: "mean execution", Value: model.Round(st.MeanExecMS(), 2), Unit: "ms"},
		{Label: "calls", Value: float64(st.Calls)},
		{Label: "rows in " + t.Name, Value: float64(t.Live)},
	}
	if hasPlan {
		ev = append(ev, model.Evidence{Label: "rows the generic plan expects from " + t.Name + ", under a nested loop or a LIMIT", Value: model.Round(planned, 1)})
	}
	return model.Finding{
		Rule:     ExtendedStatisticsID,
		Severity: model.Info,
		Title:    fmt.Sprintf("%s is filtered on %s together: if they are correlated, the planner's estimate (their selectivities multiplied) is far too low", t.Name, strings.Join(cols, " and ")),
		Object: model.Object{Kind: "statement", Name: t.Schema + "." + t.Name + ": " + printable.Shorten(st.Query, 100), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: ev,
		Impact:   model.Impact{Summary: fmt.Sprintf("%s of this database's statement time", pct(share)), Share: model.Round(share, 4)},
		Fix: model.Fix{
			Summary: "tell the planner the columns go together: extended statistics, then ANALYZE (a few kB; kept up to date by autovacuum's ANALYZE)",
			SQL: fmt.Sprintf("CREATE STATISTICS %s (dependencies, ndistinct, mcv) ON %s FROM %s;\nANALYZE %s;",
				sqlparse.QuoteQualified(t.Schema, name), strings.Join(quoted, ", "), sqlparse.QuoteQualified(t.Schema, t.Name), sqlparse.QuoteQualified(t.Schema, t.Name)),
		},
		Verification: model.NotRunBecause("not verified yet"),
		Docs:         docsPath(ExtendedStatisticsID),
		Experiment: &model.Experiment{Kind: model.ExpExtendedStats, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role,
			Calls: st.Calls, Rows: st.Rows, MeanMS: st.MeanExecMS(), Table: model.RelRef{Schema: t.Schema, Name: t.Name}, StatColumns: cols},
	}
}
