package diagnose_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

var recordProfile = flag.Bool("record-profile", false, "record the profile tape again with perf on a throwaway lab cluster")

// profileTape is what one run of the profile pipeline sent on pgmedic's
// connection and what perf recorded.
type profileTape struct {
	PIDs  []int
	Calls []testkit.Call
	CPU   testkit.CPUTape
}

const (
	profileTapePath = "testdata/transcripts/profile-tz.json"
	// the statement of the tz-conversion workload
	tzStatement = "readings"
)

// TestProfileTranscript replays the whole profile pipeline without perf
// or a server: perf recording a backend that compares a timestamp column
// with now() while pgmedic watches pg_stat_activity, the hot spot named
// and attributed to the statement, and verify's re-run of the statement
// as written and with the bound cast to the column's type, each run in a
// rolled-back read-only transaction while perf records pgmedic's own
// backend. The transcript is every statement sent, in order, and the
// verdict.
func TestProfileTranscript(t *testing.T) {
	if *recordProfile {
		tp, _ := recordTZ(t)
		b, err := json.Marshal(tp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(profileTapePath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(profileTapePath)
	if err != nil {
		t.Fatalf("%v (record it: go test ./internal/diagnose -run ProfileTranscript -record-profile)", err)
	}
	var tp profileTape
	if err := json.Unmarshal(b, &tp); err != nil {
		t.Fatal(err)
	}
	rp := &testkit.Replayer{T: t, Name: "profile tz-conversion", Calls: tp.Calls, Strip: envelope.Tag,
		Rerecord: "record again: go test ./internal/diagnose -run ProfileTranscript -record-profile"}
	cpu := &testkit.CPUReplayer{T: t, Tape: tp.CPU}
	res, found, err := diagnose.Profile(context.Background(), cpu, rp, tp.PIDs, time.Second, 499, diagnose.ProfileRules{})
	if err != nil {
		t.Fatal(err)
	}
	if !rp.Done() {
		t.Errorf("the pipeline sent %d of the %d recorded statements", rp.Sent(), len(tp.Calls))
	}
	checkTZ(t, res, found)
	for _, problem := range outsideEnvelope(tp.Calls) {
		t.Error(problem)
	}
	testkit.Golden(t, "testdata/transcripts/profile-tz.txt", []byte(testkit.Collapse(rp.Transcript())+describe(res, found)))
}

// TestProfileLive runs the same pipeline with perf on a real backend:
// what the tape holds must still be true of the server.
func TestProfileLive(t *testing.T) {
	if *recordProfile {
		t.Skip("recorded by TestProfileTranscript")
	}
	_, run := recordTZ(t)
	checkTZ(t, run.res, run.found)
}

// TestProfileCollatedSort profiles a sort of names under an ICU
// collation: the sort is the hot spot, and the re-run with COLLATE "C" on
// the text key (the integer key beside it takes no collation) must take
// the collator's samples away. Decided on where the samples fall, not on
// the machine's speed.
func TestProfileCollatedSort(t *testing.T) {
	_, run := recordScenario(t, "icu-sort", "customers")
	var hot *model.Finding
	for i := range run.found {
		if run.found[i].Experiment != nil && run.found[i].Experiment.Hotspot == "sort" {
			hot = &run.found[i]
		}
	}
	if hot == nil {
		t.Fatalf("no sort hot spot on a statement: %s", describe(run.res, run.found))
	}
	v := hot.Verification
	if v.Before == nil || v.After == nil {
		t.Fatalf("the re-run measured nothing: %s", describe(run.res, run.found))
	}
	if !strings.Contains(v.Method, `COLLATE "C" on 1 sort key`) {
		t.Errorf("the re-run did not collate exactly the text key: %s", v.Method)
	}
	before, after := evidence(*hot, "share of the re-run as written"), evidence(*hot, "share with the fix")
	// The collator's share of the re-run as written is about a quarter
	// alone and 19% on a loaded runner (perf samples the kernel's work for
	// the backend too); a tenth of some 200 samples is still a share the
	// fix must take to under a quarter of itself.
	if before < 10 || after > before/4 {
		t.Errorf("COLLATE \"C\" did not take the collator away: %.0f%% -> %.0f%%\n%s", before, after, describe(run.res, run.found))
	}
	t.Log(describe(run.res, run.found))
	if v.Status == model.Confirmed && (!strings.Contains(hot.Fix.SQL, `COLLATE "C"`) || !strings.Contains(hot.Fix.Summary, "different order")) {
		t.Errorf("the confirmed fix does not say what it changes: %s / %s", hot.Fix.SQL, hot.Fix.Summary)
	}
}

type tzRun struct {
	res   profile.Result
	found []model.Finding
}

// recordTZ profiles the tz-conversion workload through recorders.
func recordTZ(t *testing.T) (*profileTape, tzRun) {
	return recordScenario(t, "tz-conversion", tzStatement)
}

// recordScenario profiles one of the profile package's workloads (its
// statement contains like) through recorders.
func recordScenario(t *testing.T, scenario, like string) (*profileTape, tzRun) {
	perf, err := profile.FindPerf(context.Background())
	if err != nil {
		testkit.Missing(t, "perf (linux-perf, run as root)", err)
	}
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	var runs atomic.Int64
	db, stop := labtest.Loop(t, c, filepath.Join("..", "profile", "testdata", "scenarios", scenario), &runs)
	defer stop()
	sess, err := envelope.Connect(ctx, c.DSN(db), envelope.Options{StatementTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// The workload's backend, once it runs the statement (Backends says so
	// with an error while none runs it yet).
	var pids []int
	deadline := time.Now().Add(60 * time.Second)
	for len(pids) == 0 {
		if pids, err = profile.Backends(ctx, sess.Conn, profile.Select{QueryLike: like}); err != nil && time.Now().After(deadline) {
			t.Fatalf("no backend ran the %s statement within a minute: %v", like, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn := &testkit.Recorder{Conn: sess.Conn}
	cpu := &testkit.CPURecorder{CPU: perf}
	res, found, err := diagnose.Profile(ctx, cpu, conn, pids, time.Second, 499, diagnose.ProfileRules{})
	if err != nil {
		t.Fatal(err)
	}
	return &profileTape{PIDs: pids, Calls: conn.Calls, CPU: cpu.Tape}, tzRun{res, found}
}

// checkTZ holds a run to what it must show, by where the samples fall
// rather than by how fast the machine was: the time-zone conversion is a
// large share of the backend's CPU, attributed to the statement, and
// (nearly) none of pgmedic's re-run with the fix.
func checkTZ(t *testing.T, res profile.Result, found []model.Finding) {
	t.Helper()
	var hot *model.Finding
	for i := range found {
		if found[i].Experiment != nil && found[i].Experiment.Hotspot == "timezone" {
			hot = &found[i]
		}
	}
	if hot == nil {
		t.Fatalf("no time-zone hot spot on a statement in %d samples: %s", res.Profile.Samples, describe(res, found))
	}
	if !strings.Contains(hot.Object.Name, tzStatement) {
		t.Errorf("the hot spot is attributed to %q", hot.Object.Name)
	}
	before, after := evidence(*hot, "share of the re-run as written"), evidence(*hot, "share with the fix")
	// The collator's share of the re-run as written is about a quarter
	// alone and 19% on a loaded runner (perf samples the kernel's work for
	// the backend too); a tenth of some 200 samples is still a share the
	// fix must take to under a quarter of itself.
	if before < 10 || after > before/4 {
		t.Errorf("the fix did not take the conversion away: share %.0f%% -> %.0f%%\n%s", before, after, describe(res, found))
	}
	if hot.Verification.Before == nil || hot.Verification.After == nil {
		t.Errorf("the re-run measured no times: %+v", hot.Verification)
	}
	if hot.Verification.Status == model.Confirmed && !strings.Contains(hot.Fix.SQL, "::timestamp") {
		t.Errorf("the confirmed fix is not the rewritten statement: %s", hot.Fix.SQL)
	}
}

func evidence(f model.Finding, label string) float64 {
	for _, e := range f.Evidence {
		if e.Label == label {
			return e.Value
		}
	}
	return -1
}

func describe(res profile.Result, found []model.Finding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "profile: %d samples\n", res.Profile.Samples)
	for _, f := range found {
		fmt.Fprintf(&b, "finding %s (%s): %s\n", f.Rule, f.Severity, f.Title)
		fmt.Fprintf(&b, "  object: %s\n", f.Object.Name)
		v := f.Verification
		fmt.Fprintf(&b, "  verification: %s", v.Status)
		if v.Before != nil && v.After != nil {
			fmt.Fprintf(&b, ", %v %s -> %v %s", v.Before.Value, v.Before.Unit, v.After.Value, v.After.Unit)
		}
		b.WriteString("\n")
		for _, s := range []string{v.Method, v.Reason} {
			if s != "" {
				fmt.Fprintf(&b, "  %s\n", s)
			}
		}
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "  evidence: %s = %v %s\n", e.Label, e.Value, e.Unit)
		}
		if f.Fix.SQL != "" {
			fmt.Fprintf(&b, "  fix: %s\n", f.Fix.SQL)
		}
	}
	return b.String()
}

// outsideEnvelope lists what in the calls breaks the safety envelope for
// a re-run: an untagged statement, a transaction that is not read-only,
// a commit, a transaction left open.
func outsideEnvelope(calls []testkit.Call) []string {
	var problems []string
	open := false
	for i, c := range calls {
		sql, ok := strings.CutPrefix(c.SQL, envelope.Tag)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("call %d is not tagged: %s", i+1, c.SQL))
		case strings.HasPrefix(sql, "BEGIN") && (open || sql != "BEGIN READ ONLY"):
			problems = append(problems, fmt.Sprintf("call %d: %s", i+1, sql))
		case strings.HasPrefix(sql, "BEGIN"):
			open = true
		case sql == "ROLLBACK":
			open = false
		case strings.HasPrefix(sql, "COMMIT"), strings.HasPrefix(sql, "END"):
			problems = append(problems, fmt.Sprintf("call %d commits", i+1))
		}
	}
	if open {
		problems = append(problems, "a transaction is left open")
	}
	return problems
}
