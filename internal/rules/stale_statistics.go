package rules

import (
	"fmt"
	"math"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// StaleStatisticsID is the rule id.
const StaleStatisticsID = "stale-statistics"

const (
	staleMinMods = 10000
	staleRatio   = 1.0 // rows modified since ANALYZE per row counted at ANALYZE
)

// autoanalyzeDelay is how long autovacuum may take to get to a table that
// crossed its analyze threshold: autovacuum_naptime, plus a minute for the
// run that analyzes it.
func autoanalyzeDelay(s *model.Snapshot) time.Duration {
	naptime := s.Settings["autovacuum_naptime"].Float() // seconds
	if naptime <= 0 {
		naptime = 60
	}
	return time.Duration(naptime+60) * time.Second
}

// staleStatistics finds tables that changed more since their last ANALYZE
// than they held at it. The planner's row estimates come from pg_stats and
// pg_class.reltuples as of that ANALYZE: a queue whose rows all turned from
// "done" to "pending" since then is estimated as empty, and plans chosen on
// that estimate (nested loops, no parallelism) collapse.
func staleStatistics(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	for i := range s.Tables {
		t := &s.Tables[i]
		if t.Partitioned || t.ModSinceAnalyze < staleMinMods {
			continue
		}
		base := math.Max(t.Reltuples, 0)
		if t.LastAnalyze != nil && float64(t.ModSinceAnalyze) < staleRatio*math.Max(base, 1) {
			continue
		}
		trigger := s.Settings["autovacuum_analyze_threshold"].Float() + s.Settings["autovacuum_analyze_scale_factor"].Float()*base
		why := fmt.Sprintf("autovacuum's analyze trigger is about %s changes; it has not caught up", count(trigger))
		qt := sqlparse.QuoteIdent(t.Schema) + "." + sqlparse.QuoteIdent(t.Name)
		sql := fmt.Sprintf("ANALYZE %s;", qt)
		if !t.AutovacuumEnabled {
			why = "autovacuum (which also analyzes) is switched off for this table"
			sql += fmt.Sprintf("\nALTER TABLE %s RESET (autovacuum_enabled);", qt)
		} else {
			sql += fmt.Sprintf("\n-- fast-changing table: analyze after fewer changes\nALTER TABLE %s SET (autovacuum_analyze_scale_factor = 0.02);", qt)
		}
		// Autovacuum wakes every autovacuum_naptime and then needs a run
		// to get to the table: changes younger than that are its ordinary
		// lag, not a problem. A table never analysed since the statistics
		// were reset (typically created and filled a moment ago) is in the
		// same position. Only a measured misestimate (verify raises the
		// severity) or autovacuum being off makes either a warning.
		severity := model.Warning
		lag := autoanalyzeDelay(s)
		switch {
		case !t.AutovacuumEnabled:
		case t.LastAnalyze == nil:
			severity = model.Info
			why = "the table has not been analysed since statistics were reset (new, or just filled); autovacuum analyzes it within about " + lag.String()
		case s.CollectedAt.Sub(*t.LastAnalyze) < lag:
			severity = model.Info
			why = fmt.Sprintf("the last ANALYZE was %s ago, within autovacuum's ordinary lag (naptime plus a run, about %s)", s.CollectedAt.Sub(*t.LastAnalyze).Round(time.Second), lag)
		}
		ev := []model.Evidence{
			{Label: "rows modified since the last ANALYZE", Value: float64(t.ModSinceAnalyze)},
			{Label: "rows at the last ANALYZE (reltuples)", Value: math.Round(base)},
			{Label: "live rows now", Value: float64(t.Live)},
		}
		if t.LastAnalyze != nil {
			ev = append(ev, model.Evidence{Label: "hours since the last ANALYZE", Value: model.Round(s.CollectedAt.Sub(*t.LastAnalyze).Hours(), 2)})
		}
		f := model.Finding{
			Rule:         StaleStatisticsID,
			Severity:     severity,
			Title:        fmt.Sprintf("statistics of %s are stale: %s rows changed since its last ANALYZE, which counted %s; %s", t.Schema+"."+t.Name, count(float64(t.ModSinceAnalyze)), count(base), why),
			Object:       model.Object{Kind: "table", Name: t.Schema + "." + t.Name, Database: s.Database},
			Evidence:     ev,
			Impact:       model.Impact{Summary: "row estimates for this table come from data that is gone: plans are chosen for the wrong row counts"},
			Fix:          model.Fix{Summary: "analyze the table now and make autovacuum analyze it as often as it changes", SQL: sql},
			Verification: model.NotRunBecause("no SELECT on this table among the statements pgmedic sees, so no misestimate could be measured"),
			Docs:         docsPath(StaleStatisticsID),
		}
		if st := topReader(s, t); st != nil {
			f.Experiment = &model.Experiment{Kind: model.ExpMisestimate, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role, Calls: st.Calls, Rows: st.Rows,
				Table: model.RelRef{Schema: t.Schema, Name: t.Name}}
			f.Object.QueryID = fmt.Sprint(st.QueryID)
		}
		out = append(out, f)
	}
	return out, nil
}

// topReader is the SELECT with the most time that reads table t: the one
// whose estimate is measured (statements come most expensive first).
func topReader(s *model.Snapshot, t *model.Table) *model.Statement {
	for i, st := range s.Statements {
		sh := s.Shapes[st.QueryID]
		if sh == nil || sh.Command != "SELECT" {
			continue
		}
		for _, r := range sh.Relations {
			if s.Table(r) == t {
				return &s.Statements[i]
			}
		}
	}
	return nil
}
