package rules

import (
	"fmt"
	"math"
	"regexp"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
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

// LogMisestimate is an executed plan's scan whose row estimate was far
// off, with what the log says about the table's autoanalyze runs.
type LogMisestimate struct {
	Table       string // the scanned relation, as the plan names it
	Node        string
	Factor      float64 // estimate off by this factor, either way
	Estimated   float64
	Actual      float64
	Fingerprint string
	Query       string
	// Analyzes is the autoanalyze runs of the table the log shows, and
	// LogHours the span the log covers.
	Analyzes int64
	LogHours float64
	// Unlogged says the log holds no autovacuum or autoanalyze run of any
	// table (log_autovacuum_min_duration is -1, or above every run): that
	// the table's Analyzes is 0 then says nothing.
	Unlogged bool
	// Generic says the scan's conditions hold parameters ($1): a
	// prepared statement's generic plan, estimated without the values.
	Generic bool
}

// paramRef finds a parameter symbol in a plan's condition: a generic
// plan prints $1 where a custom plan prints the value.
var paramRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\d+\b`) })

// ScanMisestimates are the scans of a plan whose row estimate was off by
// misestimateFactor or more (at least misestimateMinRows on the larger
// side), leaving out filters with a cast on the column (implicit-cast's)
// and scans a Limit stopped early.
func ScanMisestimates(e *plan.Explain) []LogMisestimate {
	var out []LogMisestimate
	all, parent := nodes(e)
	for _, n := range all {
		fig := n.Figures
		if n.RelationName == "" || fig.Misestimate < misestimateFactor || math.Max(n.PlanRows, n.ActualRows) < misestimateMinRows {
			continue
		}
		if len(findCasts(n.Filter, "")) > 0 || (!fig.Under && stoppedEarly(n, parent)) {
			continue
		}
		table := n.RelationName
		if n.Schema != "" {
			table = n.Schema + "." + table
		}
		generic := false
		for _, cond := range []string{n.Filter, n.IndexCond, n.RecheckCond} {
			generic = generic || paramRef().MatchString(cond)
		}
		out = append(out, LogMisestimate{Table: table, Node: fmt.Sprintf("node #%d %s", fig.ID, n.Label()), Factor: fig.Misestimate,
			Estimated: n.PlanRows * math.Max(n.ActualLoops, 1), Actual: fig.TotalRows, Generic: generic})
	}
	return out
}

// staleStatisticsLog is stale-statistics from the log: a scan in an
// executed plan estimated far off, of a table autoanalyze did not analyze
// while the log ran. (A misestimate with fresh statistics is the plan
// rule misestimate's to explain: correlated columns, functions.) A scan
// whose condition holds a parameter is a generic plan's: the planner
// estimated it without the value, from an average over the column, so on
// skewed data it is far off for the common values however fresh the
// statistics are, and ANALYZE changes nothing.
func staleStatisticsLog(in LogInput) []model.Finding {
	var out []model.Finding
	seen := map[string]bool{}
	for _, m := range in.Misestimates {
		if m.Analyzes > 0 || m.Generic || m.Factor < misestimateFactor || seen[m.Table] {
			continue
		}
		seen[m.Table] = true
		sev, title := model.Warning, fmt.Sprintf("%s estimated %s rows and read %s (%.0fx off), and autoanalyze did not analyze %s in the %s the log covers",
			m.Node, count(m.Estimated), count(m.Actual), m.Factor, m.Table, span(m.LogHours))
		if m.Unlogged {
			sev, title = model.Info, fmt.Sprintf("%s estimated %s rows and read %s (%.0fx off); the log records no autoanalyze run of any table (log_autovacuum_min_duration), so whether %s's statistics are stale is not known",
				m.Node, count(m.Estimated), count(m.Actual), m.Factor, m.Table)
		}
		out = append(out, model.Finding{Rule: StaleStatisticsID, Severity: sev,
			Title:  title,
			Object: model.Object{Kind: "statement (log)", Name: printable.Shorten(m.Query, 80), QueryID: m.Fingerprint, Fingerprint: m.Fingerprint},
			Evidence: []model.Evidence{ev("rows estimated", m.Estimated, "rows"), ev("rows read", m.Actual, "rows"), ev("estimate off by", m.Factor, "x"),
				ev2("autoanalyze runs of the table in the log", m.Analyzes)},
			Impact: model.Impact{Summary: "plans are chosen from the statistics: a row count off by this much picks the wrong join and scan methods"},
			Fix: model.Fix{Summary: "analyze the table now, and if it changes fast lower its autovacuum_analyze_scale_factor so autoanalyze keeps up (or ANALYZE after bulk loads)",
				SQL: fmt.Sprintf("ANALYZE %s;", m.Table)},
			Verification: model.NotRunBecause("read from the executed plan and the log; check --dsn re-plans the statement after ANALYZE in the lab"),
			Docs:         docsPath(StaleStatisticsID)})
	}
	return out
}

// span says a log's length in hours, or minutes under one.
func span(hours float64) string {
	if hours < 1 {
		return fmt.Sprintf("%.0f minutes", math.Max(1, hours*60))
	}
	return fmt.Sprintf("%.1f hours", hours)
}
