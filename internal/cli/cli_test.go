package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/scenario"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// One throwaway cluster serves every test in this package.
var (
	cluster   *lab.Cluster
	noCluster error
)

func TestMain(m *testing.M) {
	if _, err := lab.FindBinDir(""); err != nil {
		noCluster = err
		os.Exit(m.Run()) // each test that needs the cluster skips, or fails under CI=true
	}
	c, err := lab.Create(context.Background(), lab.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test cluster:", err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Destroy(context.Background())
	testkit.Remove()
	os.Exit(code)
}

func needCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", noCluster)
	}
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	// check samples the sessions for 10s by default; these tests are not
	// about sampling (sampler_test.go is), so a second is enough.
	if len(args) > 0 && args[0] == "check" && !strings.Contains(strings.Join(args, " "), "--sample") {
		args = append(args, "--sample", "1s")
	}
	// Whatever check does on the shared cluster (sampling, a twin, a
	// profile, re-runs), its sessions must leave no ERROR or FATAL line
	// in the server's log.
	if cluster != nil && len(args) > 0 && args[0] == "check" {
		defer labtest.NoOwnErrors(t, cluster, labtest.LogSize(cluster))
	}
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// runWithin is run with a deadline: a command that has not returned by then
// fails the test instead of hanging it.
func runWithin(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(limit):
		t.Fatalf("pgmedic %v did not return within %s", args, limit)
		return 0, "", ""
	}
}

// checkRan says check ran to its report: the all-clear, findings, or
// nothing found in what it could see (exit 4: a database without
// pg_stat_statements, a role that may not see everything).
func checkRan(code int) bool {
	return code == ExitOK || code == ExitFindings || code == ExitIncomplete
}

func admin(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), cluster.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestDemo runs the demo command end to end on one scenario (the scenario
// package's tests reproduce every scenario once): its JSON, its exit code
// and the throwaway cluster it must remove.
func TestDemo(t *testing.T) {
	needCluster(t)
	if testing.Short() {
		t.Skip("the demo starts its own cluster")
	}
	code, b, errOut := runDemo(t, "healthy")
	var doc struct {
		Passed    bool `json:"passed"`
		Scenarios []struct {
			Scenario   string   `json:"scenario"`
			Missing    []string `json:"missing"`
			Unexpected []string `json:"unexpected"`
			Report     struct {
				Findings []model.Finding `json:"findings"`
			} `json:"report"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if code != 0 || !doc.Passed || len(doc.Scenarios) != 1 || doc.Scenarios[0].Scenario != "healthy" {
		t.Fatalf("exit %d passed=%v scenarios=%d: %s", code, doc.Passed, len(doc.Scenarios), b)
	}
	if dir := throwawayDir(errOut); dir == "" {
		t.Errorf("the demo did not announce its throwaway cluster: %s", errOut)
	} else if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the demo left its throwaway cluster in %s", dir)
	}
	code, _, errOut = run(t, "demo", "--scenarios", "no-such-scenario")
	if code != 2 || !strings.Contains(errOut, "known scenarios are") {
		t.Errorf("an unknown scenario: exit %d, %s", code, errOut)
	}
}

// runDemo runs the demo on scenarios with its JSON written to a file, and
// returns the exit code, the JSON and stderr.
func runDemo(t *testing.T, scenarios string) (int, []byte, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "demo.json")
	code, _, errOut := run(t, "demo", "--scenarios", scenarios, "--format", "json", "--out", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d, no JSON: %v %s", code, err, errOut)
	}
	return code, b, errOut
}

// throwawayDir reads the directory from the line announcing a throwaway
// cluster.
func throwawayDir(stderr string) string {
	const mark = "throwaway lab cluster in "
	i := strings.Index(stderr, mark)
	if i < 0 {
		return ""
	}
	return strings.Fields(stderr[i+len(mark):])[0]
}

func TestWithoutPgStatStatements(t *testing.T) {
	needCluster(t)
	conn := admin(t, "postgres")
	conn.Exec(context.Background(), "DROP DATABASE IF EXISTS nopgss")
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE nopgss TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	// Without pg_stat_statements check cannot see the statements: the
	// report says so first and the exit code is not the all-clear.
	code, out, errOut := run(t, "check", cluster.DSN("nopgss"), "--format", "json")
	if code != ExitIncomplete {
		t.Fatalf("exit %d, want %d: %s", code, ExitIncomplete, errOut)
	}
	if !strings.Contains(out, `"unseen"`) || !strings.Contains(out, `"blocks_all_clear": true`) {
		t.Errorf("the report does not say what it could not see:\n%s", out)
	}
	if !strings.Contains(out, "CREATE EXTENSION pg_stat_statements") || !strings.Contains(out, `"driver-introspection"`) {
		t.Errorf("skipped entries lack the rule or the fix:\n%s", out)
	}
	assertCompleteSkips(t, out, "driver-introspection", "missing-index", "queue-claim-race", "implicit-cast", "jit-overhead")
}

// assertCompleteSkips requires a skipped entry for each rule named, and a
// fix on every skipped entry.
func assertCompleteSkips(t *testing.T, out string, rules ...string) {
	t.Helper()
	var rep struct {
		Skipped []model.Skip `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	have := map[string]bool{}
	for _, s := range rep.Skipped {
		for _, r := range strings.Split(s.Rule, ", ") {
			have[r] = true
		}
		if s.Fix == "" {
			t.Errorf("skipped entry without a fix: %+v", s)
		}
	}
	for _, r := range rules {
		if !have[r] {
			t.Errorf("%s is not in skipped: %+v", r, rep.Skipped)
		}
	}
}

// TestHiddenStatementsWithoutPrivilege: silence is not health. An
// ordinary role sees other roles' statements in pg_stat_statements without
// their text; check must say so first, with how much of the time it could
// not see and the grant, and exit 4, not 0. With the grant the same check
// is the all-clear (the scenario is healthy).
func TestHiddenStatementsWithoutPrivilege(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	sc, _ := scenario.Find("healthy")
	env, err := scenario.Prepare(ctx, cluster, sc, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	conn := admin(t, env.DB)
	conn.Exec(ctx, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reader') THEN CREATE ROLE reader LOGIN; END IF; END $$")
	conn.Exec(ctx, "REVOKE pg_read_all_stats FROM reader")
	code, out, errOut := run(t, "check", cluster.UserDSN("reader", env.DB), "--sample", "0")
	if code != ExitIncomplete {
		t.Fatalf("exit %d, want %d (not the all-clear): %s\n%s", code, ExitIncomplete, errOut, out)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 4 || !strings.Contains(lines[2], "could not see all of this database") ||
		!strings.Contains(lines[3], "statements of other roles") || !strings.Contains(lines[3], "% of the statement time") {
		t.Errorf("the headline does not say what check could not see:\n%s", out)
	}
	if !strings.Contains(out, "GRANT pg_read_all_stats TO reader;") || !strings.Contains(out, "this is not an all-clear") {
		t.Errorf("no grant or no warning against the all-clear:\n%s", out)
	}
	if strings.Contains(out, "holds no statements of this database yet") {
		t.Errorf("hidden statements reported as none:\n%s", out)
	}
	// The quiet counterpart: a role that may read the statistics and the tables
	// (not write them) gets the all-clear on a healthy database.
	if _, err := conn.Exec(ctx, "GRANT pg_read_all_stats TO reader; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "check", cluster.UserDSN("reader", env.DB), "--sample", "0")
	if code != ExitOK || strings.Contains(out, "not an all-clear") || strings.Contains(out, "statements of other roles") {
		t.Errorf("with the grant: exit %d, %s\n%s", code, errOut, out)
	}
}

func TestConnectionErrors(t *testing.T) {
	needCluster(t)
	conn := admin(t, "postgres")
	conn.Exec(context.Background(), fmt.Sprintf("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN PASSWORD 'right'; END IF; END $$", lab.PasswordRole, lab.PasswordRole))

	// A port where nothing listens.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A server that is not PostgreSQL.
	fake, _ := net.Listen("tcp", "127.0.0.1:0")
	defer fake.Close()
	go func() {
		for {
			c, err := fake.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	// A port that accepts and never answers.
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	defer silent.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, h := range held {
					h.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	cases := []struct{ name, dsn, want string }{
		{"refused", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=5", closedPort), "connection refused"},
		{"wrong password", fmt.Sprintf("postgres://%s:wrong@127.0.0.1:%d/postgres?sslmode=disable", lab.PasswordRole, cluster.Port), "password authentication failed"},
		{"unknown database", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/nosuchdb?sslmode=disable", cluster.Port), "does not exist"},
		{"unknown host", "postgres://postgres@no-such-host.invalid:5432/postgres?connect_timeout=5", "unknown host"},
		{"not postgres", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", fake.Addr().(*net.TCPAddr).Port), "not in the PostgreSQL protocol"},
		{"silent port", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", silent.Addr().(*net.TCPAddr).Port), "did not answer the PostgreSQL protocol"},
		{"garbage dsn", "postgres://[::1", "invalid connection string"},
		// These three looped forever in the password redaction.
		{"bad port with password", "host=127.0.0.1 port=99999 password=abc", "invalid port"},
		{"unclosed quote", "password='abc", "never closed"},
		{"unclosed quote after host", "host=x password='abc", "never closed"},
		{"unencoded @ in password", "postgres://u:S3cr3t-P@ss_word@host/db", "%40"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runWithin(t, 60*time.Second, "check", c.dsn) // a bound for a hang, not a speed
			for _, secret := range []string{"abc", "S3cr3t", "ss_word", "P@ss"} {
				if strings.Contains(c.dsn, secret) && strings.Contains(errOut, secret) {
					t.Errorf("stderr shows part of the password (%s): %q", secret, errOut)
				}
			}
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if len(lines) != 1 || !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q, want one line containing %q", errOut, c.want)
			}
			if strings.Contains(errOut, "wrong") || strings.Contains(errOut, "panic") {
				t.Errorf("stderr leaks the password or panics: %q", errOut)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--format", "xml", "x"},
		{"check", "--min-severity", "loud", "x"},
		{"check", "--rules", "no-such-rule", "postgres://127.0.0.1:1/x"},
		{"check", "--runs", "2", "postgres://127.0.0.1:1/x"},
		{"lab", "run", "no-such-scenario"},
		{"lab", "run", "healthy", "--pg", "12"},
		{"lab", "up", "--pg", "19"},
		{"lab", "install", "12"},
		{"lab", "install", "seventeen"},
		{"demo", "--pg", "99"},
		{"nonsense"},
		{"check", "--bogus"},
	} {
		code, out, errOut := run(t, args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || errOut == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if code, out, _ := run(t, "--version"); code != 0 || !strings.Contains(out, Version) {
		t.Errorf("--version: %d %q", code, out)
	}
	if code, out, _ := run(t, "lab", "servers"); code != 0 || strings.Count(out, "\n") != 6 {
		t.Errorf("lab servers: one line per major version from 13 to 18: %d %q", code, out)
	}
	if code, out, _ := run(t, "lab", "list"); code != 0 || !strings.Contains(out, "jit-oltp") || !strings.Contains(out, "asyncpg-introspection") {
		t.Errorf("lab list: %d %q", code, out)
	}
}

// TestDemoPage: the demo's text report comes with pgmedic-demo.html beside
// it, which opens offline in Chromium without an error and shows every
// finding of every scenario, with the sampled activity charted.
func TestDemoPage(t *testing.T) {
	needCluster(t)
	if testing.Short() {
		t.Skip("the demo starts its own cluster")
	}
	dir := t.TempDir()
	code, out, errOut := run(t, "demo", "--scenarios", "lock-chain", "--out", filepath.Join(dir, "demo.txt"))
	page := filepath.Join(dir, "pgmedic-demo.html")
	if code != 0 || !strings.Contains(out, "HTML report: "+page) {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parts []struct {
			Name  string `json:"name"`
			Check struct {
				Findings []model.Finding `json:"findings"`
			} `json:"check"`
		} `json:"parts"`
	}
	const open = `<script type="application/json" id="pgmedic-data">`
	block := string(html)[strings.Index(string(html), open)+len(open):]
	if err := json.Unmarshal([]byte(block[:strings.Index(block, "</script>")]), &doc); err != nil {
		t.Fatalf("data block: %v", err)
	}
	if len(doc.Parts) != 1 || doc.Parts[0].Name != "lock-chain" || len(doc.Parts[0].Check.Findings) == 0 {
		t.Fatalf("parts: %+v", doc.Parts)
	}
	b := testkit.OpenOffline(t, page)
	var text string
	var points []string
	if err := chromedp.Run(b.Ctx, chromedp.Evaluate(`document.body.innerText`, &text),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('.chart')).filter(c => c.querySelector('canvas')).map(c => c.getAttribute('data-points'))`, &points)); err != nil {
		t.Fatal(err)
	}
	for _, f := range doc.Parts[0].Check.Findings {
		if !strings.Contains(text, strings.Join(strings.Fields(f.Title), " ")) {
			t.Errorf("finding %q is not on the page", f.Title)
		}
	}
	if len(points) != 1 || points[0] == "0" {
		t.Errorf("activity chart: %v", points)
	}
	b.Screenshot(t, "demo-lock-chain.png")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page complained: %v", errs)
	}
}

// TestReadmePicture takes the README's picture of a report: the demo's
// page of the incident pgmedic began with (JIT compiling millisecond
// queries), at its finding and the experiment that confirmed it. With
// -update it is written to docs/img/report.png.
func TestReadmePicture(t *testing.T) {
	needCluster(t)
	if testing.Short() {
		t.Skip("the demo starts its own cluster")
	}
	// jit-oltp's proof is a ratio of CPU times: it takes turns with the
	// other tests that saturate the cores, in this binary and the
	// scenario package's (a run beside them failed its expectation).
	labtest.CPUHeavy(t)
	dir := t.TempDir()
	code, _, errOut := run(t, "demo", "--scenarios", "jit-oltp", "--out", filepath.Join(dir, "demo.txt"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b := testkit.OpenOffline(t, filepath.Join(dir, "pgmedic-demo.html"))
	var verified string
	if err := chromedp.Run(b.Ctx,
		chromedp.Evaluate(`(() => { const f = document.querySelector('.finding'); window.scrollTo(0, f.getBoundingClientRect().top + window.scrollY - 48); return f.innerText })()`, &verified)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(verified, "jit") || !strings.Contains(strings.ToLower(verified), "confirmed") {
		t.Fatalf("the page's first finding is not the confirmed JIT finding: %s", verified)
	}
	testkit.Picture(t, "../../docs/img/report.png", b.Viewport(t))
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page complained: %v", errs)
	}
}

// TestDemoWithoutAClient: a machine without Node.js still runs every other
// scenario; the one that needs Node is listed as not run with the command
// that installs it, and the demo exits 2 with one line saying so.
func TestDemoWithoutAClient(t *testing.T) {
	needCluster(t)
	if testing.Short() {
		t.Skip("the demo starts its own cluster")
	}
	t.Setenv("PATH", t.TempDir()) // no node, no npm (the lab finds PostgreSQL without PATH)
	demoWithOneNotRun(t, "blocked-event-loop", "apt-get install nodejs npm")
}

// demoWithOneNotRun runs the demo on healthy and a scenario that cannot run
// here: healthy runs to its end, the other is listed as not run (not
// skipped) with the command that installs what it lacks, the demo exits 2
// and its last line on stderr names the scenario.
func demoWithOneNotRun(t *testing.T, name, install string) {
	t.Helper()
	code, b, errOut := runDemo(t, "healthy,"+name)
	var doc struct {
		Passed    bool `json:"passed"`
		Scenarios []struct {
			Scenario string   `json:"scenario"`
			NotRun   string   `json:"not_run"`
			Skipped  string   `json:"skipped"`
			Missing  []string `json:"missing"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if code != 2 || doc.Passed || len(doc.Scenarios) != 2 {
		t.Fatalf("exit %d, passed %v, %d scenarios: %s", code, doc.Passed, len(doc.Scenarios), b)
	}
	for _, s := range doc.Scenarios {
		switch s.Scenario {
		case "healthy":
			if s.NotRun != "" || s.Skipped != "" || len(s.Missing) > 0 {
				t.Errorf("healthy did not run to the end: %+v", s)
			}
		case name:
			if !strings.Contains(s.NotRun, install) || s.Skipped != "" {
				t.Errorf("%s: not_run %q (skipped %q) does not say what to install", name, s.NotRun, s.Skipped)
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, name) || !strings.Contains(last, "could not run") || strings.Contains(errOut, "internal error") {
		t.Errorf("stderr %q, want a last line naming the scenario that could not run", errOut)
	}
}

// TestDemoWithoutAMajor: where the PostgreSQL major an upgrade rehearsal
// starts from was never installed, the scenario is listed as not run with
// the command that installs it, the others run, and the demo exits 2.
func TestDemoWithoutAMajor(t *testing.T) {
	needCluster(t)
	if testing.Short() {
		t.Skip("the demo starts its own cluster")
	}
	t.Setenv("PGMEDIC_PG_CACHE", t.TempDir()) // hides the builds pgmedic lab install fetched
	if s, err := lab.FindServer("", 14); err == nil {
		t.Skipf("PostgreSQL 14 is installed outside pgmedic's cache (%s): it cannot be made unavailable here", s.BinDir)
	}
	demoWithOneNotRun(t, "upgrade-quiet", "pgmedic lab install 14")
}

// TestBinaryCarriesItsClients: a pgmedic binary alone in an empty
// directory (no source tree, no node_modules) runs the scenario whose
// client is Node: it installs the clients it carries into its cache on
// first use, and finds them there afterwards.
func TestBinaryCarriesItsClients(t *testing.T) {
	needCluster(t)
	if testing.Short() {
		t.Skip("starts its own cluster")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		testkit.Missing(t, "Node.js with npm", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pgmedic")
	src, err := os.ReadFile(testkit.Pgmedic(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	for i, want := range []string{"installs", "finds"} {
		cmd := exec.Command(bin, "lab", "run", "blocked-event-loop", "--format", "json")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PGMEDIC_NODE_CLIENTS="+cache)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("run %d (%s the clients): %v %s", i+1, want, err, stderr)
		}
		if !strings.Contains(string(out), `"client-stall"`) {
			t.Errorf("run %d: no client-stall finding", i+1)
		}
	}
	installed, _ := filepath.Glob(filepath.Join(cache, "*", "node_modules", "piscina"))
	if len(installed) != 1 {
		t.Errorf("the clients were installed %d times in %s", len(installed), cache)
	}
}

// TestRulesMeanTheSameEverywhere: --rules selects from one table in every
// command. A rule that reads the log (checkpoint-pressure) is accepted by
// check and logs and selects only itself in logs; an unknown id is the
// same one-line usage error in check, explain, logs and profile.
func TestRulesMeanTheSameEverywhere(t *testing.T) {
	log := "../logs/testdata/lab/maintenance.log"
	code, out, errOut := run(t, "logs", log, "--rules", "checkpoint-pressure", "--format", "json")
	if code != ExitOK {
		t.Fatalf("logs --rules checkpoint-pressure: exit %d: %s", code, errOut)
	}
	var rep struct {
		Findings []model.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 {
		t.Fatal("logs --rules checkpoint-pressure found nothing on the maintenance log")
	}
	for _, f := range rep.Findings {
		if f.Rule != "checkpoint-pressure" {
			t.Errorf("--rules checkpoint-pressure let %s through", f.Rule)
		}
	}
	if code, _, errOut := run(t, "logs", log, "--rules", "table-bloat"); code != ExitOK {
		t.Errorf("logs refused a rule that reads the log: %s", errOut)
	}
	var first string
	for _, args := range [][]string{
		{"check", "--rules", "no-such-rule", "postgres://127.0.0.1:1/x"},
		{"explain", "--rules", "no-such-rule", "../plan/testdata/pg15/sort-spill.bad.txt"},
		{"logs", "--rules", "no-such-rule", log},
		{"profile", "--rules", "no-such-rule", "--pid", "1"},
	} {
		code, out, errOut := run(t, args...)
		if code != ExitInput || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, `unknown rule "no-such-rule"`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if first == "" {
			first = errOut
		} else if errOut != first {
			t.Errorf("%v says %q, check says %q", args, errOut, first)
		}
	}
}

// TestCommandLines: the root's help lists each command by the name and
// line in the commands table, without building it: they must be the
// command's own.
func TestCommandLines(t *testing.T) {
	for _, c := range commands {
		cmd := c.build(strings.NewReader(""), io.Discard, io.Discard)
		if cmd.Name() != c.name || cmd.Short != c.short {
			t.Errorf("the table says %q %q; the command is %q %q", c.name, c.short, cmd.Name(), cmd.Short)
		}
	}
}
