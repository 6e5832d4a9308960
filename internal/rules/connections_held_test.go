package rules

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// heldIdle is n sessions of one application, idle since their last
// lookup for idleMS, and busy sessions running a report.
func heldIdle(n int, idleMS float64, busy int) []model.Backend {
	var out []model.Backend
	for i := range n {
		out = append(out, model.Backend{PID: 200 + i, User: "app", App: "orders-api", State: "idle", StateMS: idleMS, Query: "SELECT id, status FROM orders WHERE id = $1"})
	}
	for i := range busy {
		out = append(out, model.Backend{PID: 400 + i, User: "app", App: "orders-api", State: "active", WaitType: "IO", Wait: "DataFileRead", Query: "SELECT sum(total) FROM orders"})
	}
	return out
}

// hiddenStates is what an ordinary role sees of other roles' sessions:
// no state, no statement.
func hiddenStates(bs []model.Backend) []model.Backend {
	for i := range bs {
		bs[i].State, bs[i].Query, bs[i].StateMS, bs[i].App = "", "", 0, ""
	}
	return bs
}

// limited sets max_connections and the reserved slots, and the refusals
// the server's log counted.
func limited(s *model.Snapshot, maxConn, reserved int, refused int64) *model.Snapshot {
	s.Activity.MaxConnections = maxConn
	s.Tables = []model.Table{{Schema: "public", Name: "orders"}}
	s.Settings = map[string]model.Setting{"superuser_reserved_connections": {Value: strconv.Itoa(reserved)}, "reserved_connections": {Value: "0"}}
	if refused >= 0 {
		s.Logged = &model.LogEvents{Seconds: 600, TooManyClients: refused}
	}
	return s
}

func TestHeldConnections(t *testing.T) {
	for _, c := range []struct {
		name     string
		s        *model.Snapshot
		sev      model.Severity // 0: no finding
		titleHas []string
		slots    int // the experiment's admitted sessions; 0: none
	}{
		{"ninety idle of 100, twelve refused in the log", limited(sampledSnapshot(5, heldIdle(90, 4000, 2)...), 100, 3, 12), model.Critical,
			[]string{"refused 12 connections", "92 of max_connections=100 connections were open at the peak and 90 of them sat idle (a median 4.0 s", "application orders-api, role app (90 of them)"}, 97},
		{"ninety idle of 100, no refusal logged", limited(sampledSnapshot(5, heldIdle(90, 4000, 2)...), 100, 3, 0), model.Warning,
			[]string{"90 of them sat idle"}, 97},
		{"no log read: the sessions still say it", limited(sampledSnapshot(5, heldIdle(17, 300, 0)...), 20, 3, -1), model.Warning,
			[]string{"17 of max_connections=20"}, 17},
		{"refusals in the log, the sessions far from the limit now", limited(sampledSnapshot(5, heldIdle(10, 300, 1)...), 100, 3, 40), model.Critical,
			[]string{"refused 40 connections"}, 0},
		{"ninety of 100 open, their states hidden from pgmedic's role", limited(sampledSnapshot(5, hiddenStates(heldIdle(90, 4000, 0))...), 100, 3, -1), model.Warning,
			[]string{"90 of max_connections=100 connections were open (90 of them other roles' sessions", "GRANT pg_read_all_stats"}, 0},
		{"forty idle of 100: room left", limited(sampledSnapshot(5, heldIdle(40, 4000, 2)...), 100, 3, 0), 0, nil, 0},
		{"ninety of 100 open, most of them busy: near the limit, not held", limited(sampledSnapshot(5, heldIdle(20, 4000, 70)...), 100, 3, 0), model.Warning,
			[]string{"90 of max_connections=100 connections were open"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := connectionPressure(c.s)
			if c.sev == 0 {
				if len(fs) != 0 {
					t.Fatalf("want nothing, got %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one finding, got %d", len(fs))
			}
			f := fs[0]
			if f.Severity != c.sev {
				t.Errorf("severity %v, want %v", f.Severity, c.sev)
			}
			for _, w := range c.titleHas {
				if !strings.Contains(f.Title, w) {
					t.Errorf("title %q lacks %q", f.Title, w)
				}
			}
			got := 0
			if f.Experiment != nil {
				got = f.Experiment.Slots
			}
			if got != c.slots {
				t.Fatalf("experiment slots %d, want %d (%+v)", got, c.slots, f.Experiment)
			}
			if c.slots > 0 {
				if f.Experiment.ThinkMS <= 0 || len(f.Experiment.Mix) == 0 {
					t.Errorf("a held replay without its idle time or statements: %+v", f.Experiment)
				}
				if !strings.Contains(f.Fix.Summary, "PgBouncer in transaction mode") || !strings.Contains(f.Fix.Summary, "default_pool_size = 4") {
					t.Errorf("fix %q names no pool and size", f.Fix.Summary)
				}
			}
		})
	}
}
