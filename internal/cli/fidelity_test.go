package cli

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
	"github.com/pgmedic/pgmedic/internal/watch"
)

// TestApplicationValuesFromActivity: a client that sends its values as
// literals (the simple protocol) shows them in pg_stat_activity while it
// runs. check samples that, and the experiment re-runs the statement with
// the application's own value ('queued', a rare status) instead of the
// most common one from pg_stats ('done'), and says so.
func TestApplicationValuesFromActivity(t *testing.T) {
	needCluster(t)
	freshDB(t, "fidelity_literals",
		`CREATE TABLE jobs (id bigint PRIMARY KEY, status text NOT NULL, run_at timestamptz NOT NULL)`,
		`INSERT INTO jobs SELECT g, CASE WHEN g % 200 = 0 THEN 'queued' ELSE 'done' END, now() - g * interval '1 second' FROM generate_series(1, 200000) g`,
		`VACUUM ANALYZE jobs`,
		`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
		`CREATE EXTENSION IF NOT EXISTS hypopg`,
		`SELECT pg_stat_statements_reset()`)
	cfg, err := pgx.ParseConfig(cluster.DSN("fidelity_literals"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	app, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	const poll = `SELECT id FROM jobs WHERE status = 'queued' ORDER BY run_at LIMIT 5`
	for i := 0; i < 20; i++ {
		if _, err := app.Exec(context.Background(), poll); err != nil {
			t.Fatal(err)
		}
	}
	// Keep polling while check samples pg_stat_activity.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			app.Exec(ctx, poll)
		}
	}()
	code, out, errOut := run(t, "check", cluster.DSN("fidelity_literals"), "--format", "json", "--min-severity", "info", "--verify-indexes", "--rules", "missing-index", "--show-values")
	// Without --show-values, no report carries the application's value,
	// in any format: not the re-run's parameters, not the sampled
	// sessions' texts.
	for _, format := range []string{"json", "text", "markdown", "html"} {
		code, hidden, errOut := run(t, "check", cluster.DSN("fidelity_literals"), "--format", format, "--min-severity", "info", "--verify-indexes", "--rules", "missing-index", "--sample", "2s")
		if !checkRan(code) {
			t.Fatalf("%s: exit %d: %s", format, code, errOut)
		}
		if i := strings.Index(hidden, "queued"); i >= 0 {
			t.Errorf("the %s report carries the application's value without --show-values: ...%s...", format, hidden[max(0, i-150):min(len(hidden), i+50)])
		}
	}
	stop()
	wg.Wait()
	if !checkRan(code) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Findings []model.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Rule != "missing-index" || !strings.Contains(f.Object.Name, "jobs") {
			continue
		}
		joined := strings.Join(f.Verification.Parameters, "; ")
		if !strings.Contains(joined, "'queued' (the application's value, seen in pg_stat_activity or the server log)") {
			t.Errorf("the experiment did not use the application's value: %q", joined)
		}
		if !strings.Contains(joined, "$2 = 5 (the application's value") {
			t.Errorf("LIMIT not re-run with the application's value: %q", joined)
		}
		return
	}
	t.Fatalf("no missing-index finding on jobs:\n%s", out)
}

// TestSampledValuesHidden: a transaction left idle after writing a
// planted value, and a session queued behind it. Their statements, as
// pg_stat_activity shows them, carry the value; without --show-values no
// report format does (the findings' titles and objects, the sessions
// section), and with it the report shows what the sessions ran.
func TestSampledValuesHidden(t *testing.T) {
	needCluster(t)
	const planted = "planted-7f3a91"
	freshDB(t, "fidelity_sampled",
		`CREATE TABLE accounts (id int PRIMARY KEY, note text)`,
		`INSERT INTO accounts VALUES (1, 'x')`)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(cluster.DSN("fidelity_sampled"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	holder, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	waiter, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close(ctx)
	if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "UPDATE accounts SET note = '"+planted+"' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waiter.Exec(ctx, "UPDATE accounts SET note = 'then "+planted+"' WHERE id = 1")
	}()
	released := false
	release := func() {
		if !released {
			released = true
			holder.Exec(ctx, "ROLLBACK")
			<-done
		}
	}
	defer release()
	for _, c := range []struct {
		format string
		show   bool
	}{{"json", false}, {"text", false}, {"markdown", false}, {"html", false}, {"text", true}} {
		args := []string{"check", cluster.DSN("fidelity_sampled"), "--format", c.format, "--min-severity", "info", "--no-verify", "--sample", "2s"}
		if c.show {
			args = append(args, "--show-values")
		}
		code, out, errOut := run(t, args...)
		if !checkRan(code) {
			t.Fatalf("%s: exit %d: %s", c.format, code, errOut)
		}
		if i := strings.Index(out, planted); (i >= 0) != c.show {
			t.Errorf("%s, --show-values %v: the planted value is there: %v ...%s...", c.format, c.show, i >= 0, out[max(0, i-150):max(0, min(len(out), i+50))])
		}
		if c.format == "html" {
			sampledTimeline(t, out)
		}
	}
	// The same stall seen by watch: its bundle keeps the texts, values
	// included, for its owner only; its report and check --from's leave
	// them out.
	dir := t.TempDir()
	opened, bundled := make(chan bool, 1), make(chan string, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wcfg := watch.Config{Dir: dir, Interval: 200 * time.Millisecond, StatementsEvery: 2 * time.Second, Before: 2 * time.Second, After: 2 * time.Second,
		Keep: time.Minute, MaxIncident: time.Minute, Version: "test", Log: t.Logf,
		Opened:  func(watch.Target, *watch.Incident) { opened <- true },
		Bundled: func(_ watch.Target, dir string, _ *watch.Incident) { bundled <- dir }}
	go watch.Watch(wctx, watch.Target{Name: "planted", DSN: cluster.DSN("fidelity_sampled")}, wcfg)
	select {
	case <-opened:
	case <-time.After(time.Minute):
		t.Fatal("watch opened no incident on a transaction idle for a minute")
	}
	release()
	var bundle string
	select {
	case bundle = <-bundled:
	case <-time.After(time.Minute):
		t.Fatal("watch wrote no bundle a minute after the stall ended")
	}
	stop()
	kept := false
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		if path != dir && info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: others may read what it holds", path, info.Mode().Perm())
		}
		if b, _ := os.ReadFile(path); !d.IsDir() && strings.Contains(string(b), planted) {
			kept = kept || strings.Contains(path, "incidents")
			if strings.HasPrefix(filepath.Base(path), "report") {
				t.Errorf("watch's %s carries the planted value", filepath.Base(path))
			}
		}
		return nil
	})
	if !kept {
		t.Errorf("the bundle does not hold the sessions' texts (no planted value in %s): the test proves nothing", bundle)
	}
	for _, c := range []struct {
		format string
		show   bool
	}{{"json", false}, {"text", false}, {"markdown", false}, {"html", false}, {"text", true}} {
		args := []string{"check", "--from", bundle, "--format", c.format, "--min-severity", "info"}
		if c.show {
			args = append(args, "--show-values")
		}
		code, out, errOut := run(t, args...)
		if !checkRan(code) {
			t.Fatalf("check --from, %s: exit %d: %s", c.format, code, errOut)
		}
		if i := strings.Index(out, planted); (i >= 0) != c.show {
			t.Errorf("check --from, %s, --show-values %v: the planted value is there: %v ...%s...", c.format, c.show, i >= 0, out[max(0, i-150):max(0, min(len(out), i+50))])
		}
	}
}

// TestLogValuesHidden: a server log carrying one planted value in every
// place a log holds the application's data (a statement's literals, bind
// parameters, a unique violation's key, a failing row, an auto_explain
// plan's filter, a lock waiter's statement). No report of logs, replay
// --dry-run or check --log carries it, in any format.
func TestLogValuesHidden(t *testing.T) {
	const log = "testdata/planted.log"
	const planted, region = "planted7f3a", "PLANTREGION"
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), planted); n < 7 {
		t.Fatalf("the log holds the planted value %d times: the test proves nothing", n)
	}
	runs := [][]string{{"logs"}, {"replay", "--dry-run"}}
	if cluster != nil {
		runs = append(runs, []string{"check", cluster.DSN("postgres"), "--sample", "0", "--no-verify", "--min-severity", "info", "--log"})
	} else if testkit.InCI() {
		needCluster(t)
	}
	for _, args := range runs {
		for _, format := range []string{"json", "text", "markdown", "html"} {
			code, out, errOut := run(t, append(args, log, "--format", format)...)
			if code == ExitInput || code == ExitInternal {
				t.Fatalf("%v, %s: exit %d: %s", args[:1], format, code, errOut)
			}
			if !strings.Contains(out, "customers") && !strings.Contains(out, "orders") {
				t.Errorf("%v, %s: the report names none of the log's tables: it read nothing", args[:1], format)
			}
			for _, v := range []string{planted, region} {
				if i := strings.Index(out+errOut, v); i >= 0 {
					all := out + errOut
					t.Errorf("%v, %s: the report carries %s: ...%s...", args[:1], format, v, all[max(0, i-150):min(len(all), i+50)])
				}
			}
		}
	}
}

// sampledTimeline: check --sample's page, in headless Chromium, opens with
// the timeline of what it sampled: the session waiting for the lock, and
// the one idle in its transaction named as the head of the queue.
func sampledTimeline(t *testing.T, page string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sampled.html")
	os.WriteFile(path, []byte(page), 0o644)
	b := testkit.OpenOffline(t, path)
	var first, head string
	var bars int
	if err := chromedp.Run(b.Ctx,
		chromedp.Evaluate(`document.querySelector('main h3').textContent`, &first),
		chromedp.Evaluate(`document.querySelectorAll('svg.timeline rect title').length`, &bars),
		chromedp.Evaluate(`(document.querySelector('svg.timeline text.head title') || {}).textContent || ''`, &head),
	); err != nil {
		t.Fatal(err)
	}
	if first != "Timeline" || bars == 0 || !strings.Contains(head, "idle in transaction") || !strings.Contains(head, "1 behind it") {
		t.Errorf("check --sample's timeline: first heading %q, %d bars, head %q", first, bars, head)
	}
	b.Screenshot(t, "check-sample-timeline.png")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page complained: %v", errs)
	}
}
