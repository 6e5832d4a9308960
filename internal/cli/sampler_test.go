package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestSamplerOnAnIdleDatabase: an idle, healthy database sampled for a
// second reports the sampling (ticks, its own overhead, the window's
// counters) and none of the session rules.
func TestSamplerOnAnIdleDatabase(t *testing.T) {
	needCluster(t)
	freshDB(t, "sampler_idle", `CREATE TABLE t (id int PRIMARY KEY)`)
	code, out, errOut := run(t, "check", cluster.DSN("sampler_idle"), "--format", "json", "--min-severity", "info", "--sample", "1s", "--sample-interval", "100ms")
	if !checkRan(code) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Findings []model.Finding `json:"findings"`
		Sessions *model.Sessions `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// How many ticks fit in the second depends on how fast the server
	// answered (the sampler slows down for a slow one: TestSchedule in
	// collect checks that on a clock of its own); here: it sampled, kept
	// every sample, and timed its own queries.
	s := rep.Sessions
	if s == nil || s.Ticks < 1 || s.OverheadMS <= 0 || s.Seconds <= 0 || len(s.Samples) != s.Ticks {
		t.Fatalf("sessions: %+v", s)
	}
	for _, f := range rep.Findings {
		switch f.Rule {
		case "idle-in-transaction", "lock-contention", "client-stall", "connection-pressure":
			t.Errorf("an idle database got %s: %s", f.Rule, f.Title)
		}
	}
	code, out, _ = run(t, "check", cluster.DSN("sampler_idle"), "--sample", "0", "--min-severity", "info")
	if strings.Contains(out, "== SESSIONS") || (!checkRan(code)) {
		t.Errorf("--sample 0 still sampled (exit %d)", code)
	}
	code, _, errOut = run(t, "check", cluster.DSN("sampler_idle"), "--sample", "1h")
	if code != 2 || !strings.Contains(errOut, "--sample") {
		t.Errorf("--sample 1h: exit %d, %s", code, errOut)
	}
}

// TestSamplerWithoutPrivilege: a role without pg_read_all_stats still
// samples, and the report says what it could not see and the GRANT.
func TestSamplerWithoutPrivilege(t *testing.T) {
	needCluster(t)
	db := freshDB(t, "sampler_hidden", `DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'plain') THEN CREATE ROLE plain LOGIN; END IF; END $$`)
	_ = db // an idle session of another role while plain samples
	code, out, errOut := run(t, "check", cluster.UserDSN("plain", "sampler_hidden"), "--min-severity", "info", "--sample", "1s")
	if code != ExitIncomplete && code != ExitFindings {
		t.Fatalf("exit %d, want %d (not the all-clear): %s", code, ExitIncomplete, errOut)
	}
	if !strings.Contains(out, "sessions of other roles while sampling") || !strings.Contains(out, "GRANT pg_read_all_stats TO plain") {
		t.Errorf("no hint about the hidden sessions:\n%s", out)
	}
}

// TestPgBouncerThatIsNot: --pgbouncer pointing at something that is not
// PgBouncer's admin console costs only the pool rule: one clear skipped
// entry, and the rest of the check runs.
func TestPgBouncerThatIsNot(t *testing.T) {
	needCluster(t)
	freshDB(t, "bouncer_not", `CREATE TABLE t (id int PRIMARY KEY)`)
	code, out, errOut := run(t, "check", cluster.DSN("bouncer_not"), "--pgbouncer", cluster.DSN("bouncer_not"), "--min-severity", "info", "--sample", "500ms")
	if !checkRan(code) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "pool-saturation") || !strings.Contains(out, "PgBouncer was not sampled") || !strings.Contains(out, "== SESSIONS") {
		t.Errorf("no clear skip, or the check stopped:\n%s", out)
	}
}
