package lab

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Scenario reproduces one incident (or a healthy control) in its own
// database: schema and data, a workload from a real client, and the findings
// pgmedic must and must not produce on it.
type Scenario struct {
	Name    string
	Summary string
	// Expect lists findings that must appear (at warning or above).
	Expect []Expect
	// MustNot lists findings that must not appear at warning or above;
	// Rule "*" means no rule at all.
	MustNot  []Expect
	Setup    func(ctx context.Context, env *Env) error
	Workload func(ctx context.Context, env *Env) error
	// Explain lists statements, with their literal values, that pgmedic
	// also diagnoses with explain --query --analyze, as an engineer does
	// with a statement from the application's log.
	Explain []string
}

// Expect matches findings.
type Expect struct {
	Rule string `json:"rule"`
	// Confirmed requires verification status "confirmed".
	Confirmed bool `json:"confirmed,omitempty"`
	// Object, when set, must be a substring of the finding's object name.
	Object string `json:"object,omitempty"`
	// MinRatio, when set, requires before/after of at least this much.
	MinRatio float64 `json:"min_ratio,omitempty"`
}

func (e Expect) String() string {
	s := e.Rule
	if e.Object != "" {
		s += " on " + e.Object
	}
	if e.Confirmed {
		s += " (confirmed"
		if e.MinRatio > 0 {
			s += fmt.Sprintf(", before >= %gx after", e.MinRatio)
		}
		s += ")"
	}
	return s
}

func (e Expect) matches(f model.Finding) bool {
	if e.Rule != "*" && f.Rule != e.Rule {
		return false
	}
	if e.Object != "" && !strings.Contains(f.Object.Name, e.Object) {
		return false
	}
	if e.Confirmed {
		v := f.Verification
		if v.Status != model.Confirmed || v.Before == nil || v.After == nil {
			return false
		}
		if e.MinRatio > 0 && (v.After.Value <= 0 || v.Before.Value/v.After.Value < e.MinRatio) {
			return false
		}
	}
	return true
}

// Evaluate compares findings with a scenario's expectations. Only warning
// and critical findings count: info findings are advice, not diagnoses.
func (s Scenario) Evaluate(findings []model.Finding) (missing, unexpected []string) {
	missing, unexpected = []string{}, []string{}
	for _, e := range s.Expect {
		found := false
		for _, f := range findings {
			if f.Severity >= model.Warning && e.matches(f) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, e.String())
		}
	}
	for _, e := range s.MustNot {
		for _, f := range findings {
			if f.Severity >= model.Warning && e.matches(f) {
				unexpected = append(unexpected, f.Rule+": "+f.Title)
			}
		}
	}
	return missing, unexpected
}

// Env is what a scenario's setup and workload get.
type Env struct {
	Cluster *Cluster
	DB      string
	// Role is the application role the workload connects as.
	Role string
	Log  func(format string, args ...any)
	// Metrics are figures the workload measured itself (rows claimed
	// twice, leaf density, ...), reported beside pgmedic's findings.
	Metrics map[string]float64
}

// Record stores one measured figure of the workload.
func (e *Env) Record(name string, value float64) {
	if e.Metrics == nil {
		e.Metrics = map[string]float64{}
	}
	e.Metrics[name] = value
}

// AppDSN is the workload's connection string.
func (e *Env) AppDSN() string { return e.Cluster.UserDSN(e.Role, e.DB) }

// Admin opens a superuser connection to the scenario database.
func (e *Env) Admin(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, e.Cluster.DSN(e.DB))
	if err != nil {
		return nil, fmt.Errorf("connecting to the lab database %s: %w", e.DB, err)
	}
	return conn, nil
}

// Scenarios lists every scenario, sorted by name.
func Scenarios() []Scenario {
	list := []Scenario{jitOLTP(), asyncpgIntrospection(), healthy(), queuePoll(), queueClaimRace(), randomKeys(), queueChurn(), implicitCasts()}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

// Find returns the named scenario.
func Find(name string) (Scenario, error) {
	var names []string
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q: known scenarios are %s", name, strings.Join(names, ", "))
}

// AppRole is the login role scenario workloads use.
const AppRole = "app"

// Prepare creates the scenario's database (replacing an earlier one), runs
// its setup, clears the statement statistics the setup left (bulk loads are
// not the workload) and runs the workload.
func (c *Cluster) Prepare(ctx context.Context, s Scenario, logf func(string, ...any)) (*Env, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	env := &Env{Cluster: c, DB: strings.ReplaceAll(s.Name, "-", "_"), Role: AppRole, Log: logf}
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("connecting to the lab cluster: %w", err)
	}
	defer admin.Close(context.Background())
	stmts := []string{
		fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", env.DB),
		fmt.Sprintf("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF; END $$", AppRole, AppRole),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", env.DB, AppRole),
	}
	for _, q := range stmts {
		if _, err := admin.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("creating the scenario database: %w", err)
		}
	}
	db, err := env.Admin(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close(context.Background())
	exts := []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "CREATE EXTENSION IF NOT EXISTS pgstattuple"}
	if c.HypoPG {
		exts = append(exts, "CREATE EXTENSION IF NOT EXISTS hypopg")
	}
	for _, q := range exts {
		if _, err := db.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("installing extensions in %s: %w", env.DB, err)
		}
	}
	logf("%s: loading schema and data", s.Name)
	start := time.Now()
	if err := s.Setup(ctx, env); err != nil {
		return nil, fmt.Errorf("scenario %s setup: %w", s.Name, err)
	}
	// A backend flushes its table counters at most once a second and when
	// it exits, so a bulk load analysed in the same second shows up later
	// as "modified since analyze". Wait for the setup's sessions to end and
	// analyze again: the workload, not the load, must make statistics stale.
	for i := 0; i < 50; i++ {
		var others int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&others); err != nil || others == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := db.Exec(ctx, "ANALYZE"); err != nil {
		return nil, fmt.Errorf("analyzing after setup: %w", err)
	}
	if _, err := db.Exec(ctx, "SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)"); err != nil {
		return nil, fmt.Errorf("resetting statement statistics: %w", err)
	}
	logf("%s: setup took %s; running the workload", s.Name, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := s.Workload(ctx, env); err != nil {
		return nil, fmt.Errorf("scenario %s workload: %w", s.Name, err)
	}
	logf("%s: workload took %s", s.Name, time.Since(start).Round(time.Millisecond))
	return env, nil
}

// execApp runs statements in order on one connection as the application role.
func (e *Env) execApp(ctx context.Context, stmts ...string) error {
	conn, err := pgx.Connect(ctx, e.AppDSN())
	if err != nil {
		return fmt.Errorf("connecting as %s: %w", e.Role, err)
	}
	defer conn.Close(context.Background())
	return execAll(ctx, conn, stmts...)
}

// execAll runs statements in order on one connection.
func execAll(ctx context.Context, conn *pgx.Conn, stmts ...string) error {
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return nil
}

func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if len(q) > 80 {
		q = q[:80]
	}
	return q
}
