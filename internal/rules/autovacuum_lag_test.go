package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// avSnapshot is a server with autovacuum as PostgreSQL ships it (three
// workers, a cost limit of 200 every 2 ms) and four tables of 40,000
// rows, each with dead rows.
func avSnapshot(dead int64, readings ...model.AutovacuumReading) *model.Snapshot {
	set := func(v string) model.Setting { return model.Setting{Value: v} }
	s := &model.Snapshot{Database: "helpdesk", User: "monitor", CollectedAt: time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC), Server: model.Server{VersionNum: 150000},
		Settings: map[string]model.Setting{"autovacuum": set("on"), "track_counts": set("on"), "autovacuum_max_workers": set("3"),
			"autovacuum_vacuum_cost_delay": set("2"), "autovacuum_vacuum_cost_limit": set("-1"), "vacuum_cost_delay": set("0"), "vacuum_cost_limit": set("200"),
			"autovacuum_vacuum_threshold": set("50"), "autovacuum_vacuum_scale_factor": set("0.2")},
		Autovacuum: readings}
	for i, name := range []string{"tickets", "sla_timers", "agent_presence", "ticket_views"} {
		s.Tables = append(s.Tables, model.Table{OID: uint32(100 + i), Schema: "public", Name: name, Reltuples: 40000, Live: 40000, Dead: dead,
			HeapBytes: int64(2000-i) * 8192, AutovacuumEnabled: true})
	}
	return s
}

// busy is a reading at time at with a worker per table oid, each having
// scanned scanned of its 2,000 heap pages.
func busy(at float64, scanned int64, oids ...uint32) model.AutovacuumReading {
	r := model.AutovacuumReading{At: at}
	for _, oid := range oids {
		r.Workers = append(r.Workers, model.AutovacuumWorker{PID: int(oid), Database: "helpdesk", TableOID: oid, Table: "public.t" + string(rune('0'+oid%10)),
			Phase: "scanning heap", HeapTotal: 2000, HeapScanned: scanned, RunningS: 30})
	}
	return r
}

// TestAutovacuumLag: every worker busy while a table past its trigger
// waits, a run whose measured pace leaves hours, autovacuum off for the
// server, a table's own crawl or switch; and no finding where autovacuum
// keeps up (a worker free, tables under their trigger, a short run).
func TestAutovacuumLag(t *testing.T) {
	for _, c := range []struct {
		name   string
		snap   func() *model.Snapshot
		object string // "" for no finding
		in     string // in the title
		fix    string // in the fix
		exp    bool   // carries the throttle experiment
	}{
		{"all busy, one waits, throttled", func() *model.Snapshot {
			s := avSnapshot(20000, busy(0, 100, 100, 101, 102), busy(10, 110, 100, 101, 102))
			s.Settings["autovacuum_vacuum_cost_limit"] = model.Setting{Value: "10"}
			return s
		}, "autovacuum_vacuum_cost_limit", "public.ticket_views 20,000 dead rows", "autovacuum_vacuum_cost_limit = 2000", true},
		{"all busy, unthrottled", func() *model.Snapshot {
			s := avSnapshot(20000, busy(0, 100, 100, 101, 102), busy(10, 1100, 100, 101, 102))
			s.Settings["autovacuum_vacuum_cost_delay"] = model.Setting{Value: "0"}
			return s
		}, "autovacuum_max_workers", "all 3 autovacuum workers were busy", "autovacuum_max_workers = 6", false},
		{"a worker free", func() *model.Snapshot {
			return avSnapshot(20000, busy(0, 100, 100, 101), busy(10, 1100, 100, 101))
		}, "", "", "", false},
		{"busy, nothing waits", func() *model.Snapshot {
			return avSnapshot(5000, busy(0, 1000, 100, 101, 102), busy(10, 1900, 100, 101, 102))
		}, "", "", "", false},
		{"one run with hours left at its measured pace", func() *model.Snapshot {
			s := avSnapshot(20000, busy(0, 100, 100), busy(10, 101, 100))
			s.Tables[0].HeapBytes = 2000 * 8192
			return s
		}, "autovacuum_vacuum_cost_limit", "0.1 heap pages a second", "pg_cancel_backend(100)", true},
		{"one run, minutes left", func() *model.Snapshot {
			return avSnapshot(20000, busy(0, 100, 100), busy(10, 1100, 100))
		}, "", "", "", false},
		{"autovacuum off", func() *model.Snapshot {
			s := avSnapshot(20000)
			s.Settings["autovacuum"] = model.Setting{Value: "off"}
			return s
		}, "autovacuum", "switched off for the whole server", "ALTER SYSTEM SET autovacuum = on", false},
		{"track_counts off", func() *model.Snapshot {
			s := avSnapshot(20000)
			s.Settings["track_counts"] = model.Setting{Value: "off"}
			return s
		}, "track_counts", "track_counts is off", "ALTER SYSTEM SET track_counts = on", false},
		{"a table crawls on its own throttle", func() *model.Snapshot {
			s := avSnapshot(0)
			s.Tables[2].Dead = 20000
			s.Tables[2].VacuumOptions = map[string]float64{"cost_delay": 100, "cost_limit": 5}
			return s
		}, "public.agent_presence", "its own cost settings (delay 100 ms, limit 5)", "RESET (autovacuum_vacuum_cost_delay, autovacuum_vacuum_cost_limit)", true},
		{"its own throttle, under its trigger, no worker", func() *model.Snapshot {
			s := avSnapshot(0)
			s.Tables[2].VacuumOptions = map[string]float64{"cost_delay": 100, "cost_limit": 5}
			return s
		}, "", "", "", false},
		{"its own throttle, faster than the server's", func() *model.Snapshot {
			s := avSnapshot(20000)
			s.Tables[2].VacuumOptions = map[string]float64{"cost_delay": 0}
			return s
		}, "", "", "", false},
		{"its own trigger keeps it under", func() *model.Snapshot {
			s := avSnapshot(0)
			s.Tables[1].Dead = 20000
			s.Tables[1].AutovacuumEnabled = false
			s.Tables[1].VacuumOptions = map[string]float64{"scale_factor": 0.9}
			return s
		}, "", "", "", false},
		{"switched off for a table, past its trigger", func() *model.Snapshot {
			s := avSnapshot(0)
			s.Tables[1].Dead = 20000
			s.Tables[1].AutovacuumEnabled = false
			return s
		}, "public.sla_timers", "autovacuum_enabled = off", "RESET (autovacuum_enabled)", false},
		{"switched off and bloated: table-bloat's", func() *model.Snapshot {
			s := avSnapshot(0)
			s.Tables[1].Dead = 60000
			s.Tables[1].AutovacuumEnabled = false
			return s
		}, "", "", "", false},
	} {
		fs, _ := autovacuumLag(c.snap())
		if c.object == "" {
			if len(fs) != 0 {
				t.Errorf("%s: want no finding, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 {
			t.Errorf("%s: want one finding, got %d", c.name, len(fs))
			continue
		}
		f := fs[0]
		if f.Object.Name != c.object || !strings.Contains(f.Title, c.in) || !strings.Contains(f.Fix.SQL, c.fix) {
			t.Errorf("%s: got %s %q\nfix %q", c.name, f.Object.Name, f.Title, f.Fix.SQL)
		}
		if got := f.Experiment != nil && f.Experiment.Kind == model.ExpVacuumThrottle; got != c.exp {
			t.Errorf("%s: experiment %v, want %v", c.name, got, c.exp)
		}
	}
}

// TestAutovacuumLagExperimentThrottles: the experiment compares the
// throttle each busy worker gets now (the server's limit shared by the
// three) with the proposed one shared the same way.
func TestAutovacuumLagExperimentThrottles(t *testing.T) {
	s := avSnapshot(20000, busy(0, 100, 100, 101, 102), busy(10, 110, 100, 101, 102))
	s.Settings["autovacuum_vacuum_cost_limit"] = model.Setting{Value: "30"}
	s.Settings["autovacuum_vacuum_cost_delay"] = model.Setting{Value: "20"}
	fs, _ := autovacuumLag(s)
	if len(fs) != 1 || fs[0].Experiment == nil {
		t.Fatalf("want one finding with an experiment, got %+v", fs)
	}
	e := fs[0].Experiment
	if e.AppSettings["vacuum_cost_limit"] != "10" || e.AppSettings["vacuum_cost_delay"] != "20" || e.FixSettings["vacuum_cost_limit"] != "667" || e.Table.Name != "tickets" {
		t.Errorf("throttles now %v, proposed %v, on %s", e.AppSettings, e.FixSettings, e.Table.Name)
	}
}

// TestAutovacuumLagHandsTableBloat: a table waiting for a busy worker, or
// on its own crawl, has its dead rows reported by table-bloat as
// information pointing here; one autovacuum keeps up with stays a warning.
func TestAutovacuumLagHandsTableBloat(t *testing.T) {
	s := avSnapshot(50000, busy(0, 100, 100, 101, 102), busy(10, 110, 100, 101, 102))
	s.Settings["autovacuum_vacuum_cost_limit"] = model.Setting{Value: "10"}
	fs, _ := tableBloat(s)
	for _, f := range fs {
		if f.Severity != model.Info || !strings.Contains(f.Title, "see autovacuum-lag") {
			t.Errorf("%s: %s %q", f.Object.Name, f.Severity, f.Title)
		}
	}
	if len(fs) != 4 {
		t.Errorf("want the four tables' dead rows, got %d", len(fs))
	}
	quiet := avSnapshot(50000)
	fs, _ = tableBloat(quiet)
	if len(fs) == 0 || fs[0].Severity != model.Warning {
		t.Errorf("with autovacuum keeping up, table-bloat should warn: %+v", fs)
	}
}

// TestAutovacuumLagHidden: workers whose tables the role cannot see get
// the "could not see" line with the grant.
func TestAutovacuumLagHidden(t *testing.T) {
	r := model.AutovacuumReading{At: 1, Workers: []model.AutovacuumWorker{{PID: 7, Hidden: true}}}
	_, skips := autovacuumLag(avSnapshot(0, r))
	if len(skips) != 1 || !strings.Contains(skips[0].Fix, "GRANT pg_read_all_stats TO monitor") {
		t.Errorf("skips %+v", skips)
	}
	// Three hidden workers of this database: as many tables past their
	// trigger may be theirs; a fourth waits.
	hidden := func(n int) []model.AutovacuumWorker {
		var ws []model.AutovacuumWorker
		for i := range n {
			ws = append(ws, model.AutovacuumWorker{PID: 10 + i, Database: "helpdesk", Hidden: true})
		}
		return ws
	}
	s := avSnapshot(20000, model.AutovacuumReading{At: 0, Workers: hidden(3)}, model.AutovacuumReading{At: 10, Workers: hidden(3)})
	s.Settings["autovacuum_vacuum_cost_limit"] = model.Setting{Value: "10"}
	fs, _ := autovacuumLag(s)
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "at most 3 of them have a worker") {
		t.Errorf("four tables past their trigger, three hidden workers: %+v", fs)
	}
	s.Tables = s.Tables[:3]
	if fs, _ := autovacuumLag(s); len(fs) != 0 {
		t.Errorf("three tables past their trigger may be the three hidden workers': %q", fs[0].Title)
	}
}

func TestParseAutovacuumQuery(t *testing.T) {
	for q, want := range map[string]struct {
		table         string
		analyze, wrap bool
	}{
		"autovacuum: VACUUM public.tickets":                        {"public.tickets", false, false},
		"autovacuum: VACUUM ANALYZE app.events":                    {"app.events", false, false},
		"autovacuum: ANALYZE public.t":                             {"public.t", true, false},
		"autovacuum: VACUUM public.orders (to prevent wraparound)": {"public.orders", false, true},
		"autovacuum: BRIN summarize public.logs 12":                {"", false, false},
		"SELECT 1": {"", false, false},
		"autovacuum: VACUUM ANALYZE pg_catalog.pg_class (to prevent wraparound)": {"pg_catalog.pg_class", false, true},
	} {
		table, analyze, wrap := model.ParseAutovacuumQuery(q)
		if table != want.table || analyze != want.analyze || wrap != want.wrap {
			t.Errorf("%q: got %q %v %v", q, table, analyze, wrap)
		}
	}
}
