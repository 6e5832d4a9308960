package collect

import (
	"context"
	"testing"
	"time"
)

// fakeClock is time the test moves: waiting on it moves it at once, and a
// tick moves it by how long the test says the tick took.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.t = c.t.Add(max(d, 0)) // as time.After: a past moment is now
	ch := make(chan time.Time, 1)
	ch <- c.t
	return ch
}

// TestSchedule: the sampler's ticks on a clock of the test's own. Fast
// ticks come every interval; a slow moment slows the sampling and it
// recovers afterwards; a server that stays slow is sampled at most every
// 2s; the window is kept whatever the ticks take.
func TestSchedule(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name      string
		window    time.Duration
		took      func(i int) time.Duration // how long tick i takes
		wantTicks int
		backedOff bool
		// wantGaps, when set, are the intervals between tick starts.
		wantGaps []time.Duration
	}{
		{"fast server", time.Second, func(int) time.Duration { return ms }, 10, false, nil},
		// A busy server answers in 80 or 300 ms: the next tick follows at
		// the interval or at once, the interval stays (sampled as often
		// as the server answers, not less often).
		{"one slow tick, then fast", time.Second, func(i int) time.Duration {
			if i == 2 {
				return 80 * ms
			}
			return ms
		}, 10, false, []time.Duration{100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms}},
		{"a busy server", time.Second, func(int) time.Duration { return 300 * ms }, 4, false, []time.Duration{300 * ms, 300 * ms, 300 * ms}},
		// One that barely answers (over half a second) is asked half as
		// often, and at the interval again once it answers.
		{"one tick barely answered, then fast", 2 * time.Second, func(i int) time.Duration {
			if i == 2 {
				return 600 * ms
			}
			return ms
		}, 15, true, []time.Duration{100 * ms, 100 * ms, 600 * ms, 100 * ms}},
		{"a slow server", 10 * time.Second, func(int) time.Duration { return 1500 * ms }, 6, true, nil},
		{"a tick longer than the window", time.Second, func(int) time.Duration { return 3 * time.Second }, 1, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			start := clk.t
			var starts []time.Time
			backedOff, err := schedule(context.Background(), clk, c.window, 100*ms, func(at time.Time) error {
				starts = append(starts, at)
				clk.t = clk.t.Add(c.took(len(starts) - 1))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(starts) != c.wantTicks || backedOff != c.backedOff {
				t.Errorf("%d ticks, backed off %v; want %d, %v", len(starts), backedOff, c.wantTicks, c.backedOff)
			}
			for i, at := range starts {
				if at.Sub(start) >= c.window {
					t.Errorf("tick %d at %s, after the window", i, at.Sub(start))
				}
				if i > 0 && at.Sub(starts[i-1]) > 2*time.Second && c.took(i-1) <= 2*time.Second {
					t.Errorf("tick %d came %s after the last one (at most 2s)", i, at.Sub(starts[i-1]))
				}
				if c.wantGaps != nil && i > 0 && i-1 < len(c.wantGaps) && at.Sub(starts[i-1]) != c.wantGaps[i-1] {
					t.Errorf("gap before tick %d is %s, want %s", i, at.Sub(starts[i-1]), c.wantGaps[i-1])
				}
			}
		})
	}
}

// TestScheduleStops: a cancelled context ends the sampling between ticks.
func TestScheduleStops(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := schedule(ctx, clk, time.Hour, 100*time.Millisecond, func(time.Time) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if err == nil || n > 4 {
		t.Errorf("%d ticks after the cancel, err %v", n, err)
	}
}

func TestPace(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ interval, took, want time.Duration }{
		{100 * ms, 10 * ms, 100 * ms}, // ordinary
		// A busy server's answer in 60 or 300 ms: the next tick follows
		// it at once, the interval stays.
		{100 * ms, 60 * ms, 100 * ms},
		{100 * ms, 300 * ms, 100 * ms},
		{100 * ms, 600 * ms, 200 * ms},   // barely answering: doubles
		{1600 * ms, 900 * ms, 2000 * ms}, // capped at 2s
		{2000 * ms, 1900 * ms, 2000 * ms},
		{400 * ms, 10 * ms, 200 * ms}, // fast again: halves
		{200 * ms, 10 * ms, 100 * ms}, // down to the base
		{100 * ms, 1 * ms, 100 * ms},  // never below it
		{400 * ms, 100 * ms, 400 * ms},
	} {
		if got := pace(100*ms, c.interval, c.took); got != c.want {
			t.Errorf("pace(100ms, %s, %s) = %s, want %s", c.interval, c.took, got, c.want)
		}
	}
}
