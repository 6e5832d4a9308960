package rules

import (
	"fmt"
	"strconv"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// JITOverheadID is the stable id of the rule.
const JITOverheadID = "jit-overhead"

// Thresholds (see docs/rules/jit-overhead.md for where they come from).
const (
	// A statement seen fewer times than this is not a pattern.
	jitMinCalls = 5
	// JIT below this per call is noise next to network round trips.
	jitMinPerCallMS = 5.0
	// JIT time (included in execution time) at or above this share of the
	// statement's execution time is flagged ...
	jitWarnShare = 0.3
	// ... and at or above this share it is critical when the statement also
	// matters: a tenth of the database's time, or 100 ms per call.
	jitCriticalShare   = 0.5
	jitCriticalDBShare = 0.1
	jitCriticalPerCall = 100.0
	// A database whose flagged JIT is at least this share of all statement
	// time gets a setting-level warning.
	jitSettingWarnShare = 0.1
	// A workload is OLTP-like when this share of its time is in statements
	// whose mean execution is under oltpMeanMS.
	oltpShare  = 0.8
	oltpMeanMS = 100.0
)

// PostgreSQL's defaults since JIT was switched on by default in v12.
const (
	defaultJITAboveCost    = 100000
	defaultJITInlineCost   = 500000
	defaultJITOptimizeCost = 500000
)

// jitOverhead finds statements whose JIT compilation costs more than their
// execution, and databases where JIT is on with thresholds that let it fire
// on short queries (the UK coronavirus dashboard incident).
func jitOverhead(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var findings []model.Finding
	var skipped []model.Skip
	if !s.Server.JITAvailable {
		if miss, unknown := s.Missing[model.SrcJIT]; unknown {
			// pg_jit_available() could not be asked and no statement shows
			// JIT work: JIT may be off, unbuilt, or not yet costly.
			return nil, []model.Skip{{Rule: JITOverheadID, Fix: miss.Fix,
				Reason: miss.Reason + "; no statement shows JIT work, so none was judged"}}
		}
		return nil, nil // a server built without LLVM cannot pay for JIT
	}
	if skip, missing := s.Missing["pg_stat_statements"]; missing {
		skip.Rule = JITOverheadID
		skip.Reason = "statement-level check skipped: " + skip.Reason
		skipped = append(skipped, skip)
	} else if len(s.Statements) > 0 && !s.Statements[0].JIT.Available {
		skipped = append(skipped, model.Skip{Rule: JITOverheadID,
			Reason: "statement-level check skipped: this pg_stat_statements has no jit_* columns (they arrived with PostgreSQL 15)",
			Fix:    "ALTER EXTENSION pg_stat_statements UPDATE; (on PostgreSQL 15 or later)"})
	}

	dbTotal := totalExecMS(s)
	var flaggedJIT float64
	for _, st := range s.Statements {
		f, ok := jitStatement(s, st, dbTotal)
		if !ok {
			continue
		}
		flaggedJIT += st.JIT.TotalMS()
		findings = append(findings, f)
	}
	if f, ok := jitSetting(s, dbTotal, flaggedJIT, len(findings)); ok {
		findings = append(findings, f)
	}
	return findings, skipped
}

// jitStatement is the finding for one statement whose JIT time is a large
// share of its own execution time, with the jit settings its role runs
// with and the experiment that re-runs it with JIT off.
func jitStatement(s *model.Snapshot, st model.Statement, dbTotal float64) (model.Finding, bool) {
	if !st.JIT.Available || st.Calls < jitMinCalls || st.TotalExecMS <= 0 {
		return model.Finding{}, false
	}
	calls := float64(st.Calls)
	jitTotal := st.JIT.TotalMS()
	jitPerCall := jitTotal / calls
	// pg_stat_statements can record slightly more JIT time than execution
	// time (part of the JIT clock runs outside the executor's): cap at 1.
	share := min(jitTotal/st.TotalExecMS, 1)
	if jitPerCall < jitMinPerCallMS || share < jitWarnShare {
		return model.Finding{}, false
	}
	execPerCall := st.MeanExecMS()
	withoutJIT := execPerCall - jitPerCall
	if withoutJIT < 0 {
		withoutJIT = 0
	}
	dbShare := 0.0
	if dbTotal > 0 {
		dbShare = st.TotalExecMS / dbTotal
	}
	sev := model.Warning
	if share >= jitCriticalShare && (dbShare >= jitCriticalDBShare || jitPerCall >= jitCriticalPerCall) {
		sev = model.Critical
	}
	jitDBShare := 0.0
	if dbTotal > 0 {
		jitDBShare = min(jitTotal/dbTotal, 1)
	}
	evidence := []model.Evidence{
		{Label: "JIT total per call", Value: model.Round(jitPerCall, 2), Unit: "ms"},
		{Label: "execution without JIT per call", Value: model.Round(withoutJIT, 2), Unit: "ms"},
		{Label: "JIT share of this statement's execution time", Value: model.Round(share*100, 2), Unit: "%"},
		{Label: "calls", Value: calls},
		{Label: "JIT functions per call", Value: model.Round(float64(st.JIT.Functions)/calls, 2)},
	}
	if st.JIT.OptimizationCount > 0 {
		evidence = append(evidence,
			model.Evidence{Label: "calls that paid for LLVM optimisation (-O3)", Value: model.Round(float64(st.JIT.OptimizationCount)/calls*100, 2), Unit: "%"},
			model.Evidence{Label: "JIT optimisation per call", Value: model.Round(st.JIT.OptimizationMS/calls, 2), Unit: "ms"})
	}
	role := st.Role
	if role == "" {
		role = "<role " + strconv.FormatUint(uint64(st.UserID), 10) + ">"
	}
	jitValue, jitSource := effective(s, st.Role, "jit")
	evidence = append(evidence, model.Evidence{Label: fmt.Sprintf("jit for role %s is %s (%s)", role, jitValue, jitSource), Value: boolNum(jitValue), Fact: true})
	return model.Finding{
		Rule:     JITOverheadID,
		Severity: sev,
		Title:    fmt.Sprintf("JIT compilation costs %s the query's own execution", ratioText(jitPerCall, withoutJIT)),
		Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 120), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: evidence,
		Impact: model.Impact{
			Summary: fmt.Sprintf("JIT in this statement is %s of this database's statement time; each call waits %.0f ms for compilation", pct(jitDBShare), jitPerCall),
			Share:   model.Round(jitDBShare, 4),
		},
		Fix: model.Fix{
			Summary: fmt.Sprintf("turn JIT off for role %s in database %s (JIT only pays off for long analytic queries); or raise jit_above_cost above this statement's plan cost", role, s.Database),
			SQL:     fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET jit = off;", sqlparse.QuoteIdent(st.Role), sqlparse.QuoteIdent(s.Database)),
		},
		Verification: model.NotRunBecause("not verified yet"),
		Docs:         docsPath(JITOverheadID),
		Experiment: &model.Experiment{Kind: model.ExpJITToggle, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role, Calls: st.Calls, Rows: st.Rows,
			AppSettings: roleSettingsFor(s, st.Role, "jit", "jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost", "search_path")},
	}, true
}

// jitSetting judges the database's JIT configuration as a whole.
func jitSetting(s *model.Snapshot, dbTotal, flaggedJIT float64, flagged int) (model.Finding, bool) {
	jit, source := effective(s, "", "jit")
	if boolNum(jit) == 0 {
		return model.Finding{}, false
	}
	above, _ := effective(s, "", "jit_above_cost")
	inline, _ := effective(s, "", "jit_inline_above_cost")
	optimize, _ := effective(s, "", "jit_optimize_above_cost")
	a, i, o := num(above), num(inline), num(optimize)
	// jit_above_cost = -1 disables JIT; above the default, only queries
	// costlier than the user chose compile, which is a deliberate setting.
	if a < 0 || a > defaultJITAboveCost {
		return model.Finding{}, false
	}
	share := 0.0
	if dbTotal > 0 {
		share = min(flaggedJIT/dbTotal, 1)
	}
	f := model.Finding{
		Rule:   JITOverheadID,
		Object: model.Object{Kind: "setting", Name: "jit", Database: s.Database},
		Evidence: []model.Evidence{
			{Label: "jit = " + jit + " (" + source + ")", Value: 1},
			{Label: "jit_above_cost", Value: a},
			{Label: "jit_inline_above_cost", Value: i},
			{Label: "jit_optimize_above_cost", Value: o},
		},
		Fix: model.Fix{
			Summary: "turn JIT off for this database's OLTP roles, or raise the cost thresholds so only long analytic queries compile",
			SQL: fmt.Sprintf("ALTER DATABASE %s SET jit = off;\n-- or keep JIT for analytics only:\nALTER DATABASE %s SET jit_above_cost = 1000000;\nALTER DATABASE %s SET jit_inline_above_cost = 10000000;\nALTER DATABASE %s SET jit_optimize_above_cost = 10000000;",
				sqlparse.QuoteIdent(s.Database), sqlparse.QuoteIdent(s.Database), sqlparse.QuoteIdent(s.Database), sqlparse.QuoteIdent(s.Database)),
		},
		Docs: docsPath(JITOverheadID),
	}
	switch {
	case flagged > 0 && share >= jitSettingWarnShare:
		f.Severity = model.Warning
		f.Title = fmt.Sprintf("JIT is on with low cost thresholds and costs %s of statement time in %d short statement(s)", pct(share), flagged)
		f.Impact = model.Impact{Summary: fmt.Sprintf("%s of this database's statement time is JIT compilation of statements that run faster without it", pct(share)), Share: model.Round(share, 4)}
		f.Evidence = append(f.Evidence, model.Evidence{Label: "flagged JIT time", Value: model.Round(flaggedJIT, 2), Unit: "ms"},
			model.Evidence{Label: "statements where JIT dominates", Value: float64(flagged)})
		f.Verification = model.NotRunBecause("not verified yet")
		f.Experiment = &model.Experiment{Kind: model.ExpAggregate}
	case flagged > 0:
		f.Severity = model.Info
		f.Title = fmt.Sprintf("JIT is on with low cost thresholds; %d short statement(s) pay for it, %s of statement time", flagged, pct(share))
		f.Impact = model.Impact{Summary: "small today; see the statement findings", Share: model.Round(share, 4)}
		f.Verification = model.NotRunBecause("below the setting-level threshold; the statement findings carry the measurements")
	case oltpLike(s):
		f.Severity = model.Info
		f.Title = "JIT is armed: on with low cost thresholds on an OLTP workload"
		f.Impact = model.Impact{Summary: "no statement pays for JIT now, but any short query whose estimated cost passes jit_above_cost will (a new partition, a bigger catalog, a major-version upgrade)"}
		f.Verification = model.NotRunBecause("nothing to measure: no statement pays for JIT now")
	default:
		return model.Finding{}, false
	}
	return f, true
}

// oltpLike reports whether most statement time is in short statements (or,
// without pg_stat_statements, says nothing).
func oltpLike(s *model.Snapshot) bool {
	var short, total float64
	for _, st := range s.Statements {
		total += st.TotalExecMS
		if st.MeanExecMS() < oltpMeanMS {
			short += st.TotalExecMS
		}
	}
	return total > 0 && short/total >= oltpShare
}

func boolNum(v string) float64 {
	switch v {
	case "on", "true", "yes", "1":
		return 1
	}
	return 0
}

func num(v string) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return -1
	}
	return f
}

// Thresholds of jit-overhead (see docs/rules/jit-overhead.md).
const (
	planJITMinShare = 0.1 // JIT at least this share of execution ...
	planJITMinMS    = 5.0 // ... and at least this long
)

// planJIT is jit-overhead for one plan: compilation time that the query's
// own work does not justify.
func planJIT(in PlanInput) []model.Finding {
	e := in.Explain
	if e.JIT == nil || e.JIT.TimingMS == nil || e.ExecutionMS <= 0 {
		return nil
	}
	jit := e.JIT.TimingMS.Total
	if jit < planJITMinMS || jit < planJITMinShare*e.ExecutionMS {
		return nil
	}
	f := planFinding(in, JITOverheadID, nil, fmt.Sprintf("JIT compilation took %s of the %s execution", ms(jit), ms(e.ExecutionMS)), jit, "")
	f.Evidence = append(f.Evidence, ev("JIT total", jit, "ms"), ev("execution", e.ExecutionMS, "ms"),
		ev("functions compiled", float64(e.JIT.Functions), ""), ev("plan cost", e.Plan.TotalCost, ""))
	f.Fix = model.Fix{Summary: fmt.Sprintf("turn JIT off for this workload (the plan's cost %.0f passed jit_above_cost); if only some queries are analytic, raise jit_above_cost instead", e.Plan.TotalCost),
		SQL: "SET jit = off;  -- or ALTER ROLE <app role> SET jit = off;"}
	if e.JIT.Inlining || e.JIT.Optimization {
		f.Fix.Summary += "; inlining and optimisation ran, which is most of the cost"
	}
	return []model.Finding{f}
}
