package replay

import (
	"strings"
	"testing"
	"time"

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
