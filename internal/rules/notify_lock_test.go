package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// notifySnap is a sampled server: per tick, waiting sessions waiting on
// waitsFor, and busy other active sessions.
func notifySnap(ticks, waiting, busy int, waitsFor string) *model.Snapshot {
	s := &model.Snapshot{Database: "shop", Sampling: &model.Sampling{Seconds: float64(ticks) / 10},
		Statements: []model.Statement{{Query: "SELECT pg_notify('order_events', $1::text)", Calls: 900}, {Query: "SELECT 1", Calls: 5}}}
	for range ticks {
		var smp model.ActivitySample
		for p := range waiting {
			smp.Backends = append(smp.Backends, model.Backend{PID: 100 + p, Database: "shop", State: "active",
				WaitType: "Lock", Wait: "object", WaitsFor: waitsFor, BlockedBy: []int{99}, Query: "COMMIT"})
		}
		for p := range busy {
			smp.Backends = append(smp.Backends, model.Backend{PID: 200 + p, Database: "shop", State: "active"})
		}
		s.Sampling.Samples = append(s.Sampling.Samples, smp)
	}
	return s
}

func TestNotifyLock(t *testing.T) {
	queue := "object 1262/0 of database 0 (AccessExclusiveLock)"
	for _, c := range []struct {
		name string
		snap *model.Snapshot
		want model.Severity // 0: quiet
	}{
		{"most sessions queued on the queue's lock", notifySnap(20, 8, 2, queue), model.Critical},
		{"a fifth of them", notifySnap(20, 2, 8, queue), model.Warning},
		{"under a tenth", notifySnap(20, 2, 30, queue), 0},
		{"one waiter at a time is no queue", notifySnap(20, 1, 0, queue), 0},
		{"another object's lock", notifySnap(20, 8, 2, "object 1259/16384 of database 5 (AccessExclusiveLock)"), 0},
		{"a relation's lock", notifySnap(20, 8, 2, "orders (RowExclusiveLock)"), 0},
		{"nobody waits", notifySnap(20, 0, 6, ""), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := notifyLock(c.snap)
			if c.want == 0 {
				if len(fs) != 0 {
					t.Fatalf("want quiet, got %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 || fs[0].Severity != c.want {
				t.Fatalf("want one finding of %v, got %+v", c.want, fs)
			}
			f := fs[0]
			if f.Experiment == nil || f.Experiment.Kind != model.ExpNotifyCommits || f.Experiment.Clients < 4 {
				t.Errorf("experiment: %+v", f.Experiment)
			}
			if !slices.ContainsFunc(f.Evidence, func(e model.Evidence) bool { return e.Fact }) {
				t.Errorf("the notifying statement is not named: %+v", f.Evidence)
			}
		})
	}
	// The same waits are not lock-contention's chain.
	if fs, _ := lockContention(notifySnap(20, 8, 2, queue)); len(fs) != 0 {
		t.Errorf("lock-contention reports the notify queue: %s", fs[0].Title)
	}
	if _, skip := notifyLock(&model.Snapshot{}); len(skip) != 1 {
		t.Errorf("an unsampled server is not said: %v", skip)
	}
}

func TestNotifyChannels(t *testing.T) {
	got := notifyChannels([]string{
		`NOTIFY order_events, 'x'`, `select pg_notify('Billing', $1)`, `NOTIFY "Mixed Case"`, `SELECT pg_notify($1, $2)`, `notify order_events`,
	})
	want := []string{"order_events", "Billing", "Mixed Case"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if fix := notifyFix([]string{"it's"}); !strings.Contains(fix.SQL, "'it''s'") {
		t.Errorf("the channel is not quoted: %s", fix.SQL)
	}
}
