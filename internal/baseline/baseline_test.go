package baseline

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

func finding(rule string, sev model.Severity, name string) model.Finding {
	f := model.Finding{Rule: rule, Severity: sev, Title: "a title with figures 12.3 ms", Object: model.Object{Kind: "table", Name: name}}
	f.ID = f.Identity()
	return f
}

func row(fp string, calls int64, mean, buffers, rows float64, plan string) model.StatementRow {
	return model.StatementRow{QueryID: fp + "-id", Fingerprint: fp, Query: "SELECT " + fp, Calls: calls, MeanMS: mean, BuffersPerCall: buffers, RowsPerCall: rows, PlanShape: plan}
}

func TestFindingStatuses(t *testing.T) {
	old := &Old{Path: "old.json", Findings: []model.Finding{
		finding("table-bloat", model.Warning, "public.jobs"),
		finding("missing-index", model.Critical, "public.orders"),
		finding("stale-statistics", model.Info, "public.events"), // below min on both sides
	}}
	cur := []model.Finding{
		finding("table-bloat", model.Critical, "public.jobs"),
		finding("idle-in-transaction", model.Warning, "pid 1"),
		finding("stale-statistics", model.Info, "public.events"),
	}
	cur[0].Title = "other words, other figures 99 ms"
	d := Compare(old, cur, nil, nil, model.Warning)
	got := map[string]string{}
	for _, c := range d.Findings {
		got[c.Finding.Rule] = c.Status + "/" + c.Was
	}
	want := map[string]string{"table-bloat": "PERSISTING/warning", "idle-in-transaction": "NEW/", "missing-index": "RESOLVED/"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if d.Counts.New != 1 || d.Counts.Persisting != 1 || d.Counts.Resolved != 1 || d.Findings[0].Status != StatusNew {
		t.Errorf("counts %+v, first %s", d.Counts, d.Findings[0].Status)
	}
}

func TestStatementChanges(t *testing.T) {
	old := &Old{Statements: []model.StatementRow{
		row("a", 100, 2, 10, 1, "Index Scan using ix on public.t"),
		row("b", 100, 40, 5000, 1, "Seq Scan on public.t"),
		row("c", 100, 2, 10, 1, "Index Scan using ix on public.t"),
		row("d", 100, 0.05, 4, 1, ""),
		row("e", 2, 1, 10, 1, ""),
	}}
	now := []model.StatementRow{
		row("a", 100, 9, 800, 1, "Seq Scan on public.t"),             // slower, more buffers, plan changed
		row("b", 100, 1.5, 12, 1, "Index Scan using ix on public.t"), // faster
		row("c", 100, 2.2, 11, 1, "Index Scan using ix on public.t"), // noise
		row("d", 100, 0.4, 4, 1, ""),                                 // 8x, but 0.35 ms: below the floor
		row("e", 200, 50, 10, 1, ""),                                 // 2 calls in the baseline: too few
	}
	d := Compare(&Old{Statements: old.Statements}, nil, now, nil, model.Warning)
	verdicts := map[string]string{}
	for _, s := range d.Statements {
		verdicts[s.Fingerprint] = s.Verdict
	}
	if len(verdicts) != 2 || verdicts["a"] != Slower || verdicts["b"] != Faster {
		t.Fatalf("verdicts %v", verdicts)
	}
	a := d.Statements[0]
	if a.Fingerprint != "b" && a.Fingerprint != "a" {
		t.Fatal(a.Fingerprint)
	}
	for _, s := range d.Statements {
		if s.Fingerprint == "a" && (len(s.Reasons) != 3 || !s.Regression || !strings.Contains(s.Reasons[2], "plan changed")) {
			t.Errorf("a: %+v", s)
		}
	}
	if d.Counts.Slower != 1 || d.Counts.Regressions != 1 || d.Counts.Faster != 1 {
		t.Errorf("counts %+v", d.Counts)
	}
}

func TestRemeasureSettlesRegressions(t *testing.T) {
	old := &Old{Statements: []model.StatementRow{row("a", 100, 2, 10, 1, ""), row("b", 100, 2, 10, 1, "Index Scan using ix on public.t")}}
	now := []model.StatementRow{row("a", 100, 6, 10, 1, ""), row("b", 100, 6, 10, 1, "Seq Scan on public.t")}
	d := Compare(old, nil, now, nil, model.Warning)
	Settle(d, func(c StatementChange) *model.Remeasured {
		if c.Fingerprint == "a" {
			// A busy minute: re-run, the statement takes what it took.
			return &model.Remeasured{Runs: 5, MedianMS: 2.1}
		}
		// The new plan is slower than the old one on the same values.
		return &model.Remeasured{Runs: 5, MedianMS: 6.2, BaselinePlanMS: 1.9, BaselineSettings: "enable_seqscan=off"}
	})
	for _, s := range d.Statements {
		switch s.Fingerprint {
		case "a":
			if s.Regression || !s.Measured || !strings.Contains(s.Note, "not a regression") {
				t.Errorf("noise called a regression: %+v", s)
			}
		case "b":
			if !s.Regression || !s.Measured {
				t.Errorf("a measured regression dropped: %+v", s)
			}
		}
	}
	if d.Counts.Regressions != 1 {
		t.Errorf("%d regressions", d.Counts.Regressions)
	}
	// Not re-run (no connection, an unsafe statement): the figures stand.
	d = Compare(old, nil, now, nil, model.Warning)
	Settle(d, func(StatementChange) *model.Remeasured { return &model.Remeasured{Why: "not re-run: an UPDATE"} })
	if d.Counts.Regressions != 2 || d.Statements[0].Measured {
		t.Errorf("unmeasured: %+v", d.Counts)
	}
}

func TestGate(t *testing.T) {
	d := &Diff{Findings: []FindingChange{
		{Status: StatusNew, Finding: model.Finding{Severity: model.Warning}},
		{Status: StatusPersisting, Finding: model.Finding{Severity: model.Critical}},
		{Status: StatusResolved, Finding: model.Finding{Severity: model.Critical}},
	}, Counts: Counts{Regressions: 1}}
	cases := []struct {
		spec string
		n    int
	}{
		{"new:warning", 1}, {"new:critical", 0}, {"persisting:critical", 1}, {"any:critical", 1},
		{"regression", 1}, {"none", 0}, {DefaultGate, 2}, {"critical", 1},
	}
	for _, c := range cases {
		g, err := ParseGate(c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		if got := g.Failures(d); len(got) != c.n {
			t.Errorf("%s: %v", c.spec, got)
		}
	}
	for _, bad := range []string{"new:urgent", "fresh:warning", "", ","} {
		if _, err := ParseGate(bad); err == nil {
			t.Errorf("--fail-on %q accepted", bad)
		}
	}
}

// TestRegressionsSayHowJudged: the gate's line never says "re-run" of a
// regression judged on the two reports' figures.
func TestRegressionsSayHowJudged(t *testing.T) {
	d := &Diff{Counts: Counts{Regressions: 2}, Statements: []StatementChange{
		{Verdict: Slower, Regression: true, Measured: true},
		{Verdict: Slower, Regression: true, Measured: false},
	}}
	g, err := ParseGate("regression")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(g.Failures(d), "; ")
	if !strings.Contains(got, "1 got slower and stayed slower when re-run") || !strings.Contains(got, "1 got slower by the two reports' figures (not re-run") {
		t.Fatalf("%q", got)
	}
}

// TestSameWorkIsNotARegression: three statements each 3x slower than in
// the baseline. The one doing the same work (its plan, buffers, rows and
// temporary blocks per call) is listed slower, not as a regression, and
// not re-run: a busy CI runner does not fail the gate. The one that now
// spills to temporary files, and the one JIT now compiles, are
// regressions on the same plan.
func TestSameWorkIsNotARegression(t *testing.T) {
	const p = "Limit(Sort(Seq Scan on public.orders))"
	old := &Old{Statements: []model.StatementRow{row("same", 80, 33, 1644, 10, p), row("spill", 80, 33, 1644, 10, p), row("jit", 80, 33, 1644, 10, p)}}
	now := []model.StatementRow{row("same", 80, 100, 1644, 10, p), row("spill", 80, 100, 1644, 10, p), row("jit", 80, 100, 1650, 10, p)}
	now[1].TempPerCall = 900
	now[2].JITShare = 0.7
	d := Compare(old, nil, now, nil, model.Warning)
	var rerun []string
	Settle(d, func(c StatementChange) *model.Remeasured {
		rerun = append(rerun, c.Fingerprint)
		return &model.Remeasured{Runs: 5, MedianMS: 120}
	})
	got := map[string]StatementChange{}
	for _, s := range d.Statements {
		got[s.Fingerprint] = s
	}
	if s := got["same"]; s.Verdict != Slower || s.Regression || !strings.Contains(s.Note, "same work") {
		t.Errorf("same work: %+v", s)
	}
	if s := got["spill"]; !s.Regression || !strings.Contains(strings.Join(s.Reasons, ";"), "temporary blocks written per call 0 -> 900") {
		t.Errorf("a new spill: %+v", s)
	}
	if s := got["jit"]; !s.Regression || !strings.Contains(strings.Join(s.Reasons, ";"), "JIT's share of its time 0% -> 70%") {
		t.Errorf("JIT now compiling: %+v", s)
	}
	if d.Counts.Slower != 3 || d.Counts.Regressions != 2 || strings.Contains(strings.Join(rerun, " "), "same") {
		t.Errorf("counts %+v, re-run %v", d.Counts, rerun)
	}
}
