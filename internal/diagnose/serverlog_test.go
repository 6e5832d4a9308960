package diagnose

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestCheckReadsTheServerLog: an application in database shop prepares a
// statement with a numeric parameter against an integer column; only the
// executed plan auto_explain logged shows the cast. A check of another
// database on the same server finds it through the server's log, read
// over the connection; a role without the grant gets a skip naming it.
func TestCheckReadsTheServerLog(t *testing.T) {
	if _, err := lab.FindBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	ctx := context.Background()
	c, err := lab.Create(ctx, lab.Options{Config: `logging_collector = on
log_destination = 'jsonlog'
auto_explain.log_min_duration = 0
auto_explain.log_analyze = on`})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	exec := func(dsn string, sqls ...string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, q := range sqls {
			if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(c.DSN("postgres"), "CREATE DATABASE shop", "CREATE ROLE watcher LOGIN", "GRANT pg_monitor TO watcher")
	exec(c.DSN("shop"),
		"CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, total numeric(12,2) NOT NULL)",
		"INSERT INTO orders SELECT g, g % 5000, g % 97 FROM generate_series(1, 100000) g",
		"CREATE INDEX ON orders (customer_id)", "ANALYZE orders",
		"PREPARE by_customer(numeric) AS SELECT sum(total) FROM orders WHERE customer_id = $1",
		"EXECUTE by_customer(42)")
	// The logging collector writes in its own time: wait until the plan is
	// in the file.
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var logged bool
		err := admin.QueryRow(ctx, `SELECT coalesce(strpos(pg_read_file(pg_current_logfile('jsonlog')), 'EXECUTE by_customer(42)') > 0, false)`).Scan(&logged)
		if err == nil && logged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plan never reached the server log (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	o := valid()
	o.SampleFor, o.NoVerify, o.ServerLogBytes = 0, true, 64<<20
	rep, err := Check(ctx, c.DSN("postgres"), "test", o, model.Info)
	if err != nil {
		t.Fatal(err)
	}
	var cast *model.Finding
	for i, f := range rep.Findings {
		if f.Rule == "implicit-cast" {
			cast = &rep.Findings[i]
		}
	}
	if cast == nil || !strings.Contains(cast.Object.Name, "customer_id") {
		t.Fatalf("no implicit-cast from the server log; findings %v, skipped %+v", rep.Findings, rep.Skipped)
	}
	// A check has a connection: it never says to run with --dsn.
	if strings.Contains(cast.Verification.Reason, "--dsn") || !strings.Contains(cast.Verification.Reason, "the database checked has no column") {
		t.Errorf("a check given a DSN: %q", cast.Verification.Reason)
	}
	// Checked in its own database, the cast is judged with the catalogs:
	// the column's type and its index are named.
	rep, err = Check(ctx, c.DSN("shop"), "test", o, model.Info)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Rule == "implicit-cast" && strings.Contains(f.Verification.Reason, "did not see the catalogs") {
			t.Errorf("the plan's own database: %q", f.Verification.Reason)
		}
	}
	for _, s := range rep.Skipped {
		if s.Rule == "server log" {
			t.Errorf("superuser: %+v", s)
		}
	}

	// pg_monitor may find the file but not read it.
	rep, err = Check(ctx, c.UserDSN("watcher", "postgres"), "test", o, model.Info)
	if err != nil {
		t.Fatal(err)
	}
	var skip *model.Skip
	for i, s := range rep.Skipped {
		if s.Rule == "server log" {
			skip = &rep.Skipped[i]
		}
	}
	if skip == nil || !strings.Contains(skip.Fix, "GRANT pg_read_server_files TO watcher") {
		t.Errorf("no skip naming the grant: %+v", rep.Skipped)
	}
	for _, f := range rep.Findings {
		if f.Rule == "implicit-cast" {
			t.Errorf("found without reading the log: %s", f.Title)
		}
	}
}

// TestOwnExperimentsLeftOutOfTheLog: a check's experiments run the
// application's statement with pgmedic's own values, and auto_explain
// logs them (log_min_duration 0). A second check reads that log: none of
// pgmedic's entries reaches a rule, and the log's summary counts them as
// left out.
func TestOwnExperimentsLeftOutOfTheLog(t *testing.T) {
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{Config: `logging_collector = on
log_destination = 'jsonlog'
log_connections = on
auto_explain.log_min_duration = 0
auto_explain.log_analyze = on
auto_explain.log_nested_statements = on`})
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"CREATE EXTENSION pg_stat_statements",
		"CREATE TABLE jobs (id bigint PRIMARY KEY, state text NOT NULL, queue int NOT NULL)",
		"INSERT INTO jobs SELECT g, CASE WHEN g % 50 = 0 THEN 'new' ELSE 'done' END, g % 7 FROM generate_series(1, 50000) g",
		"ANALYZE jobs",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM jobs WHERE state = 'new' AND queue = $1", i%7); err != nil {
			t.Fatal(err)
		}
	}
	o := valid()
	o.SampleFor, o.ServerLogBytes, o.Lab = 0, 0, true
	if _, err := Check(ctx, c.DSN("postgres"), "test", o, model.Info); err != nil {
		t.Fatal(err)
	}
	var file string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var logged bool
		err := conn.QueryRow(ctx, `SELECT pg_current_logfile('jsonlog'), coalesce(strpos(pg_read_file(pg_current_logfile('jsonlog')), 'pgmedic_') > 0, false)`).Scan(&file, &logged)
		if err == nil && logged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgmedic's experiments never reached the server log (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, found, _, err := Logs(ctx, []logs.Source{logs.FileSource(filepath.Join(c.Dir, "data", file), nil)}, logs.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Events["pgmedic's own entries (left out)"] == 0 {
		t.Errorf("no entry of pgmedic's was recognised; events %v", s.Events)
	}
	for _, st := range s.Statements {
		if strings.Contains(st.Query, "pgmedic") {
			t.Errorf("pgmedic's statement kept: %s", st.Query)
		}
	}
	for _, p := range s.Plans() {
		if strings.Contains(p.Query, "pgmedic") {
			t.Errorf("pgmedic's plan kept: %s", p.Query)
		}
	}
	for _, f := range found {
		if strings.Contains(f.Title+f.Object.Name, "pgmedic") {
			t.Errorf("a finding built from pgmedic's own statement: %s", f.Title)
		}
	}
}

// TestLogPlanFindingsTheCheckOwns: a plan from the log whose statement the
// check already explained with the rule that owns its class (a LIKE prefix
// is collation-prefix's, a key hidden from pruning partition-pruning's) is
// one problem, said once; another statement's finding is kept.
func TestLogPlanFindingsTheCheckOwns(t *testing.T) {
	have := []model.Finding{
		{Rule: rules.CollationPrefixID, Object: model.Object{Kind: "statement", Name: "public.parts: SELECT ...", Fingerprint: "aa11"}},
		{Rule: rules.PartitionPruningID, Object: model.Object{Kind: "statement", Name: "public.call_records: SELECT ...", Fingerprint: "bb22"}},
	}
	found := []model.Finding{
		{Rule: rules.MissingIndexID, Object: model.Object{Kind: "plan node", Name: "SELECT ... LIKE: node #2", Fingerprint: "aa11"}},
		{Rule: rules.MissingIndexID, Object: model.Object{Kind: "plan node", Name: "SELECT ... date_trunc: node #4", Fingerprint: "bb22"}},
		{Rule: rules.MissingIndexID, Object: model.Object{Kind: "plan node", Name: "SELECT ... other: node #1", Fingerprint: "cc33"}},
		{Rule: rules.SortSpillID, Object: model.Object{Kind: "plan node", Name: "SELECT ... LIKE: node #1", Fingerprint: "aa11"}},
	}
	got := newFindings(found, have, nil)
	var kept []string
	for _, f := range got {
		kept = append(kept, f.Rule+" "+f.Object.Fingerprint)
	}
	sort.Strings(kept)
	if strings.Join(kept, ", ") != "missing-index cc33, sort-spill aa11" {
		t.Errorf("kept %v", kept)
	}
}

// TestLoggedSpillIsReRun: a report's sort spilled to disk, and only the
// server log's auto_explain plan shows it (pg_stat_statements was reset
// since). The plan's query text, with its values, is re-run with the
// role's work_mem and with more, as a spill from pg_stat_statements is.
func TestLoggedSpillIsReRun(t *testing.T) {
	if _, err := lab.FindBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	ctx := context.Background()
	c, err := lab.Create(ctx, lab.Options{Config: `logging_collector = on
log_destination = 'jsonlog'
work_mem = '64kB'
auto_explain.log_min_duration = 0
auto_explain.log_analyze = on`})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const report = "SELECT id, md5(id::text) AS tag FROM readings WHERE id > 1000 ORDER BY tag"
	for _, q := range []string{
		"CREATE TABLE readings (id bigint PRIMARY KEY, v float8)",
		"INSERT INTO readings SELECT g, random() FROM generate_series(1, 60000) g", "ANALYZE readings",
		"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", report, "SELECT pg_stat_statements_reset()",
	} {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	testkit.WaitUntil(t, 60*time.Second, "the plan reaches the server log", func() bool {
		var logged bool
		err := conn.QueryRow(ctx, `SELECT coalesce(strpos(pg_read_file(pg_current_logfile('jsonlog')), 'external merge') > 0, false)`).Scan(&logged)
		return err == nil && logged
	})
	o := valid()
	o.SampleFor, o.ServerLogBytes = 0, 64<<20
	rep, err := Check(ctx, c.DSN("postgres"), "test", o, model.Info)
	if err != nil {
		t.Fatal(err)
	}
	var spill *model.Finding
	for i, f := range rep.Findings {
		if f.Rule == rules.SortSpillID && strings.Contains(f.Object.Name, "readings") {
			spill = &rep.Findings[i]
		}
	}
	if spill == nil {
		t.Fatalf("no sort-spill from the log's plan: %v", rep.Findings)
	}
	v := spill.Verification
	if v.Before == nil || v.After == nil || !strings.Contains(v.Method, "work_mem") || (v.Status != model.Confirmed && v.Status != model.Refuted) {
		t.Errorf("the logged spill was not re-run: %+v", v)
	}
	// Checked from another database of the server, the plan (the log
	// names its database) is reported as read, not re-run where its
	// table is not.
	if _, err := conn.Exec(ctx, "CREATE DATABASE other"); err != nil {
		t.Fatal(err)
	}
	if rep, err = Check(ctx, c.DSN("other"), "test", o, model.Info); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Rule == rules.SortSpillID && (f.Verification.Before != nil || strings.Contains(f.Verification.Reason, "does not exist")) {
			t.Errorf("another database's plan was re-run here: %+v", f.Verification)
		}
	}
}
