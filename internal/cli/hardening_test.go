package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A user-written VOLATILE function can act where a rollback does not reach
// (here: resetting statistics). explain --analyze must refuse it, through a
// view or an operator too, and run it only when the user vouches for it.
func TestAnalyzeRefusesVolatileUserFunctions(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	conn := admin(t, "postgres")
	conn.Exec(ctx, "DROP DATABASE IF EXISTS sidefx")
	if _, err := conn.Exec(ctx, "CREATE DATABASE sidefx"); err != nil {
		t.Fatal(err)
	}
	db := admin(t, "sidefx")
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
