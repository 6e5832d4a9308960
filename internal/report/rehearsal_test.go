package report

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/replay"
)

// sampleRehearsal is a rehearsal's report as a migration that queued
// the application gives it, with text put in its default value.
func sampleRehearsal(t *testing.T, text string) *RehearsalReport {
	t.Helper()
	m, err := migration.Read("m.sql", []byte("ALTER TABLE orders ADD COLUMN note text DEFAULT "+text+";\nCREATE INDEX ON orders (customer_id);"))
	if err != nil {
		t.Fatal(err)
	}
	calls := []replay.Call{{AtMS: 10, MS: 2}, {AtMS: 1500, BehindMS: 900, MS: 2}, {AtMS: 2500, MS: 2, Failed: true}}
	written := &rehearse.Run{Plan: rehearse.Written(m), Where: "lab", Calls: calls, Before: rehearse.Window{Calls: 50, P99: 4}, During: rehearse.Window{Calls: 80, P99: 1120},
		Steps: []*rehearse.StepResult{
			{Step: migration.Step{SQL: m.Statements[0].SQL, Of: 1, Written: true}, StartMS: 600, EndMS: 1500, MS: 900, Queued: 5, QueuedMaxMS: 900, Verdict: rehearse.Queued},
			{Step: migration.Step{SQL: m.Statements[1].SQL, Of: 2, Written: true}, StartMS: 1600, EndMS: 1700, MS: 100, Lock: "ShareLock", HeldMS: 90, Verdict: rehearse.OK},
		}}
	safePlan := rehearse.Safer(m, written, 200e6, nil)
	safe := &rehearse.Run{Plan: safePlan, Calls: calls, During: rehearse.Window{Calls: 80, P99: 17}}
	for _, st := range safePlan.Steps {
		safe.Steps = append(safe.Steps, &rehearse.StepResult{Step: st, Verdict: rehearse.OK, StartMS: 600, EndMS: 700, Attempts: 3})
	}
	return &RehearsalReport{PGMedic: "test", Migration: m, Logs: []string{"x.log"}, Capture: &capture.Stats{Sessions: 6, Statements: 100, DurationS: 5},
		Runs: []*rehearse.Run{written, safe}, MaxWaitMS: 200, FailOn: []string{"queued", "failed"}, Failing: []string{"statement 1 queued 5 sessions"},
		Source: "not written"}
}

// TestRehearsalReport: every format says the verdict, the application's
// p99 as written and with the safe form, and the safe form as a script;
// the page draws each run's calls and steps inline, with no script, and
// escapes what the migration's text holds.
func TestRehearsalReport(t *testing.T) {
	rep := sampleRehearsal(t, "'</pre><script>x</script>'")
	out := map[string]string{}
	for _, f := range Formats() {
		var b strings.Builder
		if err := Render(&b, rep, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = b.String()
	}
	for _, f := range []string{"text", "markdown", "html"} {
		for _, want := range []string{"1.12 s", "17 ms", "CREATE INDEX CONCURRENTLY", "lock_timeout", "statement 1 queued 5 sessions", "not written"} {
			if !strings.Contains(out[f], want) {
				t.Errorf("%s lacks %q:\n%s", f, want, out[f])
			}
		}
	}
	if !strings.Contains(out["json"], `"verdict": "queued"`) || !strings.Contains(out["json"], `"p99_ms": 1120`) {
		t.Errorf("json:\n%s", out["json"])
	}
	page := out["html"]
	if strings.Contains(page, "<script") || strings.Count(page, "<svg") != 2 || strings.Count(page, "<circle") != 6 || !strings.Contains(page, "Risky as written") {
		t.Errorf("page:\n%s", page)
	}
	// In the demo's page, the rehearsal is a part like the checks.
	var demo strings.Builder
	if err := HTML(&demo, &Document{PGMedic: "test", Title: "demo", Parts: []Part{{Name: "a"}, {Name: "migration", Rehearsal: rep}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(demo.String(), "<svg") < 2 || !strings.Contains(demo.String(), "Risky as written") {
		t.Errorf("the demo's page lacks the rehearsal")
	}
}

// TestUpgradeReport: the slower shape, its cause with three numbers and
// its fix, and the settings the upgrade changes, in every format.
func TestUpgradeReport(t *testing.T) {
	ch := &replay.ShapeChange{Query: "SELECT * FROM orders WHERE customer_id = $1", Verdict: replay.Slower, Calls: 40,
		A: replay.Estimate{Value: 4}, B: replay.Estimate{Value: 160}, Ratio: replay.Estimate{Value: 40, Low: 30, High: 50},
		HistEdges: []float64{1, 10, 100, 1000}, AHist: []int{40, 0, 0}, BHist: []int{0, 0, 40}}
	rep := &UpgradeReport{PGMedic: "test", From: "14.19", To: "15.20", Logs: []string{"x.log"}, MinRatio: 1.25,
		Settings:   []rehearse.SettingChange{{Name: "jit", Kind: "jit available", Toggle: "SET jit = off"}},
		Comparison: &replay.Comparison{Verdict: replay.Slower, Shapes: []*replay.ShapeChange{ch}},
		Shapes: []*rehearse.UpgradeShape{{Query: ch.Query, Change: ch, PlanOld: "Index Scan", PlanNew: "Index Scan",
			Cause: &rehearse.Cause{Setting: "jit", Toggle: "SET jit = off", OldMS: 4, NewMS: 160, FixedMS: 4.2, Explains: true, Reproduced: true}}},
		Failing: []string{"SELECT ... is 40x slower"}}
	for _, f := range Formats() {
		var b strings.Builder
		if err := Render(&b, rep, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, want := range []string{"jit", "4.2", "160"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s lacks %q:\n%s", f, want, b.String())
			}
		}
		if f != "json" && !strings.Contains(b.String(), "slower because of jit") {
			t.Errorf("%s does not say the cause:\n%s", f, b.String())
		}
	}
}
