package collect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// driverStatements are sent with the extended protocol and parameters, as
// drivers send them: pg_stat_statements keeps the client's $n.
var driverStatements = []struct {
	sql  string
	args []any
}{
	{`SELECT id, email FROM users WHERE email = $1`, []any{"x@example.com"}},
	{`UPDATE jobs SET attempts = attempts + $1 WHERE id = $2`, []any{1, 5}},
	{`SELECT c1_0.account_id FROM customer_account c1_0 WHERE c1_0.account_id = $1 AND c1_0.currency = $2`, []any{12, "EUR"}},
	{`INSERT INTO events (kind, created_at, amount, tenant) VALUES ($1, $2, $3, $4)`, []any{"x", time.Now(), 1.5, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}},
	{`SELECT id FROM jobs WHERE queue = $1 AND run_at < now() - $2::interval ORDER BY run_at LIMIT $3`, []any{"default", "5 minutes", 10}},
	{`SELECT id FROM blog_post WHERE ($1::int IS NULL OR author_id = $1) ORDER BY id LIMIT $2`, []any{1, 10}},
}

// TestCorpusReprepares runs statements other people's software writes
// (pgbench's scripts, TPC-H-style analytics with date and interval
// arithmetic, Django, SQLAlchemy, ActiveRecord, Hibernate and Prisma
// shapes, job queues, the documentation's upserts and MERGE) through a lab
// cluster, then collects the database as check does and counts the DML
// statements pg_stat_statements normalised that pgmedic could prepare and
// plan again. The figures and every failure, with its reason, are written
// to testdata/corpus/report.txt (-update); the test fails when the share
// drops below the report's.
func TestCorpusReprepares(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE corpus"); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	cfg, err := pgx.ParseConfig(c.DSN("corpus"))
	if err != nil {
		t.Fatal(err)
	}
	// The simple protocol sends the literals in the text, and
	// pg_stat_statements replaces them with $n, as it does for every
	// client that does not bind parameters.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	db, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	run := func(file string) int {
		b, err := os.ReadFile(filepath.Join("testdata", "corpus", file))
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := sqlparse.Split(string(b))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, q := range stmts {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %s: %v", file, q, err)
			}
		}
		return len(stmts)
	}
	run("schema.sql")
	if _, err := db.Exec(ctx, "CREATE EXTENSION pg_stat_statements; SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/corpus/*.sql")
	sent := 0
	for _, f := range files {
		if name := filepath.Base(f); name != "schema.sql" {
			sent += run(name)
		}
	}
	drv, err := pgx.Connect(ctx, c.DSN("corpus"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range driverStatements {
		if _, err := drv.Exec(ctx, d.sql, d.args...); err != nil {
			t.Fatalf("%s: %v", d.sql, err)
		}
		sent++
	}
	drv.Close(ctx)

	sess, err := envelope.Connect(ctx, c.DSN("corpus"), envelope.Options{StatementTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	opts := collect.Defaults()
	opts.PlanTop, opts.SampleFor = 1000, 0
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		t.Fatal(err)
	}
	dml, planned := 0, 0
	var failures []string
	for _, st := range snap.Statements {
		if !isDML(st.Query) {
			continue
		}
		dml++
		if snap.Plans[st.QueryID] != nil {
			planned++
			continue
		}
		why := snap.PlanErrors[st.QueryID]
		if why == "" {
			why = "not parsed"
		}
		failures = append(failures, fmt.Sprintf("- %s\n  %s", oneLine(st.Query, 160), why))
	}
	sort.Strings(failures)
	share := float64(planned) / float64(max(dml, 1))
	report := fmt.Sprintf("corpus: %d statements sent, %d DML statements in pg_stat_statements\nre-prepared and planned: %d (%.1f%%)\nfailures: %d\n%s\n",
		sent, dml, planned, 100*share, len(failures), strings.Join(failures, "\n"))
	path := filepath.Join("testdata", "corpus", "report.txt")
	if old, err := os.ReadFile(path); err == nil {
		if m := regexp.MustCompile(`\((\d+\.\d)%\)`).FindSubmatch(old); m != nil {
			floor, _ := strconv.ParseFloat(string(m[1]), 64)
			if 100*share+0.05 < floor {
				t.Errorf("the re-prepared share dropped from %.1f%% to %.1f%%:\n%s", floor, 100*share, report)
			}
		}
	}
	t.Log(report)
	if dml < 80 {
		t.Errorf("only %d DML statements reached pg_stat_statements", dml)
	}
	testkit.Golden(t, path, []byte(report))
}

var dmlRe = regexp.MustCompile(`(?is)^\s*(with\b.*|select|insert|update|delete|merge)\b`)

// isDML says whether a statement is one the re-preparation must handle:
// SELECT, INSERT, UPDATE, DELETE, MERGE (and WITH over them).
func isDML(q string) bool {
	if !dmlRe.MatchString(q) {
		return false
	}
	return !strings.Contains(q, "pg_stat_statements_reset")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
