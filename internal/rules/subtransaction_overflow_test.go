package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// subtransSnap is a sampled server whose pg_subtrans lookups grew by
// lookups (and pages read by reads) over 2 s, with waiting sessions on
// wait per tick beside busy active ones.
func subtransSnap(lookups, reads int64, waiting, busy int, wait string) *model.Snapshot {
	s := &model.Snapshot{Database: "ci", Server: model.Server{VersionNum: 170002},
		Sampling:   &model.Sampling{Seconds: 2},
		Subtrans:   &model.Subtrans{LookupsBefore: 1000, LookupsAfter: 1000 + lookups, ReadsBefore: 5, ReadsAfter: 5 + reads, Seconds: 2},
		Statements: []model.Statement{{Query: `SAVEPOINT "_pg3_2"`, Calls: 5000}, {Query: "SELECT 1", Calls: 9}},
		Holders:    []model.XminHolder{{Kind: model.HolderSession, PID: 42, App: "backfill", Database: "ci", XminAge: 12000}}}
	for range 20 {
		var smp model.ActivitySample
		for p := range waiting {
			smp.Backends = append(smp.Backends, model.Backend{PID: 100 + p, Database: "ci", State: "active", WaitType: "LWLock", Wait: wait})
		}
		smp.Backends = append(smp.Backends, model.Backend{PID: 42, App: "backfill", Database: "ci", State: "idle in transaction",
			XactMS: 90000, Overflowed: true, Query: `RELEASE "_pg3_2"`})
		for p := range busy {
			smp.Backends = append(smp.Backends, model.Backend{PID: 200 + p, Database: "ci", State: "active"})
		}
		s.Sampling.Samples = append(s.Sampling.Samples, smp)
	}
	return s
}

func TestSubtransactionOverflow(t *testing.T) {
	for _, c := range []struct {
		name string
		snap *model.Snapshot
		want model.Severity // 0: quiet
	}{
		{"millions of lookups, all in the buffers", subtransSnap(8_000_000, 0, 0, 4, ""), model.Warning},
		{"lookups missing the buffers", subtransSnap(8_000_000, 2000, 0, 4, ""), model.Critical},
		{"sessions queued on the SLRU's lock", subtransSnap(8_000_000, 0, 2, 4, "SubtransSLRU"), model.Critical},
		{"waits without a measured rate (buffer reads)", subtransSnap(0, 0, 1, 15, "SubtransBuffer"), model.Warning},
		{"a quiet server's few lookups", subtransSnap(4000, 0, 0, 4, ""), 0},
		{"another SLRU's lock", subtransSnap(4000, 0, 3, 4, "MultiXactOffsetSLRU"), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := subtransactionOverflow(c.snap)
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
			if f.Experiment == nil || f.Experiment.Kind != model.ExpSubtransReads {
				t.Errorf("experiment: %+v", f.Experiment)
			}
			var labels []string
			for _, e := range f.Evidence {
				labels = append(labels, e.Label)
			}
			all := strings.Join(labels, "\n")
			for _, want := range []string{"pid 42 (application backfill)", `"_pg3_2"`, "12,000 transactions ago"} {
				if !strings.Contains(all, want) {
					t.Errorf("evidence lacks %q:\n%s", want, all)
				}
			}
			if !strings.Contains(f.Fix.SQL, "subtransaction_buffers") || !strings.Contains(f.Fix.SQL, "idle_in_transaction_session_timeout") {
				t.Errorf("fix: %s", f.Fix.SQL)
			}
		})
	}
}

// TestSubtransBuffersFrom17: the setting is offered only where it exists.
func TestSubtransBuffersFrom17(t *testing.T) {
	s := subtransSnap(8_000_000, 0, 0, 4, "")
	s.Server.VersionNum = 160004
	fs, _ := subtransactionOverflow(s)
	if len(fs) != 1 || strings.Contains(fs[0].Fix.SQL, "subtransaction_buffers") {
		t.Fatalf("PostgreSQL 16 has no subtransaction_buffers: %+v", fs)
	}
}

// TestSubtransOnAStandby: a standby's oldest session is a reader whose
// snapshot the primary holds back; it is not named as the cause.
func TestSubtransOnAStandby(t *testing.T) {
	s := subtransSnap(8_000_000, 0, 0, 4, "")
	s.Replication = &model.Replication{InRecovery: true}
	fs, _ := subtransactionOverflow(s)
	if len(fs) != 1 {
		t.Fatalf("want a finding, got %v", fs)
	}
	for _, e := range fs[0].Evidence {
		if strings.Contains(e.Label, "oldest open transaction") {
			t.Errorf("a standby's reader named as the cause: %s", e.Label)
		}
	}
	if !strings.Contains(fs[0].Impact.Summary, "check the primary") {
		t.Errorf("impact: %s", fs[0].Impact.Summary)
	}
}

// TestSubtransOnAPrimaryWithStandbys: the primary's own lookups are few
// (its readers are on the standbys), but a transaction past 64 open for a
// minute keeps every standby snapshot overflowed.
func TestSubtransOnAPrimaryWithStandbys(t *testing.T) {
	withStandby := func(state string, xactMS float64) *model.Snapshot {
		s := subtransSnap(4000, 0, 0, 4, "")
		for _, smp := range s.Sampling.Samples {
			for i := range smp.Backends {
				if smp.Backends[i].Overflowed {
					smp.Backends[i].XactMS = xactMS
				}
			}
		}
		s.Replication = &model.Replication{Readings: []model.ReplicationReading{{Standbys: []model.StandbyStatus{{Name: "replica1", State: state}}}}}
		return s
	}
	// GitLab's recipe: short transactions past 64, one long transaction
	// of another session.
	recipe := withStandby("streaming", 200)
	recipe.CollectedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	began := recipe.CollectedAt.Add(-time.Minute)
	recipe.Holders = []model.XminHolder{{Kind: model.HolderSession, PID: 77, App: "reports", Database: "ci", XminAge: 90000, Since: &began}}
	if fs, _ := subtransactionOverflow(recipe); len(fs) != 1 || !strings.Contains(fs[0].Title, "pid 77 (application reports) has held a transaction open for 1m0s") {
		t.Fatalf("short overflows and a long transaction: got %+v", fs)
	}
	fs, _ := subtransactionOverflow(withStandby("streaming", 60000))
	if len(fs) != 1 || fs[0].Severity != model.Warning || !strings.Contains(fs[0].Title, "pid 42 (application backfill)") || !strings.Contains(fs[0].Title, "1 streaming standby") {
		t.Fatalf("want a warning naming the session and the standby, got %+v", fs)
	}
	for name, s := range map[string]*model.Snapshot{
		"a standby catching up": withStandby("catchup", 60000),
		"open for 200 ms, no long transaction": func() *model.Snapshot {
			s := withStandby("streaming", 200)
			s.Holders = nil
			return s
		}(),
		"no standby": subtransSnap(4000, 0, 0, 4, ""),
	} {
		if fs, _ := subtransactionOverflow(s); len(fs) != 0 {
			t.Errorf("%s: want quiet, got %s", name, fs[0].Title)
		}
	}
	s := withStandby("streaming", 60000)
	s.Server.VersionNum = 150004 // no pg_stat_get_backend_subxact: nothing is marked
	for _, smp := range s.Sampling.Samples {
		for i := range smp.Backends {
			smp.Backends[i].Overflowed = false
		}
	}
	if fs, _ := subtransactionOverflow(s); len(fs) != 0 {
		t.Errorf("before 16: want quiet, got %s", fs[0].Title)
	}
}

// TestSubtransactionOverflowUnsampled: without a sample there is no rate,
// and the rule says so instead of staying silent.
func TestSubtransactionOverflowUnsampled(t *testing.T) {
	s := subtransSnap(8_000_000, 0, 0, 4, "")
	s.Sampling = nil
	fs, skips := subtransactionOverflow(s)
	if len(fs) != 0 || len(skips) != 1 {
		t.Fatalf("want a skip, got %v %v", fs, skips)
	}
}
