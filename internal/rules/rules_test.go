package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// snap builds a snapshot at PostgreSQL 15 defaults: JIT available and on,
// default thresholds, pg_stat_statements with jit_* columns.
func snap(stmts ...model.Statement) *model.Snapshot {
	for i := range stmts {
		stmts[i].JIT.Available = true
		if stmts[i].Role == "" {
			stmts[i].Role = "app"
		}
	}
	return &model.Snapshot{
		Database: "shop",
		Server:   model.Server{VersionNum: 150020, JITAvailable: true},
		Settings: map[string]model.Setting{
			"jit":                     {Name: "jit", Value: "on", Source: "default"},
			"jit_above_cost":          {Name: "jit_above_cost", Value: "100000", Source: "default"},
			"jit_inline_above_cost":   {Name: "jit_inline_above_cost", Value: "500000", Source: "default"},
			"jit_optimize_above_cost": {Name: "jit_optimize_above_cost", Value: "500000", Source: "default"},
		},
		Statements: stmts,
		Missing:    map[string]model.Skip{},
	}
}

// jitStmt is a statement with the given calls, mean execution and JIT per call.
func jitStmt(query string, calls int64, execMS, jitMS float64) model.Statement {
	c := float64(calls)
	return model.Statement{QueryID: int64(len(query)), Query: query, Calls: calls, TotalExecMS: execMS * c,
		JIT: model.JITStats{Functions: 300 * calls, GenerationMS: 0.1 * jitMS * c, OptimizationCount: calls,
			OptimizationMS: 0.5 * jitMS * c, EmissionMS: 0.4 * jitMS * c}}
}

func plainStmt(query string, calls int64, execMS float64) model.Statement {
	return model.Statement{QueryID: int64(len(query)) + 1000, Query: query, Calls: calls, TotalExecMS: execMS * float64(calls)}
}

func find(fs []model.Finding, kind string) *model.Finding {
	for i := range fs {
		if fs[i].Object.Kind == kind {
			return &fs[i]
		}
	}
	return nil
}

func TestJITOverhead(t *testing.T) {
	const oltp = "SELECT o.id FROM orders o WHERE o.customer_id = $1"
	cases := []struct {
		name         string
		s            *model.Snapshot
		stmtSeverity model.Severity // -1: no statement finding
		setting      model.Severity // -1: no setting finding
	}{
		{"uk dashboard: 1 ms query paying 900 ms of JIT", snap(jitStmt(oltp, 200, 901, 900)), model.Critical, model.Warning},
		{"jit a third of a minor statement", snap(jitStmt(oltp, 50, 30, 10), plainStmt("SELECT 1", 100000, 1)), model.Warning, model.Info},
		{"analytic query where JIT is small", snap(jitStmt("SELECT sum(x) FROM facts", 50, 20000, 300)), -1, -1},
		{"too few calls to be a pattern", snap(jitStmt(oltp, 2, 901, 900)), -1, -1},
		{"JIT per call below noise", snap(jitStmt(oltp, 500, 3, 2)), -1, model.Info},
		{"healthy OLTP, JIT armed but unused", snap(plainStmt("SELECT * FROM accounts WHERE id = $1", 5000, 0.05)), -1, model.Info},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := jitOverhead(c.s)
			st, set := find(fs, "statement"), find(fs, "setting")
			if c.stmtSeverity < 0 && st != nil {
				t.Fatalf("unexpected statement finding: %+v", st)
			}
			if c.stmtSeverity >= 0 {
				if st == nil {
					t.Fatalf("no statement finding in %+v", fs)
				}
				if st.Severity != c.stmtSeverity {
					t.Errorf("severity %s, want %s", st.Severity, c.stmtSeverity)
				}
				if st.Experiment == nil || st.Experiment.Kind != model.ExpJITToggle || st.Experiment.Query == "" {
					t.Errorf("statement finding carries no jit-toggle experiment: %+v", st.Experiment)
				}
				if !strings.Contains(st.Fix.SQL, "ALTER ROLE app IN DATABASE shop SET jit = off") {
					t.Errorf("fix SQL %q", st.Fix.SQL)
				}
				if st.Verification.Status == model.Confirmed {
					t.Errorf("a rule must not claim confirmed before measuring")
				}
			}
			if c.setting < 0 && set != nil {
				t.Fatalf("unexpected setting finding: %+v", set)
			}
			if c.setting >= 0 && (set == nil || set.Severity != c.setting) {
				t.Fatalf("setting finding %+v, want severity %s", set, c.setting)
			}
		})
	}
}

func TestJITOverheadRespectsSettings(t *testing.T) {
	s := snap(jitStmt("SELECT 1 FROM t WHERE a = $1", 100, 500, 490))
	s.Settings["jit"] = model.Setting{Name: "jit", Value: "off", Source: "configuration file"}
	fs, _ := jitOverhead(s)
	if set := find(fs, "setting"); set != nil {
		t.Errorf("jit = off in the configuration: no setting finding expected, got %q", set.Title)
	}
	// The history still shows JIT; the statement is flagged, and the
	// experiment runs it the way the role now runs it.
	if st := find(fs, "statement"); st == nil {
		t.Errorf("statement history with JIT should still be reported")
	}

	s = snap(jitStmt("SELECT 1 FROM t WHERE a = $1", 100, 500, 490))
	s.RoleSettings = []model.RoleSetting{{Role: "app", Database: "shop", Settings: map[string]string{"jit_above_cost": "5000000"}}}
	fs, _ = jitOverhead(s)
	st := find(fs, "statement")
	if st == nil || st.Experiment.AppSettings["jit_above_cost"] != "5000000" {
		t.Fatalf("role setting not carried into the experiment: %+v", st)
	}

	s = snap(jitStmt("SELECT 1 FROM t WHERE a = $1", 100, 500, 490))
	s.Server.JITAvailable = false
	if fs, _ := jitOverhead(s); len(fs) != 0 {
		t.Errorf("server without JIT support: %d findings", len(fs))
	}
}

// When pg_jit_available() could not be asked (a statement timeout on a
// saturated server), collect judges availability from the statements'
// JIT counters; the rule says so when that leaves it unknown.
func TestJITOverheadAvailabilityUnknown(t *testing.T) {
	s := snap(plainStmt("SELECT 1 FROM t WHERE a = $1", 100, 5))
	s.Server.JITAvailable = false
	s.Missing[model.SrcJIT] = model.Skip{Reason: "cannot ask whether the server can JIT: canceling statement due to statement timeout",
		Fix: "raise --statement-timeout"}
	fs, skipped := jitOverhead(s)
	if len(fs) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "statement timeout") || skipped[0].Fix == "" {
		t.Fatalf("unknown availability: findings %+v, skipped %+v", fs, skipped)
	}
	s = snap(jitStmt("SELECT 1 FROM t WHERE a = $1", 100, 500, 490))
	s.Missing[model.SrcJIT] = model.Skip{Reason: "cannot ask whether the server can JIT: timeout"}
	if fs, _ := jitOverhead(s); find(fs, "statement") == nil {
		t.Errorf("availability proved by the statements' JIT work, yet no statement finding: %+v", fs)
	}
}

func TestJITOverheadWithoutPgss(t *testing.T) {
	s := snap()
	s.Statements = nil
	s.Missing["pg_stat_statements"] = model.Skip{Reason: "not installed", Fix: "CREATE EXTENSION pg_stat_statements;"}
	fs, skipped := jitOverhead(s)
	if len(skipped) != 1 || skipped[0].Rule != JITOverheadID || skipped[0].Fix == "" {
		t.Fatalf("skipped = %+v", skipped)
	}
	for _, f := range fs {
		if f.Severity >= model.Warning {
			t.Errorf("without statistics nothing can be above info: %+v", f)
		}
	}
}

func TestEffectivePrecedence(t *testing.T) {
	s := snap()
	s.RoleSettings = []model.RoleSetting{
		{Database: "shop", Settings: map[string]string{"jit": "off"}},
		{Role: "app", Settings: map[string]string{"jit": "on"}},
		{Role: "report", Database: "shop", Settings: map[string]string{"jit": "off"}},
		{Role: "report", Settings: map[string]string{"jit": "on"}},
	}
	for _, c := range []struct{ role, want, src string }{
		{"", "off", "ALTER DATABASE shop"},
		{"app", "on", "ALTER ROLE app"},
		{"report", "off", "ALTER ROLE report IN DATABASE shop"},
		{"other", "off", "ALTER DATABASE shop"},
	} {
		v, src := effective(s, c.role, "jit")
		if v != c.want || src != c.src {
			t.Errorf("role %q: %s (%s), want %s (%s)", c.role, v, src, c.want, c.src)
		}
	}
}

func TestDriverIntrospection(t *testing.T) {
	const asyncpg = "WITH RECURSIVE typeinfo_tree(oid, ns, name) AS (SELECT ...) SELECT * FROM typeinfo_tree"
	const jdbc = "SELECT t.oid, n.nspname = ANY(current_schemas(true)), t.typinput = 'array_in'::regproc FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE t.typname = $1"
	const npgsql = "SELECT ns.nspname, t.oid, t.typname, t.typtype, t.typnotnull, t.elemtypoid FROM (SELECT ...) AS t"
	const psycopg = "SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, typdelim AS delimiter FROM pg_type t WHERE t.oid = to_regtype($1)"
	cases := []struct {
		name     string
		st       model.Statement
		driver   string
		severity model.Severity
		jitExp   bool
	}{
		{"asyncpg under JIT", jitStmt(asyncpg, 40, 950, 940), "asyncpg", model.Critical, true},
		{"asyncpg without JIT, cheap", plainStmt(asyncpg, 40, 2), "asyncpg", model.Info, false},
		{"pgjdbc slowish", plainStmt(jdbc, 500, 25), "pgjdbc", model.Warning, false},
		{"npgsql", plainStmt(npgsql, 10, 150), "npgsql", model.Critical, false},
		{"psycopg", plainStmt(psycopg, 10, 1), "psycopg", model.Info, false},
		{"application query is not a driver", jitStmt("SELECT * FROM pg_type WHERE oid = $1", 40, 950, 940), "", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The rest of the workload: 100 s of ordinary statement time.
			fs, _ := driverIntrospection(snap(c.st, plainStmt("SELECT 1", 100000, 1)))
			if c.driver == "" {
				if len(fs) != 0 {
					t.Fatalf("false positive: %+v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("%d findings, want 1", len(fs))
			}
			f := fs[0]
			if !strings.HasPrefix(f.Object.Name, c.driver+":") {
				t.Errorf("object %q, want driver %s", f.Object.Name, c.driver)
			}
			if f.Severity != c.severity {
				t.Errorf("severity %s, want %s", f.Severity, c.severity)
			}
			if (f.Experiment != nil) != c.jitExp {
				t.Errorf("experiment %+v, want jit experiment %v", f.Experiment, c.jitExp)
			}
			if c.jitExp && !strings.Contains(f.Fix.SQL, "jit = off") {
				t.Errorf("fix SQL %q", f.Fix.SQL)
			}
		})
	}
}

func TestDriverIntrospectionReportsHiddenStatements(t *testing.T) {
	s := snap()
	s.StatementsHidden = 3
	_, skipped := driverIntrospection(s)
	if len(skipped) != 1 || !strings.Contains(skipped[0].Fix, "pg_read_all_stats") {
		t.Fatalf("skipped = %+v", skipped)
	}
}

func TestSelect(t *testing.T) {
	if rs, err := Select([]string{"driver-introspection"}); err != nil || len(rs) != 1 {
		t.Fatalf("Select = %v, %v", rs, err)
	}
	if _, err := Select([]string{"no-such-rule"}); err == nil || !strings.Contains(err.Error(), "jit-overhead") {
		t.Fatalf("unknown rule error should list known rules: %v", err)
	}
}

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{"app": "app", "App": `"App"`, "my-db": `"my-db"`, "user": `"user"`, `we"ird`: `"we""ird"`, "db1": "db1"} {
		if got := sqlparse.QuoteIdent(in); got != want {
			t.Errorf("sqlparse.QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestMerge: one problem is one finding. Two sessions running one
// statement (one id) are one; a plan node's and its statement's
// missing-index findings that propose the same index are one, the first
// counting the other; a different index stays apart.
func TestMerge(t *testing.T) {
	prop := func(cols ...string) *model.Experiment {
		p := &model.IndexProposal{Table: model.RelRef{Schema: "public", Name: "orders"}}
		for _, c := range cols {
			p.Keys = append(p.Keys, model.IndexKey{Column: c})
		}
		return &model.Experiment{Kind: model.ExpIndex, Proposal: p}
	}
	stall := model.Finding{Rule: ClientStallID, Object: model.Object{Kind: "session", Name: "pid 1: INSERT", Fingerprint: "fp"}}
	stall2 := stall
	stall2.Object.Name = "pid 2: INSERT"
	fs := []model.Finding{
		{Rule: MissingIndexID, Title: "statement", Object: model.Object{Kind: "statement", Name: "SELECT a"}, Experiment: prop("customer_id", "status")},
		{Rule: MissingIndexID, Title: "plan node", Object: model.Object{Kind: "plan", Name: "Seq Scan on orders"}, Experiment: prop("customer_id", "status")},
		{Rule: MissingIndexID, Title: "another index", Object: model.Object{Kind: "statement", Name: "SELECT b"}, Experiment: prop("created_at")},
		stall, stall2,
	}
	out := Merge(fs)
	if len(out) != 3 || out[0].Title != "statement" || out[1].Title != "another index" {
		t.Fatalf("merged into %d: %+v", len(out), out)
	}
	if ev := out[0].Evidence; len(ev) != 1 || ev[0].Value != 1 {
		t.Errorf("the standing finding does not count the merged one: %+v", ev)
	}
	if len(out[1].Evidence) != 0 || len(out[2].Evidence) != 1 {
		t.Errorf("evidence: %+v / %+v", out[1].Evidence, out[2].Evidence)
	}
}
