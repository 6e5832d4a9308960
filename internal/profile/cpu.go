package profile

import (
	"context"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// CPU is pgmedic's one seam to the machine's CPU sampling, as
// envelope.Conn is its one seam to the server: perf records processes
// while something else runs (pg_stat_activity watched, or a statement
// re-run), and a clock stamps both with the same time. *Perf is the real
// one; a recorded tape (testkit) stands in for it, so the profile path
// replays without perf or a server.
type CPU interface {
	// Record samples the processes at freq samples a second for d while
	// during runs (it starts once the recording has, and its context ends
	// when the recording does), then hands every sample to fn in time
	// order.
	Record(ctx context.Context, pids []int, d time.Duration, freq int, during func(context.Context), fn func(Sample)) (Recording, error)
	// Now reads the clock samples are stamped with (seconds).
	Now() float64
	// Sleep waits d or until ctx ends.
	Sleep(ctx context.Context, d time.Duration)
}

// Recording is what one Record saw: the lines of perf's output read, and
// how long it recorded.
type Recording struct {
	Stats   ScriptStats
	Seconds float64
}

// Record implements CPU with perf record -p for d, then perf script.
// during starts once perf records (not before: perf can take a second to
// start on a busy machine), and its context ends when perf stops.
func (p *Perf) Record(ctx context.Context, pids []int, d time.Duration, freq int, during func(context.Context), fn func(Sample)) (Recording, error) {
	dir, err := os.MkdirTemp("", "pgmedic-perf-")
	if err != nil {
		return Recording{}, err
	}
	defer os.RemoveAll(dir)
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	start := time.Now()
	started := func() {
		if during != nil {
			wg.Add(1)
			go func() { defer wg.Done(); during(dctx) }()
		}
	}
	data, err := p.record(ctx, dir, pids, d, freq, started)
	stop()
	wg.Wait()
	rec := Recording{Seconds: time.Since(start).Seconds()}
	if err != nil {
		return rec, err
	}
	rec.Stats, err = p.script(ctx, data, fn)
	return rec, err
}

// Now is CLOCK_MONOTONIC in seconds: the clock perf record -k
// CLOCK_MONOTONIC stamps samples with.
func (p *Perf) Now() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// Sleep waits d or until ctx ends.
func (p *Perf) Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
