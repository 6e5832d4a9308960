package report

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// evil is what a query text, an object name or a plan string may hold:
// markup that would close the data block or run script, and terminal
// escapes.
const evil = `</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">` + "\x1b[31mred\x1b[0m"

// hostile is a check report whose every text carries evil, with a
// measured finding, a statement with a plan, and sampled sessions.
func hostile(t testing.TB) *Report {
	b, err := os.ReadFile("../plan/testdata/pg15/missing-index.bad.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := plan.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	e.Plan.Filter = "(note = '" + evil + "')"
	findings := []model.Finding{
		{Rule: "jit-overhead", Severity: model.Critical, Title: "JIT compilation costs 41x the execution of " + evil,
			Object:   model.Object{Kind: "statement", Name: "SELECT " + evil, QueryID: "42", Role: "app", Database: "shop"},
			Evidence: []model.Evidence{{Label: "JIT total per call", Value: 81.49, Unit: "ms"}, {Label: "calls", Value: 16}},
			Impact:   model.Impact{Summary: "98% of the statement time", Share: 0.98},
			Fix:      model.Fix{Summary: "turn JIT off for role app", SQL: "ALTER ROLE app IN DATABASE shop SET jit = off;"},
			Verification: model.Verification{Status: model.Confirmed, Method: "EXPLAIN ANALYZE x5 each, medians",
				Before: &model.Measure{Value: 734, Unit: "ms"}, After: &model.Measure{Value: 7.34, Unit: "ms"}},
			Docs: "docs/rules/jit-overhead.md"},
		{Rule: "missing-index", Severity: model.Warning, Title: "sequential scan of " + evil + " keeps 8 of 400k rows",
			Object: model.Object{Kind: "statement", Name: "SELECT * FROM orders WHERE customer_id = $1", QueryID: "7"},
			Fix:    model.Fix{Summary: "index it", SQL: `CREATE INDEX CONCURRENTLY ON "` + evil + `" (customer_id);`},
			Verification: model.Verification{Status: model.Estimated, Method: "HypoPG planner cost",
				Before: &model.Measure{Value: 9000, Unit: "cost"}, After: &model.Measure{Value: 12, Unit: "cost"}},
			Docs: "docs/rules/missing-index.md"},
	}
	r := New("test", envelope.Target{Host: "db.internal", Port: 5432, Database: "shop", User: "app", ServerVersion: "15.20"},
		time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), findings,
		[]model.Skip{{Rule: "server log", Reason: "not read: " + evil, Fix: "GRANT pg_read_server_files TO app;"}}, 13, model.Info)
	r.ElapsedS, r.Envelope = 12.3, []string{"statement_timeout = 5s", "lock_timeout = 100ms", "default_transaction_read_only = on"}
	p := plan.Flatten(e)
	r.Statements = []model.StatementRow{
		{QueryID: "42", Query: "SELECT * FROM t WHERE note = '" + evil + "'", Calls: 16, TotalMS: 11000, MeanMS: 687.5, RowsPerCall: 1, JITShare: 0.98},
		{QueryID: "7", Query: "SELECT * FROM orders WHERE customer_id = $1", Calls: 500, TotalMS: 21600, MeanMS: 43.2, RowsPerCall: 8, HasPlan: true},
	}
	r.Plans = map[string]*plan.Flat{"7": &p}
	r.Sessions = &model.Sessions{Seconds: 2, Ticks: 5, IntervalMS: 400}
	for i := 0; i < 5; i++ {
		s := model.ActivitySample{At: time.Date(2026, 11, 22, 10, 0, i, 0, time.UTC)}
		for k := 0; k <= i; k++ {
			s.Backends = append(s.Backends, model.Backend{PID: 100 + k, State: "active", WaitType: "Lock", Wait: "transactionid", Query: evil})
		}
		s.Backends = append(s.Backends, model.Backend{PID: 99, State: "active"})
		r.Sessions.Samples = append(r.Sessions.Samples, s)
	}
	return r
}

// dataOf takes the data block back out of a page.
func dataOf(t testing.TB, page string) []byte {
	t.Helper()
	const open = `<script type="application/json" id="pgmedic-data">`
	i := strings.Index(page, open)
	if i < 0 {
		t.Fatal("no data block")
	}
	rest := page[i+len(open):]
	j := strings.Index(rest, "</script>")
	var v any
	if err := json.Unmarshal([]byte(rest[:j]), &v); err != nil {
		t.Fatalf("the data block is not JSON: %v", err)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return append(out, '\n')
}

// TestHTMLDataBlock: the page carries the report's JSON whole, the golden
// file covers it (not the markup), and no text escapes into markup.
func TestHTMLDataBlock(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, hostile(t).Document()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	golden(t, "html/check.data.json", dataOf(t, page))
	for _, bad := range []string{"<script>window.__pwned", "<img src=x", "\x1b["} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q as markup", bad)
		}
	}
	// The JSON report is the data block: --format json of the same report
	// decodes to the same value as the part.
	var js bytes.Buffer
	hostile(t).JSON(&js)
	var direct, embedded any
	json.Unmarshal(js.Bytes(), &direct)
	var doc struct {
		Parts []struct {
			Check json.RawMessage `json:"check"`
		} `json:"parts"`
	}
	json.Unmarshal(dataOf(t, page), &doc)
	json.Unmarshal(doc.Parts[0].Check, &embedded)
	a, _ := json.Marshal(direct)
	c, _ := json.Marshal(embedded)
	if string(a) != string(c) {
		t.Errorf("the data block differs from --format json")
	}
	for _, asset := range []string{"cdn", "https://", "http://"} {
		if strings.Contains(strings.ToLower(page), asset+"jsdelivr") || strings.Contains(page, `src="`+asset) {
			t.Errorf("the page points at %s", asset)
		}
	}
}

// TestMarkdown: the compact summary, golden; code blocks survive
// backticks in the fix, and markup characters in titles are escaped.
func TestMarkdown(t *testing.T) {
	r := hostile(t)
	r.Findings[1].Fix.SQL += "\n-- ``` not the end of the block"
	var b bytes.Buffer
	if err := Markdown(&b, r.Document()); err != nil {
		t.Fatal(err)
	}
	golden(t, "markdown/check.md", b.Bytes())
	// Outside code blocks (which show their text as it is) no markup
	// survives; nowhere does an escape character.
	prose := regexp.MustCompile("(?s)```+sql\n.*?\n```+\n").ReplaceAllString(b.String(), "")
	prose = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(prose, "")
	if strings.Contains(prose, "<script>") || strings.Contains(prose, "<img") || strings.Contains(b.String(), "\x1b") {
		t.Errorf("markup or escapes in the Markdown:\n%s", prose)
	}
	if !strings.Contains(b.String(), "````sql\n") {
		t.Errorf("a fix holding ``` is not in a longer fence")
	}
}

// TestHTMLInBrowser opens pages in headless Chromium with the network off:
// no console error, every finding shown, the charts drawn with data, the
// copy button copies the fix, and nothing in the data runs as script.
func TestHTMLInBrowser(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, d *Document) string {
		var b bytes.Buffer
		if err := HTML(&b, d); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, b.Bytes(), 0o644)
		return p
	}
	check := hostile(t)
	s, err := logs.Analyze(context.Background(), []logs.Source{logs.FileSource("../logs/testdata/lab/stderr.log", nil)}, logs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logsRep := &LogsReport{PGMedic: "test", Summary: s, Findings: []model.Finding{check.Findings[1]}}
	planOf := func(name string) *plan.Explain {
		b, err := os.ReadFile("../plan/testdata/pg15/" + name)
		if err != nil {
			t.Fatal(err)
		}
		e, err := plan.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	bad, good := planOf("missing-index-partitions.bad.txt"), planOf("missing-index-partitions.good.txt")
	bad.Plan.Plans[0].Filter = "(note = '" + evil + "')"
	explain := NewPlan("test", evil+".txt", bad, []model.Finding{check.Findings[1]}, nil, 12, model.Info)
	compare := NewCompare("test", "bad.txt", "good.txt", bad, good, plan.Compare(bad, good))
	// An incident's report: its timeline with a queue head whose
	// statement is hostile, triggers, a judged stretch and a gap.
	incident := hostile(t)
	incident.Incident = &IncidentHeader{Bundle: "20261122T100000Z-lock-queue", Triggers: []string{"lock-queue: " + evil}}
	incident.Timeline = sampleTimeline(evil)
	// A replay with each shape's calls over the run.
	sh := &replay.ShapeChange{Query: "SELECT '" + evil + "'", Verdict: replay.Slower, Calls: 40,
		HistEdges: []float64{0.1, 1, 10}, AHist: []int{30, 10}, BHist: []int{5, 35}}
	for i := 0; i < 40; i++ {
		sh.AOver = append(sh.AOver, replay.Call{AtMS: float32(i * 50), MS: 0.5})
		sh.BOver = append(sh.BOver, replay.Call{AtMS: float32(i * 50), MS: float32(1 + i/4), Failed: i == 39})
	}
	replayRep := &ReplayReport{PGMedic: "test", Logs: []string{evil + ".log"}, Comparison: &replay.Comparison{Verdict: replay.Slower,
		A: &replay.SideResult{Name: "as is"}, B: &replay.SideResult{Name: "candidate"}, Shapes: []*replay.ShapeChange{sh}}}
	for _, c := range []struct {
		name     string
		doc      *Document
		findings []model.Finding
		charts   int
	}{
		{"check.html", check.Document(), check.Findings, 1},
		{"incident.html", incident.Document(), incident.Findings, 1},
		{"replay.html", replayRep.Document(), nil, 0},
		{"logs.html", logsRep.Document(), logsRep.Findings, 1},
		{"explain.html", explain.Document(), explain.Findings, 0},
		{"compare.html", compare.Document(), nil, 0},
		{"rehearsal.html", sampleRehearsal(t, "'"+evil+"'").Document(), nil, 0},
		// The demo's page: a check and a rehearsal side by side.
		{"demo.html", &Document{PGMedic: "test", Title: "demo", Parts: []Part{{Name: "check", Check: check}, {Name: "rehearsal", Rehearsal: sampleRehearsal(t, "'"+evil+"'")}}}, check.Findings, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testkit.OpenOffline(t, write(c.name, c.doc))
			var text string
			var pwned bool
			var points []string
			if err := chromedp.Run(b.Ctx,
				chromedp.Evaluate(`document.body.innerText`, &text),
				chromedp.Evaluate(`window.__pwned !== undefined`, &pwned),
				chromedp.Evaluate(`Array.from(document.querySelectorAll('.chart')).filter(c => c.querySelector('canvas')).map(c => c.getAttribute('data-points'))`, &points),
			); err != nil {
				t.Fatal(err)
			}
			if pwned {
				t.Errorf("text from the report ran as script")
			}
			for _, f := range c.findings {
				if !strings.Contains(text, pageText(f.Title)) {
					t.Errorf("finding %q is not on the page", f.Title)
				}
			}
			if len(points) != c.charts {
				t.Errorf("%d charts drawn, want %d", len(points), c.charts)
			}
			for _, p := range points {
				if p == "" || p == "0" {
					t.Errorf("a chart without data (%q)", p)
				}
			}
			if c.name == "explain.html" {
				// Every node of the tree is on the page, collapsible.
				var nodes int
				if err := chromedp.Run(b.Ctx, chromedp.Evaluate(`document.querySelectorAll('details.node').length`, &nodes)); err != nil {
					t.Fatal(err)
				}
				if nodes != len(explain.Plan.Nodes) {
					t.Errorf("%d plan nodes on the page, %d in the plan", nodes, len(explain.Plan.Nodes))
				}
			}
			if (c.name == "rehearsal.html" || c.name == "demo.html") && (!strings.Contains(text, "Risky as written") || !strings.Contains(text, "CREATE INDEX CONCURRENTLY")) {
				t.Errorf("the rehearsal's verdict and safe form are not on the page")
			}
			if c.name == "incident.html" {
				// The page opens with the timeline: every lane, the
				// triggers' spans, the judged stretch, the gap, and the
				// head of the queue named (its statement shown as text).
				var lanes []string
				var fired, judged, gaps int
				var first, head string
				if err := chromedp.Run(b.Ctx,
					chromedp.Evaluate(`Array.from(document.querySelectorAll('svg.timeline text[font-weight=bold]')).map(t => t.textContent)`, &lanes),
					chromedp.Evaluate(`document.querySelectorAll('svg.timeline rect.fired').length`, &fired),
					chromedp.Evaluate(`document.querySelectorAll('svg.timeline rect.judged').length`, &judged),
					chromedp.Evaluate(`document.querySelectorAll('svg.timeline rect.gap').length`, &gaps),
					chromedp.Evaluate(`document.querySelector('main h3').textContent`, &first),
					chromedp.Evaluate(`document.querySelector('svg.timeline text.head title').textContent`, &head),
				); err != nil {
					t.Fatal(err)
				}
				if strings.Join(lanes, ",") != "sessions,lock waiters,pool waits,triggers" || fired != 3 || judged != 1 || gaps != 1 || first != "Timeline" {
					t.Errorf("timeline: lanes %v, %d trigger spans, %d judged, %d gaps, first heading %q", lanes, fired, judged, gaps, first)
				}
				if !strings.Contains(head, "pid 7") || !strings.Contains(head, "</script>") {
					t.Errorf("the head of the queue: %q", head)
				}
			}
			if c.name == "replay.html" {
				var dots int
				if err := chromedp.Run(b.Ctx, chromedp.Evaluate(`document.querySelectorAll('svg.over circle').length`, &dots)); err != nil {
					t.Fatal(err)
				}
				if dots != 80 {
					t.Errorf("%d calls drawn over the replay, want 80", dots)
				}
			}
			if c.name == "compare.html" && !strings.Contains(text, compare.Summary) {
				t.Errorf("the comparison's verdict %q is not on the page", compare.Summary)
			}
			if len(c.findings) == 0 {
				b.Screenshot(t, "report-"+strings.TrimSuffix(c.name, ".html")+".png")
				if errs := b.Errors(); len(errs) > 0 {
					t.Errorf("the page complained: %v", errs)
				}
				return
			}
			var copied string
			if err := chromedp.Run(b.Ctx,
				chromedp.Click(`button.copy`, chromedp.ByQuery),
				chromedp.WaitVisible(`button.copy[data-copied="1"]`, chromedp.ByQuery),
				chromedp.Evaluate(`navigator.clipboard.readText()`, &copied, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
			); err != nil {
				t.Fatal(err)
			}
			// Control characters are shown, not kept: what is copied is
			// what the page shows.
			if want := pageText(c.findings[0].Fix.SQL); copied != want {
				t.Errorf("copied %q, want %q", copied, want)
			}
			b.Screenshot(t, "report-"+strings.TrimSuffix(c.name, ".html")+".png")
			if errs := b.Errors(); len(errs) > 0 {
				t.Errorf("the page complained: %v", errs)
			}
		})
	}
}

// TestTwinShown: where a verification ran and what the twin copied reach
// the text, the Markdown and the page, escaped like every other text.
func TestTwinShown(t *testing.T) {
	r := hostile(t)
	r.Twin = "twin on PostgreSQL 17.10 lab cluster: copied public.<b>orders</b> (10 rows, 1 kB read from the target) in 0.4 s"
	r.Findings[0].Verification.Where = "twin (PostgreSQL 17.10 lab cluster; sample of 25% of public.orders, 10 rows)"
	var text, md, page bytes.Buffer
	r.Text(&text)
	Markdown(&md, r.Document())
	if err := HTML(&page, r.Document()); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String(), "html": page.String()} {
		if !strings.Contains(out, "sample of 25% of public.orders") || !strings.Contains(out, "copied public.") {
			t.Errorf("%s: the twin is not shown", name)
		}
	}
	if strings.Contains(page.String(), "<b>orders</b>") {
		t.Error("the twin's line is markup in the page")
	}
}

// sampleTimeline is an incident's timeline of 20 ticks: a lock queue
// behind pid 7 (its statement q) from the fifth tick, pool waits, two
// triggers, the stretch judged, and a gap of two seconds.
func sampleTimeline(q string) *model.Timeline {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var samples []model.ActivitySample
	var pools []model.PoolSample
	for i := 0; i < 20; i++ {
		at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		s := model.ActivitySample{At: at, Backends: []model.Backend{{PID: 3, State: "active"}, {PID: 4, State: "active", WaitType: "IO", Wait: "DataFileRead"}}}
		if i >= 4 {
			s.Backends = append(s.Backends, model.Backend{PID: 7, State: "idle in transaction", WaitType: "Client", Wait: "ClientRead", Query: q})
			for k := 0; k < i-2; k++ {
				s.Backends = append(s.Backends, model.Backend{PID: 20 + k, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{7}})
			}
		}
		samples = append(samples, s)
		pools = append(pools, model.PoolSample{At: at, Pools: []model.Pool{{Database: "shop", User: "app", ClWaiting: i / 3, MaxWaitMS: float64(i * 40)}}})
	}
	tl := model.NewTimeline(samples, pools)
	tl.Judged = &model.Span{From: t0.Add(2 * time.Second), To: t0.Add(8 * time.Second), Note: "judged"}
	tl.Fired = []model.FiredSpan{{Kind: "lock-queue", From: t0.Add(2 * time.Second), To: t0.Add(5 * time.Second)},
		{Kind: "pool-waits", From: t0.Add(3 * time.Second), To: t0.Add(8 * time.Second)}, {Kind: "lock-queue", From: t0.Add(7 * time.Second), To: t0.Add(9 * time.Second)}}
	tl.Gaps = []model.Span{{From: t0.Add(5500 * time.Millisecond), To: t0.Add(7500 * time.Millisecond), Note: "connection lost: " + q}}
	return tl
}
