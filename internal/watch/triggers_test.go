package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// ticks builds n ticks a second apart from start, each with the backends
// of make(i).
func ticks(start time.Time, n int, make func(i int) []model.Backend) []Record {
	var out []Record
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * time.Second)
		out = append(out, Record{Kind: "tick", At: at, Sample: &model.ActivitySample{At: at, Backends: make(i)}})
	}
	return out
}

func waiting(n int) []model.Backend {
	bs := []model.Backend{{PID: 1, State: "idle in transaction", StateMS: 500, Query: "UPDATE accounts SET balance = balance - 5 WHERE id = 1"}}
	for i := 0; i < n; i++ {
		bs = append(bs, model.Backend{PID: 10 + i, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{1}, Query: "UPDATE accounts SET balance = balance + 1 WHERE id = 1"})
	}
	return bs
}

func busy(n int) []model.Backend {
	var bs []model.Backend
	for i := 0; i < n; i++ {
		bs = append(bs, model.Backend{PID: 100 + i, State: "active", Query: "SELECT heavy()"})
	}
	return bs
}

func TestTriggers(t *testing.T) {
	cases := []struct {
		name  string
		recs  []Record
		want  string // the kind that must fire ("" for none)
		never []string
	}{
		{"quiet server", ticks(t0, 20, func(int) []model.Backend { return busy(1) }), "", nil},
		{"lock queue held two ticks", ticks(t0, 3, func(int) []model.Backend { return waiting(3) }), LockQueue, []string{Saturation}},
		{"one waiter is no queue", ticks(t0, 10, func(int) []model.Backend { return waiting(1) }), "", nil},
		{"a lock queue of one tick is a blip", ticks(t0, 6, func(i int) []model.Backend {
			if i%2 == 0 {
				return waiting(4)
			}
			return nil
		}), "", nil},
		{"more working sessions than cores", ticks(t0, 4, func(int) []model.Backend { return busy(6) }), Saturation, nil},
		{"as many as cores is not saturation", ticks(t0, 10, func(int) []model.Backend { return busy(2) }), "", nil},
		{"sessions waiting for their clients do not work", ticks(t0, 10, func(int) []model.Backend {
			bs := busy(6)
			for i := range bs {
				bs[i].WaitType, bs[i].Wait = "Client", "ClientRead"
			}
			return bs
		}), "", []string{Saturation}},
		{"idle transactions in their client", ticks(t0, 6, func(i int) []model.Backend {
			return []model.Backend{{PID: 7, State: "idle in transaction", StateMS: 1200 + float64(i), Query: "INSERT INTO exported VALUES ($1)"}}
		}), ClientStall, nil},
		{"short idle transactions are not stalls", ticks(t0, 10, func(int) []model.Backend {
			return []model.Backend{{PID: 7, State: "idle in transaction", StateMS: 30}}
		}), "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &Detector{T: Defaults(2)}
			fired := map[string]string{}
			for _, r := range c.recs {
				for _, f := range d.Tick(r) {
					fired[f.Kind] = f.Detail
				}
			}
			if c.want == "" && len(fired) > 0 {
				t.Fatalf("fired %v on a case that must not fire", fired)
			}
			if c.want != "" && fired[c.want] == "" {
				t.Fatalf("%s did not fire (fired: %v)", c.want, fired)
			}
			for _, k := range c.never {
				if _, ok := fired[k]; ok {
					t.Errorf("%s fired: %s", k, fired[k])
				}
			}
		})
	}
}

func TestLockQueueNamesTheHead(t *testing.T) {
	// pg_blocking_pids names the waiters ahead in the queue too: the head
	// is the one that waits for no lock.
	bs := []model.Backend{
		{PID: 1, State: "idle in transaction", Query: "UPDATE t SET v = 1"},
		{PID: 2, State: "active", WaitType: "Lock", BlockedBy: []int{1}},
		{PID: 3, State: "active", WaitType: "Lock", BlockedBy: []int{2}},
		{PID: 4, State: "active", WaitType: "Lock", BlockedBy: []int{2, 3}},
	}
	d := &Detector{T: Defaults(2)}
	var detail string
	for _, r := range ticks(t0, 2, func(int) []model.Backend { return bs }) {
		for _, f := range d.Tick(r) {
			detail = f.Detail
		}
	}
	if !strings.Contains(detail, "behind pid 1 ") {
		t.Fatalf("the head named is not pid 1: %q", detail)
	}
}

// counters makes ticks with pg_stat_database counters that grow by
// perTick errors and new sessions, and by burst in the ticks from..to.
func counters(n int, perTick, burst int64, from, to int) []Record {
	var out []Record
	var errs, sess int64
	for i := 0; i < n; i++ {
		errs += perTick
		sess += perTick
		if i >= from && i < to {
			errs += burst
			sess += burst
		}
		out = append(out, Record{Kind: "tick", At: t0.Add(time.Duration(i) * time.Second),
			Databases: map[string]model.DatabaseDelta{"app": {Rollbacks: errs, Sessions: sess + 1}}})
	}
	return out
}

func TestBursts(t *testing.T) {
	cases := []struct {
		name string
		recs []Record
		want bool
	}{
		{"steady traffic", counters(120, 3, 0, 0, 0), false},
		{"a burst five times the usual", counters(120, 1, 10, 100, 106), true},
		{"a burst with no history yet is not judged", counters(8, 0, 20, 2, 8), false},
		{"too few to matter", counters(120, 0, 1, 100, 105), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &Detector{T: Defaults(2)}
			got := map[string]bool{}
			for _, r := range c.recs {
				for _, f := range d.Tick(r) {
					got[f.Kind] = true
				}
			}
			if got[ErrorBurst] != c.want || got[ConnBurst] != c.want {
				t.Fatalf("error burst %v, connection burst %v; want %v", got[ErrorBurst], got[ConnBurst], c.want)
			}
		})
	}
}

func TestCounterResetIsNoBurst(t *testing.T) {
	recs := counters(120, 2, 0, 0, 0)
	for i := 100; i < len(recs); i++ { // the server restarted: counters from 0
		recs[i].Databases = map[string]model.DatabaseDelta{"app": {Rollbacks: int64(i - 100), Sessions: int64(i - 100)}}
	}
	d := &Detector{T: Defaults(2)}
	for _, r := range recs {
		if fs := d.Tick(r); len(fs) > 0 {
			t.Fatalf("a counter reset fired %v", fs)
		}
	}
}

func stmt(calls int64, meanMS, sdMS float64) Statement {
	st := Statement{Database: "app"}
	st.QueryID, st.Calls, st.Query = 42, calls, "SELECT * FROM orders WHERE customer_id = $1"
	st.TotalExecMS = float64(calls) * meanMS
	st.SumSqMS = float64(calls) * (sdMS*sdMS + meanMS*meanMS)
	return st
}

func TestStatementSlowdown(t *testing.T) {
	d := &Detector{T: Defaults(2)}
	for i := 0; i < 4; i++ {
		if fs := d.Statements(t0, []Statement{stmt(100, 20, 5)}); len(fs) > 0 {
			t.Fatalf("reading %d fired %v", i, fs)
		}
	}
	if got := P95(stmt(100, 20, 5)); got < 28 || got > 29 {
		t.Fatalf("p95 estimate %.2f, want 20 + 1.645*5", got)
	}
	if fs := d.Statements(t0, []Statement{stmt(10, 900, 10)}); len(fs) > 0 {
		t.Fatalf("10 calls fired %v: too few to judge", fs)
	}
	fs := d.Statements(t0, []Statement{stmt(100, 400, 150)})
	if len(fs) != 1 || fs[0].Kind != Slowdown {
		t.Fatalf("a p95 jump from 28 ms to 650 ms fired %v", fs)
	}
	// A statement seen for the first time has no usual yet.
	d2 := &Detector{T: Defaults(2)}
	if fs := d2.Statements(t0, []Statement{stmt(100, 4000, 10)}); len(fs) > 0 {
		t.Fatalf("a new statement fired %v", fs)
	}
}

func TestIncidents(t *testing.T) {
	m := &Incidents{Before: 10 * time.Second, After: 5 * time.Second, MaxLength: time.Minute}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	lock := []Firing{{Kind: LockQueue, Detail: "3 waiting"}}
	sat := []Firing{{Kind: Saturation, Detail: "9 working"}}
	var done []*Incident
	observe := func(s int, f []Firing) {
		_, d := m.Observe(at(s), f)
		if d != nil {
			done = append(done, d)
		}
	}
	for s := 0; s < 10; s++ {
		observe(s, nil)
	}
	observe(10, lock)
	observe(11, append(lock, sat...))
	observe(12, nil) // a quiet tick inside the incident does not end it
	observe(13, sat)
	for s := 14; s < 18; s++ {
		observe(s, nil)
	}
	if len(done) != 0 {
		t.Fatalf("closed before %s of quiet", m.After)
	}
	observe(18, nil)
	if len(done) != 1 {
		t.Fatalf("%d incidents closed, want 1", len(done))
	}
	inc := done[0]
	if inc.From != at(0) || inc.To != at(18) || strings.Join(inc.Kinds(), ",") != "lock-queue,working-sessions" || inc.Firings[Saturation] != 2 {
		t.Fatalf("incident %+v", inc)
	}
	// A trigger that never stops: one bundle at MaxLength, and none
	// again until it has been quiet for After.
	for s := 100; s < 300; s++ {
		observe(s, sat)
	}
	if len(done) != 2 || done[1].CutShort == "" {
		t.Fatalf("a 200 s incident gave %d bundles, want one cut at %s", len(done)-1, m.MaxLength)
	}
	for s := 300; s < 306; s++ {
		observe(s, nil)
	}
	observe(400, lock)
	if m.Open() == nil {
		t.Fatal("no incident opened after the long one ended")
	}
	if inc := m.Stop(at(401)); inc == nil || inc.CutShort == "" {
		t.Fatalf("stopping with an incident open gave %+v", inc)
	}
}

// TestTriggerTable keeps the triggers table the one list: every row has
// an id and a meaning, ids are unique, /metrics exports each, and each
// session trigger's function fires on a tick made for it and on no quiet
// one.
func TestTriggerTable(t *testing.T) {
	m := NewMetrics()
	m.Register(Target{Name: "t"})
	var b strings.Builder
	if err := m.Write(&b); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tr := range Triggers {
		if tr.ID == "" || tr.Says == "" || seen[tr.ID] {
			t.Errorf("trigger %+v: an id, unique, and what it means", tr)
		}
		seen[tr.ID] = true
		if !strings.Contains(b.String(), `trigger="`+tr.ID+`"`) {
			t.Errorf("/metrics does not export trigger %s", tr.ID)
		}
		if tr.Sessions != (tr.tick != nil) {
			t.Errorf("trigger %s: a session trigger judges ticks, and only those do", tr.ID)
		}
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quiet := Record{At: at, Sample: &model.ActivitySample{}}
	loud := Record{At: at, Sample: &model.ActivitySample{Backends: []model.Backend{
		{PID: 1, State: "idle in transaction", StateMS: 5000, Query: "UPDATE a"},
		{PID: 2, State: "active", WaitType: "Lock", BlockedBy: []int{1}},
		{PID: 3, State: "active", WaitType: "Lock", BlockedBy: []int{1}},
		{PID: 4, State: "active"}, {PID: 5, State: "active"}, {PID: 6, State: "active"},
	}}, Pools: &model.PoolSample{Pools: []model.Pool{{Database: "app", User: "app", ClWaiting: 3, MaxWaitMS: 900}}}}
	for _, tr := range Triggers {
		if tr.tick == nil {
			continue
		}
		d := &Detector{T: Defaults(2)}
		for i := 0; i < 10; i++ {
			if got := tr.tick(d, d.view(quiet)); got != "" {
				t.Fatalf("%s fired on a quiet tick: %s", tr.ID, got)
			}
		}
		fired := ""
		for i := 0; i < 10 && fired == ""; i++ {
			fired = tr.tick(d, d.view(loud))
		}
		if fired == "" {
			t.Errorf("%s never fired on ticks made for it", tr.ID)
		}
	}
}

// TestOwnWorkIsNoBurst: watch reading an incident's catalogs rolls back
// dozens of transactions and opens a session. Counted by watch before the
// server reports them (the server's counters lag), they fire nothing;
// the same jump that was not watch's fires both bursts.
func TestOwnWorkIsNoBurst(t *testing.T) {
	for _, own := range []bool{true, false} {
		recs := counters(120, 1, 10, 100, 106)
		var work OwnWork
		for i := range recs {
			if own && i == 98 { // watch counts its work two ticks early
				work = OwnWork{Rollbacks: 6 * 10, Sessions: 6 * 10}
			}
			w := work
			recs[i].Own = &w
		}
		d := &Detector{T: Defaults(2)}
		got := map[string]bool{}
		for _, r := range recs {
			for _, f := range d.Tick(r) {
				got[f.Kind] = true
			}
		}
		if got[ErrorBurst] == own || got[ConnBurst] == own {
			t.Errorf("own work %v: error burst %v, connection burst %v", own, got[ErrorBurst], got[ConnBurst])
		}
	}
}
