package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

func TestAutovacuumHead(t *testing.T) {
	for _, c := range []struct {
		in             string
		ok, wraparound bool
		table, phase   string
		lock           string
	}{
		{"4242 autovacuum: VACUUM public.manta_objects (to prevent wraparound) [scanning heap]", true, true, "public.manta_objects", "scanning heap", "SHARE UPDATE EXCLUSIVE"},
		{"17 autovacuum: VACUUM ANALYZE app.grants [truncating heap]", true, false, "app.grants", "truncating heap", "ACCESS EXCLUSIVE"},
		{"9 autovacuum: VACUUM public.t", true, false, "public.t", "", "SHARE UPDATE EXCLUSIVE"},
		{"", false, false, "", "", ""},
		{"x autovacuum: VACUUM public.t", false, false, "", "", ""},
	} {
		h, ok := autovacuumHead(model.Backend{Autovacuum: c.in})
		if ok != c.ok {
			t.Fatalf("%q: ok %v", c.in, ok)
		}
		if !ok {
			continue
		}
		if h.Wraparound != c.wraparound || h.Table != c.table || h.Phase != c.phase || h.lockMode() != c.lock {
			t.Errorf("%q: got %+v (%s)", c.in, h, h.lockMode())
		}
	}
}

// A DROP TRIGGER queued behind an autovacuum to prevent wraparound, with
// reads behind it: the finding names the worker, pastes the freeze and no
// pg_cancel_backend, and its reproduction holds the worker's lock.
func TestDDLBehindWraparoundVacuum(t *testing.T) {
	s := &model.Snapshot{Database: "meta", Sampling: &model.Sampling{Seconds: 1}}
	for range 10 {
		smp := model.ActivitySample{Backends: []model.Backend{
			{PID: 10, Database: "meta", State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{7},
				WaitsFor:   "manta_objects (AccessExclusiveLock)",
				Autovacuum: "7 autovacuum: VACUUM public.manta_objects (to prevent wraparound) [scanning heap]",
				Query:      "DROP TRIGGER IF EXISTS manta_objects_audit ON manta_objects", StateMS: 4000},
		}}
		for p := 11; p < 15; p++ {
			smp.Backends = append(smp.Backends, model.Backend{PID: p, Database: "meta", State: "active", WaitType: "Lock", Wait: "relation",
				BlockedBy: []int{10}, WaitsFor: "manta_objects (AccessShareLock)", Query: "SELECT name FROM manta_objects WHERE id = $1"})
		}
		s.Sampling.Samples = append(s.Sampling.Samples, smp)
	}
	fs, _ := lockContention(s)
	if len(fs) != 1 {
		t.Fatalf("want one finding, got %d", len(fs))
	}
	f := fs[0]
	for _, want := range []string{"DROP TRIGGER", "to prevent wraparound", "pid 7"} {
		if !strings.Contains(f.Title, want) {
			t.Errorf("title lacks %q: %s", want, f.Title)
		}
	}
	if !strings.Contains(f.Fix.SQL, "VACUUM (FREEZE, VERBOSE) public.manta_objects") || strings.Contains(f.Fix.SQL, "pg_cancel_backend") {
		t.Errorf("fix: %s", f.Fix.SQL)
	}
	if f.Experiment == nil || f.Experiment.Kind != model.ExpLockQueue || f.Experiment.HeadLock != "SHARE UPDATE EXCLUSIVE" {
		t.Errorf("experiment: %+v", f.Experiment)
	}
}

// Reads queued behind an autovacuum truncating the table: the head is
// named and the fix is vacuum_truncate.
func TestChainBehindTruncation(t *testing.T) {
	s := &model.Snapshot{Database: "auth", Sampling: &model.Sampling{Seconds: 1}}
	for range 10 {
		var smp model.ActivitySample
		for p := 11; p < 15; p++ {
			smp.Backends = append(smp.Backends, model.Backend{PID: p, Database: "auth", State: "active", WaitType: "Lock", Wait: "relation",
				BlockedBy: []int{7}, WaitsFor: "grants (AccessShareLock)", Autovacuum: "7 autovacuum: VACUUM public.grants [truncating heap]",
				Query: "SELECT 1 FROM grants WHERE subject = $1"})
		}
		s.Sampling.Samples = append(s.Sampling.Samples, smp)
	}
	fs, _ := lockContention(s)
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "truncating") || !strings.Contains(fs[0].Fix.SQL, "vacuum_truncate = false") {
		t.Fatalf("got %+v", fs)
	}
}

// Stalls behind a truncation are judged by their count, from the sampler
// or, when it caught none, from the truncations the log counted on a
// table the sampled sessions used.
func TestTruncationStalls(t *testing.T) {
	waiting := func(n int) model.ActivitySample {
		var smp model.ActivitySample
		for p := range n {
			smp.Backends = append(smp.Backends, model.Backend{PID: 20 + p, Database: "auth", State: "active", WaitType: "Lock", Wait: "relation",
				BlockedBy: []int{7}, WaitsFor: "grants (AccessShareLock)", Autovacuum: "7 autovacuum: VACUUM public.grants [truncating heap]",
				Query: "SELECT role FROM grants WHERE id = $1"})
		}
		return smp
	}
	reading := func(query string) model.ActivitySample {
		var smp model.ActivitySample
		for p := range 3 {
			smp.Backends = append(smp.Backends, model.Backend{PID: 40 + p, Database: "auth", State: "active", Query: query})
		}
		return smp
	}
	idleAfter := func(query string, ms float64) model.ActivitySample {
		var smp model.ActivitySample
		for p := range 3 {
			smp.Backends = append(smp.Backends, model.Backend{PID: 60 + p, Database: "auth", State: "idle", StateMS: ms, Query: query})
		}
		return smp
	}
	logged := func(table string, runs int64) *model.LogEvents {
		return &model.LogEvents{Tables: []model.TableMaintenance{{Table: table, Vacuums: runs + 1, Truncations: runs, PagesRemoved: runs * 2000}}}
	}
	for _, c := range []struct {
		name    string
		samples []model.ActivitySample
		log     *model.LogEvents
		want    string // a word of the title, "" for no finding
	}{
		{"one sample with four waiting", []model.ActivitySample{reading("SELECT 1"), waiting(4)}, nil, "queued behind an autovacuum truncating"},
		{"a single wait", []model.ActivitySample{reading("SELECT 1"), reading("SELECT 1"), waiting(1)}, nil, ""},
		{"the log's truncations of a table in use", []model.ActivitySample{reading("SELECT role FROM grants WHERE id = $1")}, logged("auth.public.grants", 3), "3 times in the server log"},
		{"schema-qualified in the statement", []model.ActivitySample{reading(`SELECT role FROM public.grants WHERE id = $1`)}, logged("auth.public.grants", 2), "2 times in the server log"},
		{"sessions idle a moment after reading it", []model.ActivitySample{idleAfter("SELECT role FROM grants WHERE id = $1", 200)}, logged("auth.public.grants", 2), "2 times in the server log"},
		{"sessions idle long after reading it", []model.ActivitySample{idleAfter("SELECT role FROM grants WHERE id = $1", 5000)}, logged("auth.public.grants", 2), ""},
		{"the log's truncations of a table nobody used", []model.ActivitySample{reading("SELECT role FROM grants_archive WHERE id = $1")}, logged("auth.public.grants", 3), ""},
		{"one truncation in the log", []model.ActivitySample{reading("SELECT role FROM grants WHERE id = $1")}, logged("auth.public.grants", 1), ""},
		{"the log's truncations of a table since set vacuum_truncate = false", []model.ActivitySample{reading("SELECT role FROM grants WHERE id = $1")}, logged("auth.public.grants", 3), ""},
		{"another database's table", []model.ActivitySample{reading("SELECT role FROM grants WHERE id = $1")}, logged("billing.public.grants", 3), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &model.Snapshot{Database: "auth", Sampling: &model.Sampling{Seconds: 1, Samples: c.samples}, Logged: c.log,
				Tables: []model.Table{{Schema: "public", Name: "grants", KeepsEmptyEnd: strings.Contains(c.name, "vacuum_truncate = false")}}}
			fs, _ := lockContention(s)
			if c.want == "" {
				if len(fs) != 0 {
					t.Fatalf("want no finding, got %q", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 || !strings.Contains(fs[0].Title, c.want) {
				t.Fatalf("want a title with %q, got %+v", c.want, fs)
			}
			f := fs[0]
			if f.Object.Name != "public.grants" || !strings.Contains(f.Fix.SQL, "ALTER TABLE public.grants SET (vacuum_truncate = false)") {
				t.Errorf("object %q, fix %q", f.Object.Name, f.Fix.SQL)
			}
			if f.Experiment == nil || f.Experiment.Kind != model.ExpTruncateWaits || f.Experiment.Table.Name != "grants" {
				t.Errorf("experiment: %+v", f.Experiment)
			}
		})
	}
}
