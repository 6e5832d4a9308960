package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/report"
)

// TestCheckBaseline gates on a baseline as CI would: the same workload
// twice with nothing changed reports nothing new and exits 0; after the
// index missing-index proposed, that finding is RESOLVED and its statement
// faster; with the index dropped again, the finding is NEW, the statement
// a regression once re-run, and the gate exits 1.
func TestCheckBaseline(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	admin.Exec(ctx, "CREATE DATABASE shop")
	admin.Close(ctx)
	dsn := c.DSN("shop")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE EXTENSION pg_stat_statements;
		CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, created_at timestamptz NOT NULL, total numeric(12,2));
		INSERT INTO orders (customer_id, status, created_at, total)
			SELECT g % 5000, (ARRAY['new','paid','shipped'])[1 + g % 3], now() - g * interval '1 minute', (g % 997) / 3.0 FROM generate_series(1, 200000) g;
		ANALYZE orders;`, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	// The application's test suite: a customer's last orders, 80 times.
	workload := func() {
		t.Helper()
		if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 80; i++ {
			rows, err := conn.Query(ctx, `SELECT id, total FROM orders WHERE customer_id = $1 AND status = 'paid' ORDER BY created_at DESC LIMIT 10`, 17+i*53)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
	}
	dir := t.TempDir()
	check := func(out string, args ...string) (int, *report.Report, string) {
		t.Helper()
		path := filepath.Join(dir, out)
		code, _, errOut := run(t, append([]string{"check", dsn, "--sample", "0", "--server-log", "0", "--format", "json", "--out", path}, args...)...)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("check %v: exit %d: %s", args, code, errOut)
		}
		var rep report.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		return code, &rep, errOut
	}
	statement := func(d *baseline.Diff) *baseline.StatementChange {
		for i := range d.Statements {
			if strings.Contains(d.Statements[i].Query, "FROM orders") {
				return &d.Statements[i]
			}
		}
		return nil
	}

	workload()
	code, before, _ := check("before.json")
	var fix string
	for _, f := range before.Findings {
		if f.Rule == "missing-index" {
			fix = f.Fix.SQL
		}
	}
	if code != 1 || fix == "" {
		t.Fatalf("the first check found no missing index (exit %d): %+v", code, before.Findings)
	}

	workload()
	code, same, errOut := check("same.json", "--baseline", filepath.Join(dir, "before.json"))
	if code != 0 || same.Baseline == nil || same.Baseline.Counts.New != 0 || same.Baseline.Counts.Regressions != 0 || same.Baseline.Counts.Persisting == 0 {
		t.Fatalf("nothing changed, yet exit %d (%s): %+v", code, errOut, same.Baseline)
	}

	if _, err := conn.Exec(ctx, fix); err != nil {
		t.Fatalf("applying the fix %q: %v", fix, err)
	}
	workload()
	code, after, errOut := check("after.json", "--baseline", filepath.Join(dir, "before.json"))
	d := after.Baseline
	if code != 0 || d == nil {
		t.Fatalf("after the fix: exit %d (%s)", code, errOut)
	}
	resolved := false
	for _, ch := range d.Findings {
		resolved = resolved || (ch.Status == baseline.StatusResolved && ch.Finding.Rule == "missing-index")
	}
	st := statement(d)
	if !resolved || st == nil || st.Verdict != baseline.Faster || d.Counts.New != 0 {
		t.Fatalf("after the index: missing-index resolved %v, statement %+v, counts %+v", resolved, st, d.Counts)
	}
	t.Logf("after the index: %s", strings.Join(st.Reasons, "; "))

	// The index is dropped (a migration lost it): the gate fails.
	var index string
	if err := conn.QueryRow(ctx, `SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'orders'::regclass AND NOT indisprimary`).Scan(&index); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DROP INDEX "+index); err != nil {
		t.Fatal(err)
	}
	workload()
	code, lost, errOut := check("lost.json", "--baseline", filepath.Join(dir, "after.json"))
	st = statement(lost.Baseline)
	if code != 1 || lost.Baseline.Counts.New == 0 || st == nil || !st.Regression || !st.Measured || !strings.Contains(errOut, "against the baseline") {
		t.Fatalf("the index dropped: exit %d (%q), counts %+v, statement %+v", code, errOut, lost.Baseline.Counts, st)
	}
	t.Logf("the index dropped: %s; %s", strings.Join(st.Reasons, "; "), st.Remeasured)
	// The pull-request comment says it in Markdown.
	_, md, _ := run(t, "check", dsn, "--sample", "0", "--server-log", "0", "--no-verify", "--format", "markdown", "--baseline", filepath.Join(dir, "after.json"))
	if !strings.Contains(md, "**Against the baseline**") || !strings.Contains(md, "| NEW |") {
		t.Errorf("the Markdown report lacks the comparison:\n%s", md)
	}
	// A gate that allows new warnings still fails on the regression; one
	// that fails on nothing passes.
	if code, _, _ := run(t, "check", dsn, "--sample", "0", "--server-log", "0", "--no-verify", "--baseline", filepath.Join(dir, "after.json"), "--fail-on", "none"); code != 0 {
		t.Errorf("--fail-on none exited %d", code)
	}
}
