package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// A user-written VOLATILE function can act where a rollback does not reach
// (here: resetting statistics). explain --analyze must refuse it, through a
// view or an operator too, and run it only when the user vouches for it.
func TestAnalyzeRefusesVolatileUserFunctions(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	db := freshDB(t, "sidefx")
	for _, q := range []string{
		`CREATE TABLE audit (n int)`,
		`CREATE FUNCTION public.reset_stats() RETURNS void LANGUAGE sql VOLATILE AS 'SELECT pg_stat_reset()'`,
		`CREATE FUNCTION public.twice(int) RETURNS int LANGUAGE sql STABLE AS 'SELECT $1 * 2'`,
		`CREATE VIEW resetting AS SELECT public.reset_stats()::text AS r`,
		`CREATE FUNCTION public.loud_eq(int, int) RETURNS bool LANGUAGE sql VOLATILE AS 'SELECT pg_stat_reset() IS NULL AND $1 = $2'`,
		`CREATE OPERATOR public.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = public.loud_eq)`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	resetAt := func() time.Time {
		var at time.Time
		if err := db.QueryRow(ctx, "SELECT coalesce(stats_reset, 'epoch') FROM pg_stat_database WHERE datname = current_database()").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := resetAt()
	dsn := cluster.DSN("sidefx")
	for _, c := range []struct{ query, names string }{
		{"SELECT public.reset_stats()", "public.reset_stats()"},
		{"SELECT reset_stats()", "public.reset_stats()"},
		{"SELECT * FROM resetting", "public.reset_stats()"},
		{"SELECT 1 WHERE 1 OPERATOR(public.===) 1", "public.loud_eq"},
		{"SELECT nextval('s')", "nextval"},
	} {
		code, out, errOut := runWithin(t, 10*time.Second, "explain", "--dsn", dsn, "--query", c.query, "--analyze")
		if code != 2 || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit 2 and no report", c.query, code, out)
		}
		if !strings.Contains(errOut, c.names) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%s: stderr %q does not name %s on one line", c.query, errOut, c.names)
		}
		if c.names != "nextval" && !strings.Contains(errOut, "--allow-function") {
			t.Errorf("%s: stderr %q does not name the flag that allows it", c.query, errOut)
		}
	}
	if after := resetAt(); !after.Equal(before) {
		t.Fatalf("statistics were reset (%s -> %s): a refused function ran", before, after)
	}
	// STABLE user functions and plain built-ins run.
	if code, _, errOut := run(t, "explain", "--dsn", dsn, "--query", "SELECT public.twice(n), random() FROM audit", "--analyze"); code != 0 && code != 1 {
		t.Errorf("a STABLE function was refused: exit %d %s", code, errOut)
	}
	// Vouched for, it runs (and the reset shows that it really did).
	time.Sleep(10 * time.Millisecond)
	if code, _, errOut := run(t, "explain", "--dsn", dsn, "--query", "SELECT public.reset_stats()", "--analyze", "--allow-function", "public.reset_stats"); code != 0 && code != 1 {
		t.Fatalf("--allow-function did not allow it: exit %d %s", code, errOut)
	}
	if after := resetAt(); after.Equal(before) {
		t.Errorf("with --allow-function the function should have run")
	}
}

// Absurd numbers: NaN and negative loops are refused with the line and the
// field; huge finite figures give a report that JSON can carry, with no
// int64 overflow and no SET of an impossible work_mem.
func TestExplainAbsurdNumbers(t *testing.T) {
	dir := t.TempDir()
	nan := filepath.Join(dir, "nan.txt")
	os.WriteFile(nan, []byte("Seq Scan on t  (cost=0.00..NaN rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=1)\n"), 0o644)
	neg := filepath.Join(dir, "neg.json")
	os.WriteFile(neg, []byte(`[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "t", "Actual Loops": -2}}]`), 0o644)
	for path, want := range map[string]string{nan: "line 1 (Seq Scan): total cost is NaN", neg: "loops is -2"} {
		code, out, errOut := run(t, "explain", "--format", "json", path)
		if code != 2 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming %q", path, code, out, errOut, want)
		}
	}
	huge := filepath.Join(dir, "huge.json")
	os.WriteFile(huge, []byte(`[{"Plan": {"Node Type": "Sort", "Sort Key": ["a"], "Sort Method": "external merge",
		"Sort Space Used": 1e308, "Sort Space Type": "Disk", "Total Cost": 1e308, "Plan Rows": 1e308,
		"Actual Total Time": 1e308, "Actual Rows": 1e308, "Actual Loops": 1e308, "Temp Written Blocks": 9223372036854775807,
		"Plans": [{"Node Type": "Seq Scan", "Relation Name": "t", "Actual Total Time": 1e308, "Actual Rows": 1e308,
		"Actual Loops": 1, "Rows Removed by Filter": 1e308, "Filter": "(a = 1)", "Plan Rows": 1}]},
		"Execution Time": 1e308, "Planning Time": 1e308}]`), 0o644)
	code, out, errOut := run(t, "explain", "--format", "json", huge)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("the JSON report is not JSON: %v", err)
	}
	code, out, _ = run(t, "explain", huge)
	if code != 0 && code != 1 {
		t.Fatalf("text: exit %d", code)
	}
	if strings.Contains(out, "-9223372036854776") || strings.Contains(out, "Inf") || strings.Contains(out, "GB'") || regexp.MustCompile(`[0-9]{25}`).MatchString(out) {
		t.Errorf("the text report shows an overflow, an infinity or an impossible setting:\n%s", out)
	}
}

// assertTerminalSafe fails when out holds a byte a terminal would act on:
// anything below 0x20 but the line feed, DEL, or a C1 control character.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x202e {
			t.Fatalf("%s: control character %U at byte %d:\n%s", what, r, i, out)
		}
	}
}

// Escape sequences and line breaks in relation names, aliases and plan
// strings are shown, not sent, and cannot forge report lines.
func TestTerminalInjectionInPlans(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "hostile.json")
	plan := `[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "t\u001b]0;pwned\u0007", "Schema": "public\u001b[2J",
		"Alias": "a\r\nSeq Scan on forged  (cost=0.00..1.00 rows=1 width=4)", "Filter": "(x = 'bell\u0007\u202e')",
		"Total Cost": 10, "Plan Rows": 5, "Actual Total Time": 50, "Actual Rows": 1, "Actual Loops": 1, "Rows Removed by Filter": 900000},
		"Execution Time": 50, "Planning Time": 0.1}]`
	os.WriteFile(p, []byte(plan), 0o644)
	code, out, errOut := run(t, "explain", p)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	assertTerminalSafe(t, "explain", out)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "Seq Scan on forged") {
			t.Errorf("a newline in an alias forged a line: %q", l)
		}
	}
	if !strings.Contains(out, `\x1b]0;pwned\x07`) {
		t.Errorf("the escape sequence is not shown visibly:\n%s", out)
	}
	code, out, _ = run(t, "explain", "--compare", p, p)
	if code != 0 {
		t.Fatalf("compare: exit %d", code)
	}
	assertTerminalSafe(t, "compare", out)
}

// A table whose name holds a newline and an escape sequence: check's text
// report shows it safely, and the fix SQL it prints runs as pasted.
func TestTerminalInjectionInCheck(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	db := freshDB(t, "inject")
	name := "new\nline\x1b[31m"
	q := `"` + name + `"`
	for _, s := range []string{
		"CREATE TABLE " + q + " (id int, v text) WITH (autovacuum_enabled = off)",
		"INSERT INTO " + q + " SELECT g, 'x' FROM generate_series(1, 20000) g",
		"DELETE FROM " + q + " WHERE id > 1000",
	} {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// The cumulative statistics reach pg_stat_user_tables within a second.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var dead int64
		db.QueryRow(ctx, "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables").Scan(&dead)
		if dead >= 19000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, out, errOut := run(t, "check", cluster.DSN("inject"), "--rules", "table-bloat", "--min-severity", "info", "--no-verify")
	if code != 1 {
		t.Fatalf("exit %d, want a table-bloat finding: %s\n%s", code, errOut, out)
	}
	assertTerminalSafe(t, "check", out)
	var pasted []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `U&"new\000aline\001b[31m"`) && strings.HasPrefix(strings.TrimSpace(l), "VACUUM") {
			pasted = append(pasted, strings.TrimSpace(l))
		}
	}
	if len(pasted) == 0 {
		t.Fatalf("no fix SQL with the escaped name:\n%s", out)
	}
	for _, s := range pasted {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Errorf("the printed fix does not run as pasted: %s: %v", s, err)
		}
	}
}

// Ctrl-C while EXPLAIN ANALYZE runs: pgmedic sends PostgreSQL's cancel
// request, so the backend stops working at once instead of running on
// after the client has gone; pgmedic exits 2 with one line. The proof does
// not depend on how fast the machine is: a backend whose client merely
// went away works on until it next writes to it, which for this statement
// is after an hour of work; this one stops within minutes. (The server's
// log says nothing of it: pgmedic traps its own cancel, and a superuser's
// session keeps its failures out of the log.)
func TestInterruptCancelsOnServer(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	db := admin(t, "postgres")
	// A statement that works for an hour: the series is streamed (in the
	// select list, not materialised), so it writes nothing meanwhile.
	query := "SELECT count(*) FROM (SELECT generate_series(1, 400000000000) AS g) s WHERE g % 7 = 3"
	var stderr strings.Builder
	cmd := exec.Command(testkit.Pgmedic(t), "explain", "--dsn", cluster.DSN("postgres"), "--query", query, "--analyze", "--statement-timeout", "2h")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var backend int
	testkit.WaitUntil(t, 60*time.Second, "pgmedic's EXPLAIN ANALYZE to show up as active", func() bool {
		db.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE application_name = 'pgmedic' AND state = 'active' AND query LIKE '%generate_series(1, 400000000000)%'`).Scan(&backend)
		return backend != 0
	})
	interrupted := time.Now()
	cmd.Process.Signal(os.Interrupt)
	testkit.WaitUntil(t, 2*time.Minute, "the backend to stop after Ctrl-C", func() bool {
		var state string
		err := db.QueryRow(ctx, "SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1", backend).Scan(&state)
		return err != nil || state != "active"
	})
	stopped := time.Since(interrupted)
	testkit.Ended(t, cmd, 60*time.Second, "pgmedic after Ctrl-C")
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "interrupted") {
		t.Errorf("stderr %q, want one line saying it was interrupted", stderr.String())
	}
	t.Logf("backend idle %s after SIGINT", stopped)
}

// A pg_monitor-only role reads the statistics but not the application's
// schema: every rule that could not look at something says so, with the
// GRANT that fixes it.
func TestPgMonitorOnlyRole(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	admin(t, "postgres").Exec(ctx, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'watcher') THEN CREATE ROLE watcher LOGIN IN ROLE pg_monitor; END IF; END $$")
	db := freshDB(t, "monitored",
		"CREATE EXTENSION pg_stat_statements",
		"CREATE SCHEMA shop",
		"CREATE TABLE shop.orders (id int, customer int, total numeric)",
		"INSERT INTO shop.orders SELECT g, g % 500, g FROM generate_series(1, 50000) g",
		"ANALYZE shop.orders",
		"SELECT pg_stat_statements_reset()")
	for i := 0; i < 20; i++ {
		db.Exec(ctx, "SELECT sum(total) FROM shop.orders WHERE customer = $1", i)
	}
	code, out, errOut := run(t, "check", cluster.UserDSN("watcher", "monitored"), "--format", "json", "--min-severity", "info")
	if code != ExitIncomplete && code != ExitFindings {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	assertCompleteSkips(t, out, "missing-index")
	if !strings.Contains(out, "statements pgmedic may not EXPLAIN") {
		t.Errorf("the statements it could not plan are not in unseen:\n%s", out)
	}
	if !strings.Contains(out, "GRANT USAGE ON SCHEMA shop TO watcher") {
		t.Errorf("the missing-index skip does not name the grant:\n%s", out)
	}
}

// Limits on very large databases are stated: what --max-tables and
// --max-statements leave out is listed in skipped with the flag.
func TestLimitsAreReported(t *testing.T) {
	needCluster(t)
	freshDB(t, "limited", "CREATE EXTENSION pg_stat_statements", "CREATE TABLE a (x int)", "CREATE TABLE b (x int)", "CREATE TABLE c (x int)",
		"SELECT * FROM a", "SELECT * FROM b", "SELECT * FROM c", "SELECT x FROM a WHERE x = 1")
	code, out, errOut := run(t, "check", cluster.DSN("limited"), "--format", "json", "--max-tables", "1", "--max-statements", "2", "--no-verify")
	if !checkRan(code) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"--max-tables", "--max-statements"} {
		if !strings.Contains(out, "check "+want+" ") {
			t.Errorf("no skipped entry naming %s:\n%s", want, out)
		}
	}
}

// freshDB creates an empty database (dropping one left by an earlier run)
// and returns an admin connection to it, with each statement of setup run.
func freshDB(t *testing.T, name string, setup ...string) *pgx.Conn {
	t.Helper()
	conn := admin(t, "postgres")
	conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	db := admin(t, name)
	for _, q := range setup {
		if _, err := db.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}
