package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

const mixedLog = "../capture/testdata/mixed.log"

// TestReplayDryRun: what would be replayed, counted, in JSON; nothing
// sent (no --dsn is needed).
func TestReplayDryRun(t *testing.T) {
	code, out, errOut := run(t, "replay", "--dry-run", "--format", "json", mixedLog)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		DryRun  bool `json:"dry_run"`
		Capture struct {
			Sessions   int `json:"sessions"`
			Statements int `json:"statements"`
			Skipped    []struct {
				Reason string `json:"reason"`
				Count  int    `json:"count"`
			} `json:"not_replayable"`
		} `json:"capture"`
		Replay *json.RawMessage `json:"replay"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.DryRun || rep.Capture.Sessions != 2 || rep.Capture.Statements != 9 || len(rep.Capture.Skipped) != 4 || rep.Replay != nil {
		t.Fatalf("dry run: %s", out)
	}
	for _, f := range []string{"markdown", "html", "text"} {
		if code, out, errOut := run(t, "replay", "--dry-run", "--format", f, mixedLog); code != 0 || !strings.Contains(out, "COPY") {
			t.Fatalf("--format %s: exit %d %s %s", f, code, errOut, out)
		}
	}
}

// TestReplayBadInput: one line, exit 2, no report.
func TestReplayBadInput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.log")
	os.WriteFile(empty, []byte("2026-11-25 10:00:00.000 UTC [1] a@d LOG:  checkpoint starting: time\n"), 0o644)
	garbage := filepath.Join(t.TempDir(), "garbage.log")
	os.WriteFile(garbage, []byte("\x00\x01 not a log\nat all\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", mixedLog}, "--dsn"},
		{[]string{"replay", "--dry-run", empty}, "log_min_duration_statement = 0"},
		{[]string{"replay", "--dry-run", garbage}, "log_line_prefix"},
		{[]string{"replay", "--dry-run", "/nonexistent.log"}, "no such file"},
		{[]string{"replay", "--dry-run", "--speed", "-1", mixedLog}, "--speed"},
		{[]string{"replay", "--dsn", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", mixedLog}, "connecting"},
		{[]string{"replay", "--dry-run", "--set", "jit", mixedLog}, "NAME=VALUE"},
	} {
		code, out, errOut := run(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want one line with %q)", c.args, code, out, errOut, c.want)
		}
	}
}

// TestReplayRefusesProduction: a server that is not a lab cluster or a
// twin is refused unless --allow-writes-to names it, and nothing is
// written to it.
func TestReplayRefusesProduction(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{Config: "cluster_name = 'prod'"})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	admin.Exec(ctx, "CREATE DATABASE shop")
	conn, err := pgx.Connect(ctx, c.DSN("shop"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY, note text)")
	dsn := c.DSN("shop")
	code, out, errOut := run(t, "replay", "--dsn", dsn, mixedLog)
	if code != 2 || out != "" || !strings.Contains(errOut, "--allow-writes-to") {
		t.Fatalf("exit %d, %q, %q", code, out, errOut)
	}
	var n int
	conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n)
	if n != 0 {
		t.Fatalf("the refused replay wrote %d rows", n)
	}
	code, out, errOut = run(t, "replay", "--dsn", dsn, "--allow-writes-to", dsn, "--speed", "0", "--format", "json", mixedLog)
	if code != 0 {
		t.Fatalf("allowed replay: exit %d: %s", code, errOut)
	}
	var rep struct {
		Replay struct {
			Statements int            `json:"statements"`
			Errors     int            `json:"errors"`
			States     map[string]int `json:"error_states"`
		} `json:"replay"`
	}
	json.Unmarshal([]byte(out), &rep)
	// The INSERT of id 1 succeeds here (the capture's failed), so the
	// transaction goes on: every statement is sent.
	if rep.Replay.Statements != 9 {
		t.Fatalf("allowed replay: %s", out)
	}
}

// TestReplayTwinFix: the Channable poll captured on a server; replay
// reads that server's findings, builds a twin of the tables the log's
// statements name, and replays with and without the missing index's fix.
func TestReplayTwinFix(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{Config: "log_min_duration_statement = 0\nlog_connections = on\nlog_disconnections = on\n"})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	admin.Exec(ctx, "CREATE DATABASE queue")
	admin.Close(ctx)
	dsn := c.DSN("queue")
	setup, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, `CREATE EXTENSION pg_stat_statements;
		CREATE TABLE jobs (id bigserial PRIMARY KEY, status text NOT NULL, created timestamptz NOT NULL, payload text);
		INSERT INTO jobs (status, created, payload) SELECT 'done', now() - interval '1 day' + g * interval '10 ms', md5(g::text) FROM generate_series(1, 150000) g;
		INSERT INTO jobs (status, created, payload) SELECT 'pending', now() + g * interval '10 ms', md5(g::text) FROM generate_series(1, 400) g;
		ANALYZE jobs;`, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	setup.Close(ctx)
	from := labtest.LogSize(c)
	labtest.Clients(t, dsn, 3, func(ctx context.Context, conn *pgx.Conn, _ int) {
		for k := 0; k < 30; k++ {
			tx, _ := conn.Begin(ctx)
			var id int64
			if tx.QueryRow(ctx, `SELECT id FROM jobs WHERE status = 'pending' ORDER BY created LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id) == nil {
				tx.Exec(ctx, `UPDATE jobs SET status = 'done' WHERE id = $1`, id)
			}
			tx.Commit(ctx)
		}
	})
	log := labtest.LogSince(t, c, from, 3)
	code, out, errOut := run(t, "replay", log, "--database", "queue", "--source", dsn, "--twin", "--fix", "missing-index", "--speed", "0", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var rep struct {
		Twin       string `json:"twin"`
		Fix        string `json:"fix"`
		Comparison struct {
			Verdict string   `json:"verdict"`
			Why     []string `json:"why"`
			B       struct {
				Where string `json:"where"`
			} `json:"b"`
		} `json:"comparison"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("twin: %s; fix: %s; %s %v", rep.Twin, rep.Fix, rep.Comparison.Verdict, rep.Comparison.Why)
	if !strings.Contains(rep.Twin, "jobs") || !strings.Contains(rep.Fix, "CREATE INDEX") || rep.Comparison.Verdict != "faster" || !strings.Contains(rep.Comparison.B.Where, "lab cluster") {
		t.Fatalf("replay on the twin with the fix: %s", out)
	}
	// The page draws each shape's calls over the first run of each side,
	// and opens in headless Chromium without a complaint.
	page := filepath.Join(t.TempDir(), "replay.html")
	if code, _, errOut := run(t, "replay", log, "--database", "queue", "--source", dsn, "--twin", "--fix", "missing-index", "--speed", "0", "--replays", "1", "--format", "html", "--out", page); code != 0 {
		t.Fatalf("--format html: exit %d: %s", code, errOut)
	}
	br := testkit.OpenOffline(t, page)
	var dots, shapes int
	if err := chromedp.Run(br.Ctx,
		chromedp.Evaluate(`document.querySelectorAll('svg.over circle').length`, &dots),
		chromedp.Evaluate(`document.querySelectorAll('svg.over').length`, &shapes),
	); err != nil {
		t.Fatal(err)
	}
	// Two sides of 30 polls at least, over the shapes drawn.
	if shapes == 0 || dots < 60 {
		t.Errorf("the replay's page draws %d shapes over time with %d calls", shapes, dots)
	}
	br.Screenshot(t, "replay-twin-fix.png")
	if errs := br.Errors(); len(errs) > 0 {
		t.Errorf("the page complained: %v", errs)
	}
	// Nothing of the replay touched the source: its pending jobs are
	// those the workload left.
	conn, _ := pgx.Connect(ctx, dsn)
	defer conn.Close(ctx)
	var idx int
	conn.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = 'jobs'").Scan(&idx)
	if idx != 1 {
		t.Fatalf("the source has %d indexes on jobs: the fix was applied to it", idx)
	}
}
