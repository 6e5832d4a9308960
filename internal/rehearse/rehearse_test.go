package rehearse

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/replay"
)

// TestJudge: calls are placed by when they were due, so a reader held up
// behind a queued ALTER counts its wait even when the replay sent it late;
// a step's verdict comes from the longest wait behind it.
func TestJudge(t *testing.T) {
	w := &capture.Workload{Shapes: []capture.Shape{{Query: "SELECT 1"}, {Query: "SELECT 2"}}}
	var calls []replay.Call
	for at := 0; at < 3000; at += 10 {
		c := replay.Call{Shape: 0, AtMS: float32(at), MS: 2}
		if at >= 1000 && at < 2000 {
			// Due at 'at', sent when the lock queue cleared at 2000.
			c.AtMS, c.BehindMS = 2000, float32(2000-at)
		}
		calls = append(calls, c)
	}
	calls = append(calls, replay.Call{Shape: 1, AtMS: 500, MS: 3, Failed: true})
	r := &Run{Steps: []*StepResult{
		{Step: migration.Step{Of: 1}, StartMS: 1000, EndMS: 2000, QueuedMaxMS: 1000},
		{Step: migration.Step{Of: 2}, StartMS: 2100, EndMS: 2200, QueuedMaxMS: 40},
		{Step: migration.Step{Of: 3}, StartMS: 2300, EndMS: 2400, Error: "boom"},
	}}
	judge(r, Options{Workload: w, MaxWait: 200 * time.Millisecond}, &replay.Result{Timeline: calls}, 2400)
	if r.Before.Calls != 101 || r.Before.Errors != 1 || r.Before.P99 > 3 {
		t.Errorf("before: %+v", r.Before)
	}
	if r.During.P99 < 900 || r.Steps[0].During.P99 < 900 {
		t.Errorf("the readers held up behind the first step must show their wait: during %+v, step %+v", r.During, r.Steps[0].During)
	}
	if got := []string{r.Steps[0].Verdict, r.Steps[1].Verdict, r.Steps[2].Verdict}; strings.Join(got, ",") != "queued,ok,failed" {
		t.Errorf("verdicts %v", got)
	}
	if r.Worst() != Failed {
		t.Errorf("worst %q", r.Worst())
	}
	if len(r.Shapes) != 1 || r.Shapes[0].Query != "SELECT 1" {
		t.Errorf("shapes during the migration: %+v", r.Shapes)
	}
}

// TestSaferPlan: the lock_timeout is twice the p99 before, bounded by 20 ms
// and half of --max-wait; the retry budget three times the longest wait
// as written, at least 10 s; the backfill is chosen when the run saw a
// rewrite.
func TestSaferPlan(t *testing.T) {
	m, err := migration.Read("m.sql", []byte("ALTER TABLE t ADD COLUMN c int DEFAULT f(); CREATE INDEX ON t (a);"))
	if err != nil {
		t.Fatal(err)
	}
	written := &Run{Before: Window{Calls: 100, P99: 30}, Steps: []*StepResult{{Step: migration.Step{Of: 1}, Rewrote: true, WaitedMS: 6000}, {Step: migration.Step{Of: 2}}}}
	p := Safer(m, written, 200*time.Millisecond, nil)
	if p.LockTimeout != 60*time.Millisecond || p.Pause != 120*time.Millisecond || p.Budget != 18*time.Second {
		t.Errorf("schedule %s %s %s", p.LockTimeout, p.Pause, p.Budget)
	}
	var kinds []string
	for _, s := range p.Steps {
		switch {
		case s.Batches:
			kinds = append(kinds, "batches")
		case s.Retry:
			kinds = append(kinds, "retry")
		default:
			kinds = append(kinds, strings.Fields(s.SQL)[0])
		}
	}
	if strings.Join(kinds, " ") != "retry retry batches CREATE" {
		t.Errorf("steps %v", kinds)
	}
	written.Before.P99 = 500
	if p := Safer(m, written, 200*time.Millisecond, nil); p.LockTimeout != 100*time.Millisecond {
		t.Errorf("lock_timeout %s, want half of --max-wait", p.LockTimeout)
	}
	if p := Safer(m, nil, 200*time.Millisecond, nil); p.LockTimeout != 100*time.Millisecond || p.Budget != 10*time.Second || !strings.Contains(p.Why, "no traffic") {
		t.Errorf("without a run: %s %s %q", p.LockTimeout, p.Budget, p.Why)
	}
	if !NeedsSafer(m, nil) {
		t.Error("a migration with an ADD COLUMN that rewrites needs a safe form")
	}
	quiet, _ := migration.Read("q.sql", []byte("CREATE TABLE x (a int); CREATE INDEX CONCURRENTLY ON t (a);"))
	if NeedsSafer(quiet, &Run{Steps: []*StepResult{{Verdict: OK}}}) {
		t.Error("a migration with nothing risky needs no safe form")
	}
}

func TestRepeats(t *testing.T) {
	for _, c := range []struct {
		d          time.Duration
		statements int
		want       int
	}{{5 * time.Second, 2000, 24}, {time.Millisecond, 10, 120}, {10 * time.Minute, 10, 1}, {5 * time.Second, 500_000, 2}} {
		if got := repeats(&capture.Workload{Duration: c.d, Statements: c.statements}); got != c.want {
			t.Errorf("%s, %d statements: %d repeats, want %d", c.d, c.statements, got, c.want)
		}
	}
}

func TestSameRelation(t *testing.T) {
	for _, c := range []struct {
		regclass, quoted string
		want             bool
	}{{"orders", "orders", true}, {"shop.orders", `"shop"."orders"`, true}, {`"Orders"`, `"Orders"`, true}, {"orders_pkey", "orders", false}, {"orders", "", false}} {
		if got := sameRelation(c.regclass, c.quoted); got != c.want {
			t.Errorf("%q %q: %v", c.regclass, c.quoted, got)
		}
	}
}

// TestChanges: a default that changed is listed only where the source
// leaves it at its default, with the old default as the toggle; a setting
// the source sets that the new major lacks is removed; a planner method
// new in the new major is toggled off; JIT where only the new build has
// it is toggled with jit = off.
func TestChanges(t *testing.T) {
	tuning := "Query Tuning / Planner Method Configuration"
	a := &Server{Settings: map[string]Setting{
		"jit":                               {Boot: "on", Value: "on", Category: "Query Tuning / Other Planner Options", Context: "user", Type: "bool"},
		"hash_mem_multiplier":               {Boot: "1", Value: "1", Category: "Resource Usage / Memory", Context: "user", Type: "real"},
		"random_page_cost":                  {Boot: "4", Value: "4", Category: "Query Tuning / Planner Cost Constants", Context: "user", Type: "real"},
		"vacuum_cleanup_index_scale_factor": {Boot: "0.1", Category: "Client Connection Defaults", Context: "user", Type: "real"},
	}}
	b := &Server{JIT: true, Settings: map[string]Setting{
		"jit":                 {Boot: "on", Reset: "on", Value: "off", Category: "Query Tuning / Other Planner Options", Context: "user", Type: "bool"},
		"jit_above_cost":      {Boot: "100000", Value: "100000", Category: "Query Tuning / Planner Cost Constants", Context: "user", Type: "real"},
		"hash_mem_multiplier": {Boot: "2", Value: "2", Category: "Resource Usage / Memory", Context: "user", Type: "real"},
		"random_page_cost":    {Boot: "4", Value: "4", Category: "Query Tuning / Planner Cost Constants", Context: "user", Type: "real"},
		"enable_memoize":      {Boot: "on", Value: "on", Category: tuning, Context: "user", Type: "bool"},
	}}
	src := &Server{Settings: map[string]Setting{
		"hash_mem_multiplier":               {Boot: "1", Reset: "1", Value: "1", Source: "default"},
		"random_page_cost":                  {Boot: "4", Reset: "1.1", Value: "1.1", Source: "configuration file"},
		"vacuum_cleanup_index_scale_factor": {Boot: "0.1", Reset: "0.2", Value: "0.2", Source: "configuration file"},
	}}
	var got []string
	for _, c := range Changes(src, a, b) {
		got = append(got, c.Name+"|"+c.Kind+"|"+c.Toggle)
	}
	want := []string{"enable_memoize|new planner feature|SET enable_memoize = off", "hash_mem_multiplier|default changed|SET hash_mem_multiplier = '1'",
		"vacuum_cleanup_index_scale_factor|removed|", "jit|jit available|SET jit = off"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	src.Settings["hash_mem_multiplier"] = Setting{Boot: "1", Reset: "1.5", Value: "1.5", Source: "configuration file"}
	for _, c := range Changes(src, a, b) {
		if c.Name == "hash_mem_multiplier" {
			t.Error("a setting the source sets keeps its value across the upgrade: not a changed default")
		}
	}
}

func TestUpgradeShape(t *testing.T) {
	slower := &UpgradeShape{Change: &replay.ShapeChange{Verdict: replay.Slower, Ratio: replay.Estimate{Value: 1.4, Low: 1.2, High: 1.6}}}
	if slower.Slower(1.25) || !slower.Slower(1.1) {
		t.Error("a shape fails the upgrade only when the lower end of its interval reaches the ratio")
	}
	if (&UpgradeShape{PlanOld: "Seq Scan", PlanNew: "Seq Scan"}).PlanChanged() || !(&UpgradeShape{PlanOld: "Seq Scan", PlanNew: "Index Scan"}).PlanChanged() {
		t.Error("plan change")
	}
	n := planNode{Type: "Hash Join", Plans: []planNode{{Type: "Seq Scan"}, {Type: "Hash", Plans: []planNode{{Type: "Index Scan"}}}}}
	if n.String() != "Hash Join(Seq Scan,Hash(Index Scan))" {
		t.Error(n.String())
	}
}

// TestBrokenApplication: a migration whose change makes the application's
// prepared statements fail ("cached plan must not change result type")
// fails, whatever the step did itself: the step that started last before
// the first new failure is named, with the SQLSTATE and the server's
// message. Errors the application had before the migration, and a stray
// timeout, are not the migration's; a long step before the one that
// broke them does not dilute the failures.
func TestBrokenApplication(t *testing.T) {
	w := &capture.Workload{Shapes: []capture.Shape{{Query: "SELECT * FROM slots WHERE id = $1"}}}
	var calls []replay.Call
	for i := 0; i < 200; i++ {
		c := replay.Call{AtMS: float32(i * 10), MS: 1}
		switch {
		case i%50 == 0:
			c.Failed, c.State = true, "23505" // the application's own, before and after
		case i >= 120 && i%3 == 0:
			c.Failed, c.State = true, "0A000"
		case i == 60:
			c.Failed, c.State = true, "57014"
		}
		calls = append(calls, c)
	}
	res := &replay.Result{Timeline: calls, ErrorMessages: map[string]string{"0A000": "cached plan must not change result type"}}
	r := &Run{Steps: []*StepResult{{Step: migration.Step{SQL: "CREATE INDEX ON slots (clinic)"}, StartMS: 500, EndMS: 600},
		{Step: migration.Step{SQL: "ALTER TABLE slots ALTER COLUMN price TYPE bigint"}, StartMS: 1100, EndMS: 1190}}}
	judge(r, Options{Workload: w, MaxWait: time.Second}, res, 1200)
	if r.Steps[0].Verdict != OK || r.Steps[1].Verdict != Failed || !strings.Contains(r.Steps[1].Broke, "SQLSTATE 0A000 (cached plan must not change result type)") {
		t.Errorf("steps: %s %q / %s %q", r.Steps[0].Verdict, r.Steps[0].Broke, r.Steps[1].Verdict, r.Steps[1].Broke)
	}
	// The same without the new failures: nothing broke.
	for i := range calls {
		if calls[i].State == "0A000" {
			calls[i].Failed, calls[i].State = false, ""
		}
	}
	r2 := &Run{Steps: []*StepResult{{Step: migration.Step{SQL: "CREATE INDEX ON slots (clinic)"}, StartMS: 500, EndMS: 600}}}
	judge(r2, Options{Workload: w, MaxWait: time.Second}, &replay.Result{Timeline: calls}, 700)
	if r2.Steps[0].Verdict != OK || r2.Steps[0].Broke != "" {
		t.Errorf("no new failures: %s %q", r2.Steps[0].Verdict, r2.Steps[0].Broke)
	}
	// A safe form: a backfill of 5,000 calls, none failing, then a
	// switch after which a third of the calls fail. From the migration
	// on that is under 1%; from the switch on, a third: the switch broke
	// them.
	var long []replay.Call
	for i := 0; i < 5200; i++ {
		c := replay.Call{AtMS: float32(i), MS: 1}
		if i >= 5080 && i%3 == 0 {
			c.Failed, c.State = true, "0A000"
		}
		long = append(long, c)
	}
	r3 := &Run{Steps: []*StepResult{{Step: migration.Step{SQL: "UPDATE slots SET price__new = price"}, StartMS: 50, EndMS: 5070},
		{Step: migration.Step{SQL: "ALTER TABLE slots RENAME COLUMN price__new TO price"}, StartMS: 5075, EndMS: 5078}}}
	judge(r3, Options{Workload: w, MaxWait: time.Second}, &replay.Result{Timeline: long}, 5100)
	if r3.Steps[0].Verdict != OK || r3.Steps[1].Verdict != Failed || !strings.Contains(r3.Steps[1].Broke, "40 of the application's 118 calls") {
		t.Errorf("after a long backfill: %s %q / %s %q", r3.Steps[0].Verdict, r3.Steps[0].Broke, r3.Steps[1].Verdict, r3.Steps[1].Broke)
	}
	if d := firstDue(&capture.Workload{Sessions: []*capture.Session{{Statements: []capture.Statement{{At: 3 * time.Second}}}, {Statements: []capture.Statement{{At: 3200 * time.Millisecond}}}}}); d != 3*time.Second {
		t.Errorf("the first statement is due at %s", d)
	}
}

// TestCauseExplainsOnlyAMeasuredSlowdown: a cause takes back at least
// half of a slowdown measured in its own timing.
func TestCauseExplainsOnlyAMeasuredSlowdown(t *testing.T) {
	for _, c := range []struct {
		old, new, fixed   float64
		reproduced, cause bool
	}{
		{85, 1570, 129, true, true},         // JIT: 18x slower, back to 1.5x
		{2.585, 0.457, 0.218, false, false}, // not slower at all here
		{10, 40, 30, true, false},           // takes back a third
		{10, 11, 5, false, false},           // 10% is no slowdown
	} {
		r, e := explains(c.old, c.new, c.fixed, true)
		if r != c.reproduced || e != c.cause {
			t.Errorf("%v -> %v -> %v: reproduced %v, explains %v", c.old, c.new, c.fixed, r, e)
		}
	}
}
