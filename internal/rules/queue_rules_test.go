package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// queueSnap is a snapshot of one queue table of 1.2M rows, 4% pending, with
// an index on download_after only, and the given statements with plans.
func queueSnap(t *testing.T, stmts []model.Statement, plans map[int64]*plan.Explain) *model.Snapshot {
	t.Helper()
	s := &model.Snapshot{
		Database:   "queue",
		Settings:   map[string]model.Setting{},
		Statements: stmts,
		Plans:      plans,
		PlanErrors: map[int64]string{},
		Shapes:     map[int64]*model.QueryShape{},
		Missing:    map[string]model.Skip{},
		Tables: []model.Table{{Schema: "public", Name: "jobs", Reltuples: 1.2e6, RelPages: 15000, HeapBytes: 120 << 20,
			AutovacuumEnabled: true, Live: 1.2e6}},
		Indexes: []model.Index{
			{Schema: "public", Table: "jobs", Name: "jobs_pkey", Columns: []string{"id"}, Desc: []bool{false}, Method: "btree", Unique: true, Primary: true, Valid: true},
			{Schema: "public", Table: "jobs", Name: "jobs_download_after_idx", Columns: []string{"download_after"}, Desc: []bool{false}, Method: "btree", Valid: true},
		},
		Columns: []model.Column{
			{Schema: "public", Table: "jobs", Name: "id", Type: "bigint", Identity: true, HasStats: true, NDistinct: -1, Correlation: 1, AvgWidth: 8},
			{Schema: "public", Table: "jobs", Name: "download_after", Type: "timestamp with time zone", HasStats: true, NDistinct: -1, Correlation: 1, AvgWidth: 8},
			{Schema: "public", Table: "jobs", Name: "referenced_at", Type: "timestamp with time zone", HasStats: true, NDistinct: -1, AvgWidth: 8},
			{Schema: "public", Table: "jobs", Name: "queued_at", Type: "timestamp with time zone", HasStats: true, NullFrac: 0.04, AvgWidth: 8},
			{Schema: "public", Table: "jobs", Name: "state", Type: "text", HasStats: true, NDistinct: 4, AvgWidth: 6},
			{Schema: "public", Table: "jobs", Name: "tenant_id", Type: "integer", HasStats: true, NDistinct: 500, AvgWidth: 4},
		},
	}
	for _, st := range s.Statements {
		sh, err := sqlparse.Describe(st.Query)
		if err != nil {
			s.Unparsed++
			continue
		}
		s.Shapes[st.QueryID] = sh
	}
	return s
}

func scan(nodeType, index, filter, cond string, rows float64) *plan.Explain {
	return &plan.Explain{Plan: plan.Node{NodeType: "Limit", Plans: []plan.Node{{NodeType: nodeType, RelationName: "jobs", Schema: "public",
		IndexName: index, Filter: filter, IndexCond: cond, PlanRows: rows}}}}
}

func TestMissingIndex(t *testing.T) {
	const poll = `SELECT id FROM jobs WHERE queued_at IS NULL AND download_after < $1 AND referenced_at > $2 ORDER BY download_after LIMIT $3`
	cases := []struct {
		name  string
		query string
		plan  *plan.Explain
		calls int64
		ms    float64
		blks  int64
		want  string // proposed index; "" = no finding
	}{
		{"poll through the wrong index", poll,
			scan("Index Scan", "jobs_download_after_idx", "((jobs.queued_at IS NULL) AND (jobs.referenced_at > $2))", "(jobs.download_after < $1)", 5000),
			100, 230, 2000000, `(download_after) WHERE queued_at IS NULL`},
		{"equality then sort, descending", `SELECT * FROM public.jobs j WHERE j.tenant_id = $1 AND j.state = $2 ORDER BY j.download_after DESC LIMIT 20`,
			scan("Seq Scan", "", "((j.tenant_id = $1) AND (j.state = $2))", "", 600), 50, 80, 750000, `(tenant_id, state, download_after DESC)`},
		{"range only, no limit", `SELECT count(*) FROM jobs WHERE referenced_at > $1 AND state = 'x'`,
			scan("Seq Scan", "", "((referenced_at > $1) AND (state = 'x'::text))", "", 3000), 10, 60, 150000, `(state, referenced_at)`},
		{"already covered by an existing index", `SELECT * FROM jobs WHERE download_after < $1 ORDER BY download_after LIMIT 5`,
			scan("Seq Scan", "", "(download_after < $1)", "", 1000), 10, 60, 150000, ""},
		{"cheap statement", poll, scan("Seq Scan", "", "(queued_at IS NULL)", "", 1000), 3, 0.5, 30, ""},
		{"scan keeps most rows", `SELECT * FROM jobs WHERE state <> 'done'`, scan("Seq Scan", "", "(state <> 'done'::text)", "", 1e6), 10, 300, 150000, ""},
		{"join on another table is not this table's predicate", `SELECT j.id FROM jobs j JOIN tenants t ON t.id = j.tenant_id WHERE t.name = $1`,
			scan("Seq Scan", "", "(t.name = $1)", "", 100), 10, 50, 150000, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := model.Statement{QueryID: 1, Query: c.query, Calls: c.calls, TotalExecMS: c.ms * float64(c.calls), Rows: 100 * c.calls, SharedBlksHit: c.blks}
			s := queueSnap(t, []model.Statement{st}, map[int64]*plan.Explain{1: c.plan})
			fs, _ := missingIndex(s)
			if c.want == "" {
				if len(fs) != 0 {
					t.Fatalf("want no finding, got %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one finding, got %d", len(fs))
			}
			f := fs[0]
			if !strings.Contains(f.Title, c.want) {
				t.Errorf("title %q does not propose %s", f.Title, c.want)
			}
			if !strings.HasPrefix(f.Fix.SQL, "CREATE INDEX CONCURRENTLY ") || f.Experiment == nil || f.Experiment.Kind != model.ExpIndex || f.Experiment.Proposal == nil || f.Fix.SQL != f.Experiment.Proposal.SQL(true)+";" {
				t.Errorf("fix %q / experiment %+v", f.Fix.SQL, f.Experiment)
			}
		})
	}
}

// TestMissingIndexLeavesBloatToTableBloat: a scan that keeps a quarter of
// a table reads ten times the buffers an index would save only because
// nine rows in ten are dead; that is table-bloat's finding, and an index
// would hide it. The same scan of a table without dead rows is this
// rule's.
func TestMissingIndexLeavesBloatToTableBloat(t *testing.T) {
	q := `SELECT tenant_id, count(*) FROM jobs WHERE state = $1 GROUP BY tenant_id`
	st := model.Statement{QueryID: 1, Query: q, Calls: 20, TotalExecMS: 20 * 90, Rows: 20 * 500, SharedBlksHit: 20 * 15000}
	for _, c := range []struct {
		name       string
		live, dead int64
		want       int
	}{
		{"nine rows in ten dead", 120000, 1100000, 0},
		{"no dead rows", 1200000, 0, 1},
	} {
		s := queueSnap(t, []model.Statement{st}, map[int64]*plan.Explain{1: scan("Seq Scan", "", "(state = $1)", "", 0.25*float64(c.live))})
		s.Tables[0].Live, s.Tables[0].Dead, s.Tables[0].Reltuples = c.live, c.dead, float64(c.live)
		if fs, _ := missingIndex(s); len(fs) != c.want {
			t.Errorf("%s: %d findings, want %d: %+v", c.name, len(fs), c.want, fs)
		}
	}
}

func TestMissingIndexCountsUnparsed(t *testing.T) {
	st := model.Statement{QueryID: 9, Query: "SELEC broken FROM", Calls: 1, TotalExecMS: 1}
	s := queueSnap(t, []model.Statement{st}, map[int64]*plan.Explain{})
	s.PlanErrors[9] = "syntax error"
	_, skipped := missingIndex(s)
	joined := ""
	for _, sk := range skipped {
		joined += sk.Reason + "\n"
	}
	if s.Unparsed != 1 || !strings.Contains(joined, "1 statements in pg_stat_statements do not parse") {
		t.Fatalf("unparsed=%d skipped=%q", s.Unparsed, joined)
	}
}

func TestQueueClaimRace(t *testing.T) {
	cases := []struct {
		name, query string
		waits       int
		want        model.Severity // -1 = no finding
		rewrite     string
	}{
		{"update from subquery without lock", `UPDATE jobs j SET state = 'running' FROM (SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 10) s WHERE j.id = s.id`, 0, model.Warning, "LIMIT 10 FOR UPDATE SKIP LOCKED"},
		{"delete where id in subquery, lock waits seen", `DELETE FROM q.jobs WHERE id IN (SELECT id FROM q.jobs ORDER BY run_at LIMIT 1) RETURNING *`, 3, model.Critical, "FOR UPDATE SKIP LOCKED"},
		{"CTE claim with plain FOR UPDATE", `WITH c AS (SELECT id FROM jobs WHERE state = 'new' LIMIT 5 FOR UPDATE) UPDATE jobs SET state = 'running' FROM c WHERE jobs.id = c.id`, 0, model.Info, "FOR UPDATE SKIP LOCKED"},
		{"FOR NO KEY UPDATE keeps its strength", `UPDATE jobs SET state = 'x' WHERE id = (SELECT id FROM jobs LIMIT 1 FOR NO KEY UPDATE)`, 2, model.Warning, "FOR NO KEY UPDATE SKIP LOCKED"},
		{"SKIP LOCKED is the fix", `UPDATE jobs SET state = 'x' WHERE id IN (SELECT id FROM jobs LIMIT 10 FOR UPDATE SKIP LOCKED)`, 5, -1, ""},
		{"subquery on another table is no claim", `UPDATE jobs SET state = 'x' WHERE tenant_id IN (SELECT id FROM tenants LIMIT 10)`, 0, -1, ""},
		{"no LIMIT is no claim", `UPDATE jobs SET state = 'x' WHERE id IN (SELECT id FROM jobs WHERE state = 'new')`, 0, -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := model.Statement{QueryID: 7, Query: c.query, Calls: 50, TotalExecMS: 50, Rows: 500}
			s := queueSnap(t, []model.Statement{st}, nil)
			if c.waits > 0 {
				s.LockWaits = []model.LockWait{{QueryID: 7, WaitEvent: "Lock/transactionid", Samples: c.waits}}
			}
			fs, _ := queueClaimRace(s)
			if c.want < 0 {
				if len(fs) > 0 {
					t.Fatalf("unexpected finding: %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 || fs[0].Severity != c.want {
				t.Fatalf("findings %+v, want one at %v", fs, c.want)
			}
			if !strings.Contains(fs[0].Fix.SQL, c.rewrite) {
				t.Errorf("rewrite %q lacks %q", fs[0].Fix.SQL, c.rewrite)
			}
			if _, err := sqlparse.Parse(fs[0].Fix.SQL); err != nil {
				t.Errorf("rewrite does not parse: %v", err)
			}
		})
	}
}

func TestRandomPrimaryKey(t *testing.T) {
	cases := []struct {
		name string
		col  model.Column
		rows float64
		want bool
	}{
		{"uuid v4 default", model.Column{Type: "uuid", Default: "gen_random_uuid()", Correlation: 0.002, NDistinct: -1}, 1e6, true},
		{"sha256 bytea", model.Column{Type: "bytea", Correlation: -0.01, NDistinct: -1}, 1e6, true},
		{"hash as text", model.Column{Type: "text", Default: "md5((random())::text)", Correlation: 0.03, NDistinct: -1}, 5e5, true},
		{"bigint identity", model.Column{Type: "bigint", Identity: true, Correlation: 1, NDistinct: -1}, 1e6, false},
		{"bigserial shuffled by updates", model.Column{Type: "bigint", Default: "nextval('t_id_seq'::regclass)", Correlation: 0.02, NDistinct: -1}, 1e6, false},
		{"uuid v7 (time-ordered)", model.Column{Type: "uuid", Correlation: 0.99, NDistinct: -1}, 1e6, false},
		{"small table", model.Column{Type: "uuid", Default: "gen_random_uuid()", Correlation: 0.01, NDistinct: -1}, 5000, false},
		{"integer from another system", model.Column{Type: "integer", Correlation: 0.01, NDistinct: -1}, 1e6, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := c.col
			col.Schema, col.Table, col.Name, col.HasStats, col.AvgWidth = "public", "keys", "id", true, 16
			s := &model.Snapshot{
				Tables:  []model.Table{{Schema: "public", Name: "keys", Reltuples: c.rows, HeapBytes: 100 << 20, Inserted: 1000}},
				Missing: map[string]model.Skip{model.SrcStatements: {Reason: "not installed"}},
				Indexes: []model.Index{{Schema: "public", Table: "keys", Name: "keys_pkey", Columns: []string{"id"}, Method: "btree", Primary: true, Unique: true, Valid: true, Bytes: 70 << 20}},
				Columns: []model.Column{col},
				Shapes:  map[int64]*model.QueryShape{},
			}
			fs, _ := randomPrimaryKey(s)
			if (len(fs) > 0) != c.want {
				t.Fatalf("flagged=%v, want %v", len(fs) > 0, c.want)
			}
			if c.want && (fs[0].Experiment == nil || fs[0].Experiment.Kind != model.ExpIndexStats || !strings.Contains(fs[0].Fix.Summary, "UUIDv7")) {
				t.Errorf("finding %+v", fs[0])
			}
		})
	}
}

// TestRandomSecondaryKey: a unique key that is not the primary key is
// judged apart. Its values must stay unique, so the fix never moves the
// primary key; beside an ordered primary key only this index scatters
// (info); an invalid one is invalid-index's; a table that takes no
// inserts pays nothing for random keys.
func TestRandomSecondaryKey(t *testing.T) {
	snap := func(ix model.Index, inserts int64) *model.Snapshot {
		s := &model.Snapshot{
			Tables: []model.Table{{Schema: "public", Name: "payments", Reltuples: 5e5, HeapBytes: 100 << 20, Inserted: 5e5}},
			Indexes: []model.Index{{Schema: "public", Table: "payments", Name: "payments_pkey", Columns: []string{"id"}, Method: "btree", Primary: true, Unique: true, Valid: true, Ready: true},
				ix},
			Columns: []model.Column{
				{Schema: "public", Table: "payments", Name: "id", Type: "bigint", Identity: true, HasStats: true, Correlation: 1, NDistinct: -1},
				{Schema: "public", Table: "payments", Name: "idempotency_key", Type: "text", HasStats: true, Correlation: 0.004, NDistinct: -1, AvgWidth: 37}},
			Statements: []model.Statement{{QueryID: 7, Query: "INSERT INTO payments (idempotency_key, amount) VALUES ($1, $2)", Calls: inserts, Rows: inserts}},
			Shapes:     map[int64]*model.QueryShape{},
		}
		st, _ := sqlparse.Parse(s.Statements[0].Query)
		s.Shapes[7] = st.Shape()
		return s
	}
	key := model.Index{Schema: "public", Table: "payments", Name: "payments_idempotency_key_key", Columns: []string{"idempotency_key"}, Method: "btree", Unique: true, Valid: true, Ready: true}
	fs, _ := randomPrimaryKey(snap(key, 40000))
	if len(fs) != 1 || fs[0].Severity != model.Info || strings.Contains(fs[0].Fix.SQL+fs[0].Fix.Summary, "primary key") || !strings.Contains(fs[0].Title, "only this index scatters") {
		t.Errorf("a random unique key beside an identity primary key: %+v", fs)
	}
	invalid := key
	invalid.Valid, invalid.Ready = false, false
	if fs, _ := randomPrimaryKey(snap(invalid, 40000)); len(fs) != 0 {
		t.Errorf("an invalid unique index: %+v", fs)
	}
	if fs, _ := randomPrimaryKey(snap(key, 0)); len(fs) != 0 {
		t.Errorf("a table that takes no inserts: %+v", fs)
	}
	if !copiesInto("COPY public.payments (id, idempotency_key) FROM STDIN", &model.Table{Schema: "public", Name: "payments"}) ||
		copiesInto("COPY payments TO STDOUT", &model.Table{Schema: "public", Name: "payments"}) {
		t.Error("copiesInto")
	}
}

func TestTableBloatAndStaleStatistics(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	day := now.Add(-24 * time.Hour)
	cases := []struct {
		name              string
		table             model.Table
		update            string
		bloat, hot, stale bool
	}{
		{"churned queue, autovacuum off", model.Table{Live: 300000, Dead: 350000, Reltuples: 200000, ModSinceAnalyze: 650000, LastAnalyze: &day,
			Updated: 150000, HOTUpdated: 0}, `UPDATE q SET processed_at = now() WHERE id = $1`, true, true, true},
		{"healthy table", model.Table{Live: 50000, Dead: 3000, Reltuples: 50000, ModSinceAnalyze: 3000, LastAnalyze: &day, Updated: 3000, HOTUpdated: 2900},
			`UPDATE q SET payload = $1 WHERE id = $2`, false, false, false},
		{"updates of unindexed column, not HOT for lack of room", model.Table{Live: 100000, Dead: 20000, Reltuples: 100000, ModSinceAnalyze: 20000, LastAnalyze: &day,
			Updated: 50000, HOTUpdated: 100}, `UPDATE q SET payload = $1 WHERE id = $2`, false, false, false},
		{"never analysed", model.Table{Live: 40000, Reltuples: -1, ModSinceAnalyze: 40000}, ``, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := c.table
			tb.Schema, tb.Name, tb.AutovacuumEnabled = "public", "q", false
			s := &model.Snapshot{CollectedAt: now, Tables: []model.Table{tb},
				Settings: map[string]model.Setting{"autovacuum_vacuum_threshold": {Value: "50"}, "autovacuum_vacuum_scale_factor": {Value: "0.2"},
					"autovacuum_analyze_threshold": {Value: "50"}, "autovacuum_analyze_scale_factor": {Value: "0.1"}},
				Indexes: []model.Index{{Schema: "public", Table: "q", Name: "q_pending_idx", Columns: []string{"created_at"}, Predicate: "(processed_at IS NULL)", Method: "btree", Valid: true}},
				Shapes:  map[int64]*model.QueryShape{}}
			if c.update != "" {
				s.Statements = []model.Statement{{QueryID: 1, Query: c.update, Calls: 10}}
				sh, _ := sqlparse.Describe(c.update)
				s.Shapes[1] = sh
			}
			fs, _ := tableBloat(s)
			var bloat, hot bool
			for _, f := range fs {
				if strings.HasSuffix(f.Object.Name, "(updates)") {
					hot = true
					if !strings.Contains(f.Title, "partial-index predicate of q_pending_idx") {
						t.Errorf("title %q does not name the index", f.Title)
					}
				} else {
					bloat = true
					if !strings.Contains(f.Fix.SQL, "RESET (autovacuum_enabled)") {
						t.Errorf("fix %q does not re-enable autovacuum", f.Fix.SQL)
					}
				}
			}
			if bloat != c.bloat || hot != c.hot {
				t.Errorf("bloat=%v hot=%v, want %v %v", bloat, hot, c.bloat, c.hot)
			}
			st, _ := staleStatistics(s)
			if (len(st) > 0) != c.stale {
				t.Errorf("stale=%v, want %v", len(st) > 0, c.stale)
			}
		})
	}
}

// TestStaleStatisticsWithinAutovacuumLag: changes younger than autovacuum's
// naptime plus a run, and tables never analysed since the statistics were
// reset, are its ordinary lag: info until a misestimate is measured. With
// autovacuum off, or an ANALYZE long ago, they are a warning.
func TestStaleStatisticsWithinAutovacuumLag(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { x := now.Add(-ago); return &x }
	for _, c := range []struct {
		name       string
		last       *time.Time
		autovacuum bool
		naptime    string
		want       model.Severity
	}{
		{"analysed 30 s ago", at(30 * time.Second), true, "60", model.Info},
		{"analysed 90 s ago, naptime 60 s", at(90 * time.Second), true, "60", model.Info},
		{"analysed 3 minutes ago", at(3 * time.Minute), true, "60", model.Warning},
		{"analysed 3 minutes ago, naptime 5 min", at(3 * time.Minute), true, "300", model.Info},
		{"never analysed, autovacuum on", nil, true, "60", model.Info},
		{"never analysed, autovacuum off", nil, false, "60", model.Warning},
		{"analysed 30 s ago, autovacuum off", at(30 * time.Second), false, "60", model.Warning},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &model.Snapshot{CollectedAt: now, Tables: []model.Table{{Schema: "public", Name: "q", Live: 60000, Reltuples: 20000,
				ModSinceAnalyze: 40000, LastAnalyze: c.last, AutovacuumEnabled: c.autovacuum}},
				Settings: map[string]model.Setting{"autovacuum_naptime": {Value: c.naptime}, "autovacuum_analyze_threshold": {Value: "50"},
					"autovacuum_analyze_scale_factor": {Value: "0.1"}}}
			fs, _ := staleStatistics(s)
			if len(fs) != 1 || fs[0].Severity != c.want {
				t.Fatalf("got %d findings %+v, want one at %v", len(fs), fs, c.want)
			}
		})
	}
}
