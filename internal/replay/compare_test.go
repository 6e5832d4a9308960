package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
)

// TestMeasured: what the verdict calls a change, and what it does not.
func TestMeasured(t *testing.T) {
	for _, c := range []struct {
		name   string
		a, b   []float64
		higher bool
		want   int
	}{
		{"ten times less time", []float64{1.6, 1.7, 1.8}, []float64{0.08, 0.08, 0.09}, false, 1},
		{"ten times more time", []float64{0.08, 0.08, 0.09}, []float64{1.6, 1.7, 1.8}, false, -1},
		{"11% apart, runs spread 15%", []float64{0.85, 0.91, 1.0}, []float64{0.77, 0.81, 0.84}, false, 0},
		{"overlapping runs", []float64{1, 2, 3}, []float64{0.5, 1.5, 2.5}, false, 0},
		{"5% apart, tight runs", []float64{1.00, 1.01, 1.00}, []float64{0.95, 0.95, 0.96}, false, 0},
		{"goodput up, beyond the spread", []float64{0, 0, 1.8}, []float64{4.5, 7.7, 9.7}, true, 1},
		{"twenty times less, one run of A slowed by a busy moment", []float64{1.169, 1.2, 4.429}, []float64{0.047, 0.065, 0.221}, false, 1},
		{"4% apart, one run of each slowed", []float64{1.0, 1.1, 2.0}, []float64{0.95, 1.05, 1.9}, false, 0},
		{"one run a side: no spread to judge by", []float64{2}, []float64{1}, false, 0},
		{"all zero", []float64{0, 0}, []float64{0, 0}, true, 0},
	} {
		if got := measured(c.a, c.b, c.higher); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestShapeVerdictFollowsItsInterval: a shape is called from the ratio
// printed beside it, so the two agree (the cases a report contradicted),
// and a no change says which test failed.
func TestShapeVerdictFollowsItsInterval(t *testing.T) {
	for _, c := range []struct {
		r    Estimate
		want string
		why  string
	}{
		{Estimate{0.878, 0.765, 1.006}, NoChange, "holds 1"},
		{Estimate{1.248, 1.112, 1.410}, Slower, ""},
		{Estimate{1.428, 1.313, 1.619}, Slower, ""},
		{Estimate{0.5, 0.4, 0.6}, Faster, ""},
		{Estimate{1.05, 1.01, 1.09}, NoChange, "under 10%"},
	} {
		got, why := shapeVerdict(c.r, true)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%+v: %s (%s), want %s (%s)", c.r, got, why, c.want, c.why)
		}
	}
	// Runs that do not overlap, 67% apart, but a side that spreads more
	// than that: no change, and the reason says so.
	if v, why := measuredWhy([]float64{1, 1.05, 3}, []float64{3.1, 3.2, 3.3}, false); v != 0 || !strings.Contains(why, "spread") {
		t.Errorf("%d, %q", v, why)
	}
}

// TestFewSucceededIsNoChange: a busy machine where nearly every call of
// both sides timed out; one side completed a statement or two more a
// run. That is chance, not the change: no verdict on goodput, and the
// reason says so. A side that completed many more is still better.
func TestFewSucceededIsNoChange(t *testing.T) {
	w := &capture.Workload{Statements: 48}
	side := func(errors ...int) *SideResult {
		s := &SideResult{}
		for _, e := range errors {
			s.Runs = append(s.Runs, &Result{Statements: 48, Errors: e, Wall: 9600 * time.Millisecond})
		}
		return s
	}
	c := judge(w, side(46, 47), side(48, 48))
	if c.Verdict != NoChange || !strings.Contains(strings.Join(c.Why, "; "), "succeeded differ by 1.5") {
		t.Errorf("1.5 statements a run: %s %v", c.Verdict, c.Why)
	}
	if c := judge(w, side(40, 41), side(2, 3)); c.Verdict != Faster {
		t.Errorf("38 more statements a run: %s %v", c.Verdict, c.Why)
	}
}

// TestNothingConnectedIsInconclusive: a comparison in which no session
// could connect (a DSN that required TLS of a server without it) ran
// nothing on either side, and both sides agree on nothing: that is no
// verdict, never "no measurable change", and the reasons say how many
// and why. One session of five refused on one side is inconclusive too.
func TestNothingConnectedIsInconclusive(t *testing.T) {
	w := &capture.Workload{Statements: 48, Sessions: make([]*capture.Session, 5)}
	refused := func(failed, notRun int) *SideResult {
		s := &SideResult{Name: "side"}
		for range 3 {
			s.Runs = append(s.Runs, &Result{Sessions: 5, ConnectFailed: failed, NotRun: notRun, Statements: 48 - notRun,
				ConnectErrors: []string{"server refused TLS connection"}, Wall: time.Second})
		}
		return s
	}
	c := judge(w, refused(5, 48), refused(5, 48))
	why := strings.Join(c.Why, "; ")
	if c.Verdict != Inconclusive || !strings.Contains(why, "15 of 15 sessions could not connect") || !strings.Contains(why, "server refused TLS connection") {
		t.Errorf("nothing connected: %s %v", c.Verdict, c.Why)
	}
	if c := judge(w, refused(0, 0), refused(1, 10)); c.Verdict != Inconclusive || !strings.Contains(strings.Join(c.Why, "; "), "30 of 144 statements were not sent") {
		t.Errorf("one session refused: %s %v", c.Verdict, c.Why)
	}
	if c := judge(w, refused(0, 0), refused(0, 0)); c.Verdict == Inconclusive {
		t.Errorf("all replayed: %s %v", c.Verdict, c.Why)
	}
}

// TestRetargetKeepsTheFallbacks: a DSN without sslmode is libpq's prefer,
// TLS first and then plain; pointed at another address (a copy, a pool),
// a replay session keeps both ways of connecting.
func TestRetargetKeepsTheFallbacks(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://app@db.example.com:5432/shop")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSConfig == nil || len(cfg.Fallbacks) == 0 {
		t.Fatalf("prefer parsed as %v and %d fallbacks", cfg.TLSConfig != nil, len(cfg.Fallbacks))
	}
	retarget(cfg, "127.0.0.1", 6432)
	if cfg.Host != "127.0.0.1" || cfg.Port != 6432 || len(cfg.Fallbacks) != 1 || cfg.Fallbacks[0].TLSConfig != nil ||
		cfg.Fallbacks[0].Host != "127.0.0.1" || cfg.Fallbacks[0].Port != 6432 {
		t.Errorf("retargeted: %s:%d tls %v, fallbacks %+v", cfg.Host, cfg.Port, cfg.TLSConfig != nil, cfg.Fallbacks)
	}
}

// TestPairedRunsSeeThroughALoadSpike: a shape 3.7x slower on B, four calls
// a run, three pairs of runs; a busy moment slows A's calls of the third
// pair to B's level. The pooled interval then holds 1, but two pairs of
// three had every B call slower than every A call: slower, with the ratio
// of those pairs. Two identical sides are no change; one call a run is
// too few to decide on, and the reason says so.
func TestPairedRunsSeeThroughALoadSpike(t *testing.T) {
	w := &capture.Workload{Statements: 12, Shapes: []capture.Shape{{Fingerprint: "f", Query: "SELECT total FROM orders WHERE id = $1"}}}
	side := func(runs ...[]float64) *SideResult {
		s := &SideResult{}
		for _, ms := range runs {
			total := 0.0
			for _, x := range ms {
				total += x
			}
			s.Runs = append(s.Runs, &Result{Statements: len(ms), Wall: time.Second,
				Shapes: []*ShapeResult{{Fingerprint: "f", Query: w.Shapes[0].Query, Calls: len(ms), TotalMS: total, MS: ms}}})
		}
		return s
	}
	a := side([]float64{1.0, 1.1, 0.9, 1.0}, []float64{1.05, 0.95, 1.0, 1.1}, []float64{3.9, 4.2, 3.5, 4.6})
	b := side([]float64{3.7, 3.6, 3.9, 3.8}, []float64{3.8, 3.5, 3.7, 4.0}, []float64{3.9, 3.6, 4.0, 3.7})
	c := judge(w, a, b)
	sh := c.Shapes[0]
	if sh.Verdict != Slower || sh.Ratio.Low < 3 || !strings.Contains(sh.Why, "2 of 3 pairs") {
		t.Errorf("the spike: %s, ratio %+v, %s", sh.Verdict, sh.Ratio, sh.Why)
	}
	same := side([]float64{1.0, 1.1, 0.9, 1.0}, []float64{1.05, 0.95, 1.0, 1.1}, []float64{1.0, 1.2, 0.9, 1.1})
	if sh := judge(w, a, same).Shapes[0]; sh.Verdict == Slower {
		t.Errorf("identical sides but a spike on A: %s %s", sh.Verdict, sh.Why)
	}
	one := side([]float64{1}, []float64{1.1}, []float64{1})
	oneB := side([]float64{0.95}, []float64{3.7}, []float64{1.05})
	if sh := judge(w, one, oneB).Shapes[0]; sh.Verdict != NoChange || !strings.Contains(sh.Why, "too few calls") {
		t.Errorf("one call a run: %s %s", sh.Verdict, sh.Why)
	}
}
