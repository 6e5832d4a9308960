package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// largeReport is a check of a database with 5,000 statements, 50 of them
// with plans, one of those a 2,001-node Append over partitions, 20
// findings, and 100 activity samples of 40 sessions.
func largeReport(t testing.TB) *Report {
	var txt strings.Builder
	txt.WriteString("Append  (cost=0.00..90000.00 rows=2000 width=8) (actual time=0.010..900.000 rows=2000 loops=1)\n  Buffers: shared hit=20000\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&txt, "  ->  Seq Scan on events_p%d events_%d  (cost=0.00..45.00 rows=1 width=8) (actual time=0.100..0.450 rows=1 loops=1)\n        Filter: (user_id = 42)\n        Rows Removed by Filter: 1999\n        Buffers: shared hit=10\n", i, i+1)
	}
	big, err := plan.Parse([]byte(txt.String()))
	if err != nil {
		t.Fatal(err)
	}
	small, err := plan.Parse([]byte("Index Scan using t_pkey on t  (cost=0.29..8.30 rows=1 width=8)\n  Index Cond: (id = $1)\n"))
	if err != nil {
		t.Fatal(err)
	}
	var findings []model.Finding
	for i := 0; i < 20; i++ {
		findings = append(findings, model.Finding{Rule: "missing-index", Severity: model.Warning, Title: fmt.Sprintf("finding %d", i),
			Object:       model.Object{Kind: "statement", Name: "SELECT ...", QueryID: fmt.Sprint(i)},
			Fix:          model.Fix{Summary: "index it", SQL: fmt.Sprintf("CREATE INDEX ON t%d (x);", i)},
			Verification: model.Verification{Status: model.Confirmed, Method: "x5", Before: &model.Measure{Value: 100, Unit: "ms"}, After: &model.Measure{Value: 1, Unit: "ms"}}})
	}
	r := New("bench", envelope.Target{Host: "db", Port: 5432, Database: "big", User: "app", ServerVersion: "15.20"}, time.Now(), findings, nil, 13, model.Info)
	r.Plans = map[string]*plan.Flat{}
	for i := 0; i < 5000; i++ {
		id := fmt.Sprint(i)
		row := model.StatementRow{QueryID: id, Query: fmt.Sprintf("SELECT a, b, c FROM table_%d WHERE id = $1 AND status = $2 ORDER BY created_at DESC LIMIT 20", i),
			Calls: int64(10000 - i), TotalMS: float64(50000 - i), MeanMS: 5, RowsPerCall: 1}
		if i < 50 {
			p := plan.Flatten(small)
			if i == 0 {
				p = plan.Flatten(big)
			}
			r.Plans[id], row.HasPlan = &p, true
		}
		r.Statements = append(r.Statements, row)
	}
	r.Sessions = &model.Sessions{Seconds: 10, Ticks: 100}
	for i := 0; i < 100; i++ {
		s := model.ActivitySample{At: time.Unix(int64(1e9+i), 0)}
		for k := 0; k < 40; k++ {
			s.Backends = append(s.Backends, model.Backend{PID: k, State: "active", WaitType: []string{"", "Lock", "IO", "LWLock"}[k%4], Wait: "x"})
		}
		r.Sessions.Samples = append(r.Sessions.Samples, s)
	}
	return r
}

// BenchmarkChromiumLoad: how long Chromium takes to open the largest
// report until its script has run (tables, charts) and its size.
// go test ./internal/report -run '^$' -bench ChromiumLoad -benchtime 5x
func BenchmarkChromiumLoad(b *testing.B) {
	var page bytes.Buffer
	if err := HTML(&page, largeReport(b).Document()); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "large.html")
	os.WriteFile(path, page.Bytes(), 0o644)
	br := testkit.OpenOffline(b, path)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := chromedp.Run(br.Ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/load")
	}
	b.ReportMetric(float64(page.Len())/(1<<20), "MB")
	if errs := br.Errors(); len(errs) > 0 {
		b.Errorf("the page complained: %v", errs)
	}
}
