package watch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/scenario"
	"github.com/pgmedic/pgmedic/internal/testkit"
	"github.com/pgmedic/pgmedic/internal/watch"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Remove()
	os.Exit(code)
}

type bundled struct {
	dir string
	inc *watch.Incident
}

// TestWatchAcrossIncidents leaves watch running across three incident
// scenarios, one after another with quiet between them and after them:
// one bundle per incident, none in quiet time, and check --from of each
// bundle finds what the scenario must.
func TestWatchAcrossIncidents(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three scenarios")
	}
	c := labtest.Cluster(t, lab.Options{})
	from := labtest.LogSize(c)
	defer labtest.NoOwnErrors(t, c, from)
	release := labtest.CPUHeavy(t) // a connection storm, first
	ctx := context.Background()
	// Each bundle is named after the triggers that opened it: those the
	// scenario's problem fires, never one set off by pgmedic's own work
	// between incidents.
	type run struct {
		name     string
		triggers []string
		env      *scenario.Env
		s        scenario.Scenario
	}
	runs := []*run{
		{name: "connection-storm", triggers: []string{watch.ConnBurst, watch.PoolWaits, watch.Saturation}},
		{name: "lock-chain", triggers: []string{watch.LockQueue, watch.ClientStall}},
		{name: "blocked-event-loop", triggers: []string{watch.ClientStall}},
	}
	var bouncer *lab.Bouncer
	for _, r := range runs {
		s, err := scenario.Find(r.name)
		if err != nil {
			t.Fatal(err)
		}
		if why := s.NotRunOn(c); why != "" {
			if testkit.InCI() {
				t.Fatalf("%s cannot run here: %s", r.name, why)
			}
			t.Skipf("%s cannot run here: %s", r.name, why)
		}
		r.s, _ = s.On(c)
		env, err := scenario.Setup(ctx, c, r.s, t.Logf)
		var missing *scenario.MissingClient
		if errors.As(err, &missing) {
			testkit.Missing(t, missing.Error(), err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if s.PgBouncer != nil {
			bouncer, err = c.StartPgBouncer(ctx, lab.BouncerOptions{PoolSize: s.PgBouncer.PoolSize, Mode: s.PgBouncer.Mode, Users: []string{scenario.AppRole}})
			if err != nil {
				testkit.Missing(t, "pgbouncer", err)
			}
			env.Bouncer = bouncer
		}
		r.env = env
	}
	// Watch reads every database's statements through the extension in
	// the database it connects to.
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	dir := t.TempDir()
	bundles := make(chan bundled, 10)
	opened := make(chan *watch.Incident, 10)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan watch.Stats, 1)
	// Before reaches back past connection-storm's quiet calls, the only
	// JIT calls that complete (the storm's are cancelled at the clients'
	// timeout): on a loaded machine the storm takes more than 5 s to
	// build after them. watch's own default is 2 minutes.
	cfg := watch.Config{Dir: dir, Interval: 500 * time.Millisecond, StatementsEvery: 5 * time.Second, Before: 30 * time.Second, After: 11 * time.Second,
		Keep: 10 * time.Minute, MaxIncident: 2 * time.Minute, Version: "test", Log: t.Logf, FailFast: true,
		Opened:  func(_ watch.Target, inc *watch.Incident) { opened <- inc },
		Bundled: func(_ watch.Target, dir string, inc *watch.Incident) { bundles <- bundled{dir, inc} }}
	go func() {
		st, err := watch.Watch(wctx, watch.Target{Name: "lab", DSN: c.DSN("postgres"), PgBouncer: bouncer.AdminDSN()}, cfg)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	var st watch.Stats
	stopped := false
	stopWatch := func() {
		if !stopped {
			stopped = true
			stop()
			st = <-done
		}
	}
	defer stopWatch()
	quiet := func(d time.Duration, when string) {
		select {
		case b := <-bundles:
			t.Fatalf("a bundle %s, in quiet time: %v", when, b.inc.Kinds())
		case <-time.After(d):
		}
	}
	quiet(4*time.Second, "before any scenario")
	got := map[string]bundled{}
	for _, r := range runs {
		// The workload runs until watch has seen it, and a few seconds
		// more: on a busy machine a storm takes longer to build.
		rctx, cancel := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() { ended <- r.env.Run(rctx, r.s) }()
		select {
		case <-opened:
			time.Sleep(3 * time.Second)
		case err := <-ended:
			cancel()
			t.Fatalf("%s ended before watch saw an incident: %v", r.name, err)
		case <-time.After(2 * time.Minute):
			cancel()
			<-ended
			t.Fatalf("%s: no incident opened in two minutes of its workload", r.name)
		}
		cancel()
		if err := <-ended; err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		select {
		case b := <-bundles:
			got[r.name] = b
			t.Logf("%s: bundle %s: %v", r.name, filepath.Base(b.dir), b.inc.Kinds())
			named := strings.SplitN(b.inc.ID, "-", 2)[1]
			for _, k := range strings.Split(named, "+") {
				if !slices.Contains(r.triggers, k) {
					t.Errorf("%s: bundle %s is named after %s, which is not the scenario's (%v)", r.name, b.inc.ID, k, r.triggers)
				}
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: no bundle a minute after the workload ended", r.name)
		}
		if r.name == "connection-storm" {
			release()
		}
		quiet(cfg.After+time.Second, "after "+r.name+"'s")
	}
	quiet(5*time.Second, "after the last scenario")
	stopWatch()
	select {
	case b := <-bundles:
		t.Fatalf("watch stopped with an incident open: %v", b.inc.Kinds())
	default:
	}
	if st.Incidents != 3 {
		t.Errorf("watch counted %d incidents, want 3", st.Incidents)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "incidents"))
	if len(entries) != 3 {
		t.Errorf("%d bundles on disk, want 3", len(entries))
	}
	for _, r := range runs {
		b := got[r.name]
		rep, err := diagnose.FromBundle(b.dir, "test", diagnose.Options{}, model.Info)
		if err != nil {
			t.Fatalf("%s: check --from: %v", r.name, err)
		}
		if t.Failed() || os.Getenv("PGMEDIC_KEEP_BUNDLES") != "" {
			keep := filepath.Join(os.TempDir(), "pgmedic-watch-"+r.name)
			os.RemoveAll(keep)
			exec.Command("cp", "-r", b.dir, keep).Run()
			t.Logf("%s: bundle kept in %s", r.name, keep)
		}
		if rep.Target.Database != r.env.DB {
			t.Errorf("%s: the bundle read database %s, not the scenario's %s", r.name, rep.Target.Database, r.env.DB)
		}
		have := map[string][]model.Finding{}
		var list []string
		for _, f := range rep.Findings {
			have[f.Rule] = append(have[f.Rule], f)
			list = append(list, f.Rule+" ("+f.Severity.String()+"): "+f.Title)
		}
		for _, e := range r.s.Expect {
			ok := false
			for _, f := range have[e.Rule] {
				ok = ok || e.Object == "" || strings.Contains(f.Object.Name, e.Object) || strings.Contains(f.Title, e.Object)
			}
			if !ok {
				t.Errorf("%s: check --from lacks %s%s; it found:\n  %s", r.name, e.Rule, map[bool]string{true: " on " + e.Object}[e.Object != ""], strings.Join(list, "\n  "))
			}
		}
		for _, e := range r.s.MustNot {
			for _, f := range have[e.Rule] {
				if f.Severity >= model.Warning {
					t.Errorf("%s: check --from found %s, which it must not: %s", r.name, e.Rule, f.Title)
				}
			}
		}
		for _, f := range rep.Findings {
			if f.Verification.Status == model.Confirmed {
				t.Errorf("%s: a finding from a bundle claims confirmed: %s", r.name, f.Title)
			}
		}
		incidentTimeline(t, r.name, b, rep, r.triggers)
	}
}

// incidentTimeline: the report of check --from a bundle holds the
// incident's timeline (the window's ticks, the triggers that named the
// bundle as they fired, the stretch judged inside the window) and its page
// opens with it, drawn in headless Chromium without a complaint.
func incidentTimeline(t *testing.T, name string, b bundled, rep *report.Report, triggers []string) {
	t.Helper()
	tl := rep.Timeline
	if tl == nil || len(tl.Ticks) < 5 {
		t.Errorf("%s: check --from has no timeline of the window: %+v", name, tl)
		return
	}
	if tl.Judged == nil || tl.Judged.From.Before(tl.From) || tl.Judged.To.After(tl.To) || !tl.Judged.To.After(tl.Judged.From) {
		t.Errorf("%s: the judged stretch %+v is not inside the window %s-%s", name, tl.Judged, tl.From, tl.To)
	}
	fired := map[string]bool{}
	for _, f := range tl.Fired {
		fired[f.Kind] = true
		if f.To.Before(f.From) || f.From.Before(tl.From) || f.To.After(tl.To) {
			t.Errorf("%s: trigger span %+v outside the window", name, f)
		}
	}
	for _, k := range b.inc.Kinds() {
		if !fired[k] {
			t.Errorf("%s: the timeline does not show %s firing (it shows %v)", name, k, tl.Fired)
		}
	}
	if name == "lock-chain" {
		head := false
		for _, tk := range tl.Ticks {
			head = head || (tk.Head != nil && tk.HeadQueue > 0)
		}
		if !head {
			t.Errorf("lock-chain: no tick of the timeline names the head of the lock queue")
		}
	}
	page := filepath.Join(t.TempDir(), name+".html")
	var buf strings.Builder
	if err := report.HTML(&buf, rep.Document()); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(page, []byte(buf.String()), 0o644)
	br := testkit.OpenOffline(t, page)
	var lanes, fires int
	var first string
	if err := chromedp.Run(br.Ctx,
		chromedp.Evaluate(`document.querySelectorAll('svg.timeline rect').length`, &lanes),
		chromedp.Evaluate(`document.querySelectorAll('svg.timeline rect.fired').length`, &fires),
		chromedp.Evaluate(`document.querySelector('main h3, section h3') ? document.querySelector('main h3, section h3').textContent : ''`, &first),
	); err != nil {
		t.Fatal(err)
	}
	if lanes == 0 || fires == 0 || first != "Timeline" {
		t.Errorf("%s: the page's timeline: %d rects for %d ticks, %d trigger spans, first heading %q", name, lanes, len(tl.Ticks), fires, first)
	}
	br.Screenshot(t, "incident-"+name+".png")
	if errs := br.Errors(); len(errs) > 0 {
		t.Errorf("%s: the page complained: %v", name, errs)
	}
}

// watchProcess starts pgmedic watch as its own process.
func watchProcess(t *testing.T, args ...string) (*exec.Cmd, *testkit.Process) {
	t.Helper()
	p := testkit.Start(t, testkit.Pgmedic(t), append([]string{"watch"}, args...)...)
	return p.Cmd, p
}

// ringTicks reads the ring's tick records, and the lines that did not
// parse.
func ringTicks(t *testing.T, dir string) (ticks []watch.Record, bad int) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "ring", "seg-*.jsonl"))
	for _, s := range segs {
		f, err := os.Open(s)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r watch.Record
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				bad++
				continue
			}
			if r.Kind == "tick" {
				ticks = append(ticks, r)
			}
		}
		f.Close()
	}
	return ticks, bad
}

// waitTicks polls the ring until it holds n ticks.
func waitTicks(t *testing.T, dir string, n int) []watch.Record {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if ticks, _ := ringTicks(t, dir); len(ticks) >= n {
			return ticks
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the ring did not reach %d ticks in a minute", n)
	return nil
}

// TestWatchProcess runs the binary as an operator would: SIGTERM stops
// it with exit 0 and the overhead printed (under 1% of one core at the
// default tick); a restart of the server is a gap in the ring, not the
// end of the recording; kill -9 loses at most the tick being made.
func TestWatchProcess(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	admin.Close(ctx)

	t.Run("SIGTERM and overhead", func(t *testing.T) {
		dir := t.TempDir()
		cmd, stderr := watchProcess(t, c.DSN("postgres"), "--dir", dir)
		waitTicks(t, dir, 20) // 20 s at the default tick of 1 s
		began := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		if err != nil {
			t.Fatalf("watch exited %v after SIGTERM: %s", err, stderr)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("watch took %s to stop", took)
		}
		m := regexp.MustCompile(`overhead: ([0-9.]+)% of one core`).FindStringSubmatch(stderr.String())
		if m == nil {
			t.Fatalf("no overhead printed: %s", stderr)
		}
		pct, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("%s", strings.TrimSpace(stderr.String()))
		if pct >= 1 {
			t.Errorf("watch used %.2f%% of one core, over the 1%% target", pct)
		}
	})

	t.Run("restart and kill -9", func(t *testing.T) {
		dir := t.TempDir()
		const interval = 200 * time.Millisecond
		cmd, stderr := watchProcess(t, c.DSN("postgres"), "--dir", dir, "--interval", interval.String())
		waitTicks(t, dir, 5)
		if err := c.Restart(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		// Ticks after the restart: watch reconnected on its own.
		deadline := time.Now().Add(time.Minute)
		for {
			ticks, _ := ringTicks(t, dir)
			if len(ticks) > 0 && ticks[len(ticks)-1].At.After(restarted.Add(interval)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no tick in the minute after the server came back: %s", stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		n := len(waitTicks(t, dir, 0)) + 10
		waitTicks(t, dir, n)
		cmd.Process.Kill() // kill -9
		cmd.Wait()
		killed := time.Now()
		ticks, bad := ringTicks(t, dir)
		if bad > 1 {
			t.Errorf("%d lines of the ring do not read after kill -9", bad)
		}
		last := ticks[len(ticks)-1].At
		t.Logf("kill -9 %s after the last tick on disk; %d ticks read back, %d lines unread", killed.Sub(last).Round(time.Millisecond), len(ticks), bad)
		// Lost: the tick under way at most. Its interval, plus the time a
		// tick's queries take on a busy machine.
		if gap := killed.Sub(last); gap > 2*interval+time.Second {
			t.Errorf("the last tick on disk is %s before the kill: more than the last tick lost", gap)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "ring", "seg-*.jsonl"))
		var gaps int
		for _, s := range segs {
			b, _ := os.ReadFile(s)
			gaps += strings.Count(string(b), `"kind":"gap"`)
		}
		if gaps != 1 {
			t.Errorf("%d gaps recorded for one restart", gaps)
		}
	})

	t.Run("fleet and metrics", func(t *testing.T) {
		dir := t.TempDir()
		fleet := filepath.Join(dir, "fleet.yaml")
		os.WriteFile(fleet, []byte(`targets:
  - name: main
    dsn: "`+c.DSN("postgres")+`"
    labels: {env: lab}
  - name: second
    dsn: "`+c.DSN("template1")+`"
  - name: gone
    dsn: "postgres://nobody@127.0.0.1:1/x?connect_timeout=1"
`), 0o600)
		bin := testkit.Pgmedic(t)
		out, err := exec.Command(bin, "watch", "--targets", fleet, "--dir", dir, "--max-connections", "2").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--shard 1/2") {
			t.Errorf("3 targets on a budget of 2: %v %s", err, out)
		}
		cmd, stderr := watchProcess(t, "--targets", fleet, "--dir", dir, "--metrics", "127.0.0.1:0", "--interval", "200ms")
		var url string
		deadline := time.Now().Add(30 * time.Second)
		for url == "" && time.Now().Before(deadline) {
			if m := regexp.MustCompile(`http://[0-9.:]+/metrics`).FindString(stderr.String()); m != "" {
				url = m
			}
			time.Sleep(20 * time.Millisecond)
		}
		if url == "" {
			t.Fatalf("no metrics address logged: %s", stderr)
		}
		var body string
		for time.Now().Before(deadline) {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				if strings.Contains(body, `pgmedic_watch_ticks_total{target="second"} `) && !strings.Contains(body, `pgmedic_watch_ticks_total{target="second"} 0`) {
					break
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, want := range []string{`pgmedic_up{target="main",env="lab"} 1`, `pgmedic_up{target="second"} 1`, `pgmedic_up{target="gone"} 0`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s:\n%s", want, body)
			}
		}
		for _, name := range []string{"main", "second"} {
			if ticks, _ := ringTicks(t, filepath.Join(dir, name)); len(ticks) == 0 {
				t.Errorf("target %s has no ring", name)
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("the fleet exited %v after SIGTERM: %s", err, stderr)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		bin := testkit.Pgmedic(t)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"watch", "postgres://nobody@127.0.0.1:1/x", "--dir", t.TempDir()}, "cannot connect"},
			{[]string{"watch", "--targets", "/nonexistent.yaml"}, "--targets"},
			{[]string{"watch", "x", "--interval", "1ms"}, "--interval"},
			{[]string{"watch", "x", "--shard", "1/2"}, "--shard needs --targets"},
			{[]string{"check", "--from", "/nonexistent"}, "no such bundle"},
			{[]string{"check", "--from", t.TempDir()}, "incident.json is missing"},
			{[]string{"check", "--fail-on", "new:warning"}, "--fail-on needs --baseline"},
		} {
			out, err := exec.Command(bin, c.args...).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
				t.Errorf("%v: exit %v, output %q; want exit 2 and one line with %q", c.args, err, out, c.want)
			}
		}
	})
}
