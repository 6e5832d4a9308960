package scenario

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestScenariosOnTwin checks scenarios as production targets (lab run
// --twin): the saturated pool's load is replayed on a twin through
// PgBouncer at its own size and at the proposed one, the idle chain is
// rehearsed with and without idle_in_transaction_session_timeout, and the
// roomy pool stays quiet, and the rows a VACUUM removes behind a snapshot
// held and released are counted. The gains hold by construction, not by the
// machine's speed: the pooled clients sleep 50 ms per statement (twice
// the server connections, twice the statements per second), and the idle
// head holds its locks 1.2 s against a 300 ms timeout.
func TestScenariosOnTwin(t *testing.T) {
	if testing.Short() {
		t.Skip("reproduces scenarios and builds twins")
	}
	// The three lab tests of this package each run on clusters of their
	// own and spend most of their time waiting (sampling windows, sleeping
	// clients): side by side they take the time of the longest.
	t.Parallel()
	if _, err := lab.FindBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	if _, err := lab.FindPgBouncer(); err != nil {
		testkit.Missing(t, "pgbouncer", err)
	}
	ctx := context.Background()
	c, err := lab.Create(ctx, lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy(context.Background()) })
	opts := diagnose.Options{Runs: 5, StatementTimeout: 5 * time.Second, CopyTimeout: 2 * time.Minute,
		MaxCopyBytes: 1 << 30, MaxTables: 200000, MaxStatements: 10000, Twin: true, Log: t.Logf}
	want := map[string][]string{
		"pool-saturation": {"pool-saturation"},
		"lock-chain":      {"idle-in-transaction"},
		"pool-roomy":      nil,
		// The twin has no prepared transaction: released, VACUUM
		// removes every row the held snapshot kept.
		"vacuum-held-back": {"xmin-horizon"},
		// Sessions held idle replayed on a twin whose role the server
		// admits as many of, and through a pool: the refusals and the
		// goodput the held sessions lose hold by construction (half as
		// many clients again as admitted sessions, each idle between its
		// statements), not by the machine's speed.
		"connections-held-idle": {"connection-pressure"},
		// The DROP TRIGGER's queue behind an autovacuum to prevent
		// wraparound, reproduced on a twin that has no such trigger until
		// the experiment makes one; the reads' longest wait with and
		// without lock_timeout.
		"wraparound-ddl-queue": {"lock-contention"},
		// Commits with and without NOTIFY on a twin whose fsync is set to
		// the target's (on) for the run.
		"notify-commits": {"notify-lock"},
	}
	for _, name := range []string{"pool-saturation", "lock-chain", "pool-roomy", "vacuum-held-back", "connections-held-idle", "wraparound-ddl-queue", "notify-commits"} {
		t.Run(name, func(t *testing.T) {
			s, err := Find(name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(ctx, c, s, "test", opts, model.Info)
			if err != nil {
				t.Fatal(err)
			}
			confirmed := map[string]bool{}
			for _, f := range res.Report.Findings {
				v := f.Verification
				if v.Status == model.Confirmed && (v.Before == nil || v.After == nil) {
					t.Errorf("%s confirmed without two measured numbers", f.Rule)
				}
				if f.Severity >= model.Warning && want[name] == nil {
					t.Errorf("%s: %s on a healthy pool: %s", name, f.Rule, f.Title)
				}
				if v.Status == model.Confirmed && strings.HasPrefix(v.Where, "twin") {
					confirmed[f.Rule] = true
				}
				if f.Rule == "pool-saturation" && !strings.Contains(v.Method, "PgBouncer") {
					t.Errorf("the pool was not replayed through PgBouncer: %+v", v)
				}
			}
			for _, rule := range want[name] {
				if !confirmed[rule] {
					t.Errorf("%s: %s not confirmed on the twin; findings: %+v", name, rule, res.Report.Findings)
				}
			}
		})
	}
}
