package cli

import (
	"context"
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
