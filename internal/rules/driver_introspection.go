package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// DriverIntrospectionID is the stable id of the rule.
const DriverIntrospectionID = "driver-introspection"

// Thresholds (docs/rules/driver-introspection.md).
const (
	// A new connection that waits this long before its first real query is
	// visibly slow to the application ...
	introWarnMeanMS = 20.0
	// ... and this long makes connection storms self-sustaining.
	introCriticalMeanMS = 100.0
	// Or the catalog chatter is simply a large share of the database's time.
	introWarnDBShare = 0.05
	introMinCalls    = 3
	// JIT is said to inflate the query when it is this share of its time.
	introJITShare = 0.5
)

// driver describes one client library's catalog query.
type driver struct {
	name string
	// match reports whether a normalised (lower-case, single-spaced)
	// statement is this driver's type introspection.
	match func(q string) bool
	fix   string
}

// drivers are recognised from the text of the queries they send, as read
// in each project's source (see the rule's doc page for where).
var drivers = []driver{
	{
		name:  "asyncpg",
		match: func(q string) bool { return strings.Contains(q, "typeinfo_tree") },
		fix:   "upgrade asyncpg to 0.29.0 or later (it switches JIT off around its introspection), or connect with server_settings={'jit': 'off'}; keep connections in a pool so each one introspects once",
	},
	{
		name: "pgjdbc",
		match: func(q string) bool {
			return strings.Contains(q, "pg_type") && strings.Contains(q, "current_schemas(") && strings.Contains(q, "array_in")
		},
		fix: "keep connections in a pool (HikariCP) so the type cache survives; JIT off for the role if JIT shows in the evidence",
	},
	{
		name:  "npgsql",
		match: func(q string) bool { return strings.Contains(q, "elemtypoid") && strings.Contains(q, "typnotnull") },
		fix:   "keep connections pooled (Npgsql pools by default: check Pooling=false is not set); JIT off for the role if JIT shows in the evidence",
	},
	{
		name: "psycopg",
		match: func(q string) bool {
			return strings.Contains(q, "::regtype::text as regtype") && strings.Contains(q, "pg_type")
		},
		fix: "fetch TypeInfo once per process and register it globally instead of per connection",
	},
}

func normalise(q string) string { return strings.ToLower(strings.Join(strings.Fields(q), " ")) }

// driverIntrospection finds client drivers' type-introspection queries that
// cost the application time on every new connection: asyncpg's
// typeinfo_tree query under JIT took the UK coronavirus dashboard down.
func driverIntrospection(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if skip, missing := s.Missing["pg_stat_statements"]; missing {
		skip.Rule = DriverIntrospectionID
		return nil, []model.Skip{skip}
	}
	var skipped []model.Skip
	if s.StatementsHidden > 0 {
		skipped = append(skipped, model.Skip{Rule: DriverIntrospectionID,
			Reason: fmt.Sprintf("%d statements of other roles are hidden from pgmedic's role", s.StatementsHidden),
			Fix:    "GRANT pg_read_all_stats TO <pgmedic's role>;"})
	}
	dbTotal := totalExecMS(s)
	var findings []model.Finding
	for _, st := range s.Statements {
		q := normalise(st.Query)
		for _, d := range drivers {
			if !d.match(q) {
				continue
			}
			if f, ok := introspectionFinding(s, st, d, dbTotal); ok {
				findings = append(findings, f)
			}
			break
		}
	}
	return findings, skipped
}

// introspectionFinding is the finding for a driver's catalog query run once
// per new connection: its calls stand for connections, and JIT on it is
// paid by every one of them.
func introspectionFinding(s *model.Snapshot, st model.Statement, d driver, dbTotal float64) (model.Finding, bool) {
	if st.Calls < introMinCalls {
		return model.Finding{}, false
	}
	mean := st.MeanExecMS() + st.TotalPlanMS/float64(st.Calls)
	dbShare := 0.0
	if dbTotal > 0 {
		dbShare = st.TotalExecMS / dbTotal
	}
	jitShare := 0.0
	if st.JIT.Available && st.TotalExecMS > 0 {
		jitShare = min(st.JIT.TotalMS()/st.TotalExecMS, 1)
	}
	sev := model.Info
	switch {
	case mean >= introCriticalMeanMS:
		sev = model.Critical
	case mean >= introWarnMeanMS || dbShare >= introWarnDBShare:
		sev = model.Warning
	}
	role := st.Role
	if role == "" {
		role = "<role " + strconv.FormatUint(uint64(st.UserID), 10) + ">"
	}
	evidence := []model.Evidence{
		{Label: "calls", Value: float64(st.Calls)},
		{Label: "total time", Value: model.Round(st.TotalExecMS+st.TotalPlanMS, 2), Unit: "ms"},
		{Label: "time per call (each new connection pays it)", Value: model.Round(mean, 2), Unit: "ms"},
		{Label: "share of this database's statement time", Value: model.Round(dbShare*100, 2), Unit: "%"},
	}
	if st.JIT.Available {
		evidence = append(evidence, model.Evidence{Label: "JIT share of its execution time", Value: model.Round(jitShare*100, 2), Unit: "%"})
	}
	if s.DatabaseStats.Available && s.DatabaseStats.Sessions > 0 {
		evidence = append(evidence, model.Evidence{Label: "sessions opened on this database since its statistics reset", Value: float64(s.DatabaseStats.Sessions)})
	}
	title := fmt.Sprintf("%s type introspection takes %.0f ms per new connection", d.name, mean)
	fix := model.Fix{Summary: d.fix}
	var exp *model.Experiment
	ver := model.NotRunBecause("no JIT in this query: its cost is paid once per new connection, so the proof is the per-connection count above; pool connections")
	if jitShare >= introJITShare {
		title = fmt.Sprintf("%s type introspection takes %.0f ms per new connection, %s of it JIT compilation", d.name, mean, pct(jitShare))
		fix.SQL = fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET jit = off;", sqlparse.QuoteIdent(st.Role), sqlparse.QuoteIdent(s.Database))
		exp = &model.Experiment{Kind: model.ExpJITToggle, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role, Calls: st.Calls, Rows: st.Rows,
			AppSettings: roleSettingsFor(s, st.Role, "jit", "jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost", "search_path")}
		ver = model.NotRunBecause("not verified yet")
	}
	return model.Finding{
		Rule:     DriverIntrospectionID,
		Severity: sev,
		Title:    title,
		Object: model.Object{Kind: "statement", Name: d.name + ": " + printable.Shorten(st.Query, 100), QueryID: strconv.FormatInt(st.QueryID, 10),
			Role: st.Role, Database: s.Database},
		Evidence: evidence,
		Impact: model.Impact{
			Summary: fmt.Sprintf("every new %s connection of role %s waits %.0f ms before its first query; %s of this database's statement time", d.name, role, mean, pct(dbShare)),
			Share:   model.Round(dbShare, 4),
		},
		Fix:          fix,
		Verification: ver,
		Docs:         docsPath(DriverIntrospectionID),
		Experiment:   exp,
	}, true
}
