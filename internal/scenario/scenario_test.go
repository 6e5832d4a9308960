package scenario

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestCatalogueLoads reads every folder: each has a summary, setup
// statements, expectations and a workload.
func TestCatalogueLoads(t *testing.T) {
	list, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 8 {
		t.Fatalf("%d scenarios", len(list))
	}
	for _, s := range list {
		if s.Summary == "" || len(s.Setup) == 0 || (len(s.Expect) == 0 && len(s.MustNot) == 0 && s.Rehearse == nil) {
			t.Errorf("%s: summary %q, %d setup statements, %d expectations", s.Name, s.Summary, len(s.Setup), len(s.Expect)+len(s.MustNot))
		}
	}
}

// TestBrokenFolders: what a contributor can get wrong in a folder is
// refused with the file and the reason.
func TestBrokenFolders(t *testing.T) {
	good := fstest.MapFS{
		"x/description.md":   {Data: []byte("A scenario.\n\nMore.")},
		"x/setup.sql":        {Data: []byte("CREATE TABLE t (a int); INSERT INTO t VALUES (1);")},
		"x/expect.json":      {Data: []byte(`{"must_not": [{"rule": "*"}]}`)},
		"x/workload.sql":     {Data: []byte("-- pgmedic: repeat 3\nSELECT a FROM t;")},
		"x/workload.pgbench": {Data: []byte("-- pgmedic: pgbench --client=2 --transactions=5\nSELECT 1;\n")},
	}
	s, err := load(good, "x")
	if err != nil {
		t.Fatal(err)
	}
	if s.Summary != "A scenario." || len(s.Setup) != 2 || s.Repeat != 3 || len(s.SQL) != 1 || len(s.PgbenchArgs) != 2 {
		t.Errorf("%+v", s)
	}
	for name, change := range map[string]struct{ file, data, want string }{
		"no description": {"x/description.md", "", "description.md"},
		"unknown field":  {"x/expect.json", `{"expected": []}`, "unknown field"},
		"bad setup":      {"x/setup.sql", "CREATE TABLE (", "setup.sql"},
		"empty setup":    {"x/setup.sql", "-- nothing", "no statement"},
		"bad repeat":     {"x/workload.sql", "-- pgmedic: repeat lots\nSELECT 1;", "repeat"},
		"pgbench header": {"x/workload.pgbench", "SELECT 1;", "first line"},
		"pgbench option": {"x/workload.pgbench", "-- pgmedic: pgbench --host=elsewhere\nSELECT 1;", "--host=elsewhere"},
	} {
		fsys := fstest.MapFS{}
		for k, v := range good {
			fsys[k] = v
		}
		if change.data == "" {
			delete(fsys, change.file)
		} else {
			fsys[change.file] = &fstest.MapFile{Data: []byte(change.data)}
		}
		if _, err := load(fsys, "x"); err == nil || !strings.Contains(err.Error(), change.want) {
			t.Errorf("%s: %v, want an error about %q", name, err, change.want)
		}
	}
	none := fstest.MapFS{"y/description.md": good["x/description.md"], "y/setup.sql": good["x/setup.sql"], "y/expect.json": good["x/expect.json"]}
	if _, err := load(none, "y"); err == nil || !strings.Contains(err.Error(), "no workload") {
		t.Errorf("a folder without a workload: %v", err)
	}
}

// cpuBound are the scenarios that saturate the cores on purpose, whose
// proof is a ratio of CPU times (JIT's compilation against the query's
// run) that another test saturating the cores would distort, or whose
// workload must turn around faster than a starved scheduler lets it (the
// N+1 loop's client answers within a tenth of a second, or it is a stalled
// client), or whose proof is a ratio of two plans' times where one plan
// runs parallel workers that a saturated machine starves (page-cost-cached),
// or whose many writers or readers saturate the cores themselves
// (notify-commits, subtrans-overflow):
// they take turns with the other such tests (labtest.CPUHeavy), here and in
// TestEveryVersion.
var cpuBound = map[string]bool{"connection-storm": true, "connection-burst": true, "jit-oltp": true, "asyncpg-introspection": true, "n-plus-one": true, "page-cost-cached": true, "notify-commits": true, "subtrans-overflow": true}

// TestScenarios reproduces every scenario once, in the demo's lanes (a
// throwaway cluster, a second one for the scenarios that wait, clusters of
// their own), and checks it the way the demo does: every expected finding, confirmed
// ones with two measured numbers, nothing the scenario forbids.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("reproduces every scenario")
	}
	// The three lab tests of this package each run on clusters of their
	// own and spend most of their time waiting (sampling windows, sleeping
	// clients): side by side they take the time of the longest.
	t.Parallel()
	if _, err := lab.FindBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	for module, pkg := range map[string]string{"asyncpg": "python3-asyncpg", "psycopg": "python3-psycopg"} {
		if _, err := FindPython(module, pkg); err != nil {
			testkit.Missing(t, pkg, err)
		}
	}
	if _, err := lab.FindPgBouncer(); err != nil {
		testkit.Missing(t, "pgbouncer", err)
	}
	if _, _, err := nodeClients(context.Background()); err != nil {
		testkit.Missing(t, "the lab's Node clients (node, npm)", err)
	}
	if all, err := All(); err == nil {
		for _, m := range Majors(all) {
			if _, err := lab.FindServer("", m); err != nil {
				testkit.Missing(t, fmt.Sprintf("PostgreSQL %d (pgmedic lab install scenarios)", m), err)
			}
		}
	}
	ctx := context.Background()
	c, err := lab.Create(ctx, lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy(context.Background()) })
	list, err := All()
	if err != nil {
		t.Fatal(err)
	}
	opts := diagnose.Options{Runs: 5, StatementTimeout: 5 * time.Second, CopyTimeout: 2 * time.Minute,
		MaxCopyBytes: 1 << 30, MaxTables: 200000, MaxStatements: 10000, Log: t.Logf}
	// The lanes of the demo: the scenarios that wait on a second cluster,
	// those with clusters of their own, beside the others.
	second := func() (*lab.Cluster, func(), error) {
		c2, err := lab.Create(ctx, lab.Options{})
		if err != nil {
			return nil, nil, err
		}
		return c2, func() { c2.Destroy(context.Background()) }, nil
	}
	attempt := func(t *testing.T, s Scenario, c *lab.Cluster) (problems []string) {
		if cpuBound[s.Name] {
			labtest.CPUHeavy(t)
		}
		from := labtest.LogSize(c)
		res, err := Run(ctx, c, s, "test", opts, model.Info)
		if err != nil {
			return []string{err.Error()}
		}
		if p := labtest.OwnErrorsProblem(t, c, from); p != "" {
			problems = append(problems, p)
		}
		if !res.Passed() {
			return append(problems, fmt.Sprintf("missing %v, unexpected %v%s", res.Missing, res.Unexpected, reportOf(res)))
		}
		if res.Rehearse() {
			// A rehearsal's expectations are its exit codes and figures,
			// judged by Run; it has no check report.
			t.Logf("%s: %v", s.Name, res.Metrics)
			return problems
		}
		hasWarn := false
		for _, f := range res.Report.Findings {
			hasWarn = hasWarn || f.Severity >= model.Warning
			v := f.Verification
			if v.Status == model.Confirmed && (v.Before == nil || v.After == nil) {
				problems = append(problems, fmt.Sprintf("%s confirmed without two measured numbers", f.Rule))
			}
		}
		if want := len(s.Expect) > 0; hasWarn != want {
			problems = append(problems, fmt.Sprintf("warnings=%v for a scenario expecting findings=%v%s", hasWarn, want, reportOf(res)))
		}
		if s.Name == "jit-oltp" {
			ownStatementsSafe(t, c.DSN("jit_oltp"))
		}
		return problems
	}
	var retries again
	err = RunLanes(ctx, list, c, second, func(i int, c *lab.Cluster) bool {
		t.Run(list[i].Name, func(t *testing.T) { retries.judge(t, i, attempt(t, list[i], c)) })
		return true
	})
	retries.run(t, func(t *testing.T, i int) []string { return attempt(t, list[i], c) })
	if err != nil {
		t.Fatal(err)
	}
}

// ownStatementsSafe reads the target's pg_stat_statements: pgmedic's own
// statements (tagged) are few, never paid for JIT, nor ran past its
// timeout.
func ownStatementsSafe(t *testing.T, dsn string) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n, jitFns int64
	var maxMS float64
	err = conn.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(jit_functions), 0), coalesce(max(max_exec_time), 0)
		FROM pg_stat_statements WHERE query LIKE '/* pgmedic */%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n, &jitFns, &maxMS)
	if err != nil {
		t.Fatal(err)
	}
	// The session turns its own tracking off first thing (a superuser may):
	// what is left is that one tagged block, which proves the tag arrives,
	// and nothing pgmedic ran after it.
	if n < 1 {
		t.Fatalf("no pgmedic statement recorded: the tag is not reaching pg_stat_statements")
	}
	if n > 3 {
		t.Errorf("%d pgmedic statements recorded: the session did not keep itself out of pg_stat_statements", n)
	}
	if jitFns != 0 {
		t.Errorf("pgmedic's own statements compiled %d JIT functions", jitFns)
	}
	if maxMS >= 5000 {
		t.Errorf("a pgmedic statement ran %.0f ms, past the 5s statement_timeout", maxMS)
	}
}
