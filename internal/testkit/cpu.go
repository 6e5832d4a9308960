package testkit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
)

// CPUTape is what the CPU seam (profile.CPU) did in one run: each
// recording with the clock readings taken while it ran and the samples it
// handed back. Stacks are kept once each and referred to by number.
type CPUTape struct {
	Stacks  [][]model.Frame
	Records []CPURecord
}

// CPURecord is one profile.CPU.Record call.
type CPURecord struct {
	PIDs    []int
	Now     []float64 // clock readings taken during the recording
	Seconds float64
	Stats   profile.ScriptStats
	Samples []TapedSample
	Err     string `json:",omitempty"`
}

// TapedSample is a profile.Sample whose stack is CPUTape.Stacks[Stack].
type TapedSample struct {
	Comm     string
	PID, TID int
	Time     float64
	Period   int64
	Stack    int
}

// CPURecorder passes everything to a real CPU (perf) and keeps it.
type CPURecorder struct {
	CPU  profile.CPU
	Tape CPUTape

	mu     sync.Mutex
	cur    *CPURecord
	stacks map[string]int
}

func (r *CPURecorder) Record(ctx context.Context, pids []int, d time.Duration, freq int, during func(context.Context), fn func(profile.Sample)) (profile.Recording, error) {
	r.mu.Lock()
	r.cur = &CPURecord{PIDs: pids}
	if r.stacks == nil {
		r.stacks = map[string]int{}
	}
	r.mu.Unlock()
	rec, err := r.CPU.Record(ctx, pids, d, freq, during, func(s profile.Sample) {
		key := fmt.Sprint(s.Stack)
		i, ok := r.stacks[key]
		if !ok {
			i = len(r.Tape.Stacks)
			r.stacks[key] = i
			r.Tape.Stacks = append(r.Tape.Stacks, s.Stack)
		}
		r.cur.Samples = append(r.cur.Samples, TapedSample{Comm: s.Comm, PID: s.PID, TID: s.TID, Time: s.Time, Period: s.Period, Stack: i})
		fn(s)
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur.Seconds, r.cur.Stats = rec.Seconds, rec.Stats
	if err != nil {
		r.cur.Err = err.Error()
	}
	r.Tape.Records = append(r.Tape.Records, *r.cur)
	r.cur = nil
	return rec, err
}

// Now reads the real clock; a reading taken during a recording is kept.
func (r *CPURecorder) Now() float64 {
	v := r.CPU.Now()
	r.mu.Lock()
	if r.cur != nil {
		r.cur.Now = append(r.cur.Now, v)
	}
	r.mu.Unlock()
	return v
}

func (r *CPURecorder) Sleep(ctx context.Context, d time.Duration) { r.CPU.Sleep(ctx, d) }

// CPUReplayer plays a CPUTape back: each Record runs during (on the
// caller's goroutine) while the clock gives the recorded readings in
// order; when the last one is read, during's context ends, as it ended
// when perf stopped. Then the samples are handed back. Sleep does not
// wait. Recordings asked for other processes than the tape's fail the test.
type CPUReplayer struct {
	T    *testing.T
	Tape CPUTape

	next   int
	now    []float64
	last   float64
	cancel context.CancelFunc
}

func (r *CPUReplayer) Record(ctx context.Context, pids []int, d time.Duration, freq int, during func(context.Context), fn func(profile.Sample)) (profile.Recording, error) {
	r.T.Helper()
	if r.next >= len(r.Tape.Records) {
		r.T.Fatalf("more recordings than the tape holds (%d)", len(r.Tape.Records))
	}
	rec := r.Tape.Records[r.next]
	r.next++
	if !slices.Equal(rec.PIDs, pids) {
		r.T.Fatalf("recording %d: pids %v, the tape has %v", r.next, pids, rec.PIDs)
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.now, r.cancel = rec.Now, cancel
	if len(r.now) == 0 {
		cancel()
	}
	if during != nil {
		during(dctx)
	}
	if len(r.now) > 0 {
		r.T.Errorf("recording %d: %d clock readings left over", r.next, len(r.now))
	}
	r.cancel = nil
	for _, s := range rec.Samples {
		fn(profile.Sample{Comm: s.Comm, PID: s.PID, TID: s.TID, Time: s.Time, Period: s.Period, Stack: r.Tape.Stacks[s.Stack]})
	}
	out := profile.Recording{Seconds: rec.Seconds, Stats: rec.Stats}
	if rec.Err != "" {
		return out, fmt.Errorf("%s", rec.Err)
	}
	return out, nil
}

func (r *CPUReplayer) Now() float64 {
	if len(r.now) == 0 {
		return r.last
	}
	r.last, r.now = r.now[0], r.now[1:]
	if len(r.now) == 0 && r.cancel != nil {
		r.cancel()
	}
	return r.last
}

func (r *CPUReplayer) Sleep(ctx context.Context, d time.Duration) {}

// Collapse shortens a transcript for reading: runs of identical blocks of
// up to twelve lines (the sampler's ticks, a re-run's transactions) become
// the block once and a line saying how often it repeated.
func Collapse(transcript string) string {
	lines := strings.Split(strings.TrimSuffix(transcript, "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); {
		best, reps := 1, 1
		for n := 1; n <= 12 && i+n <= len(lines); n++ {
			k := 1
			for i+(k+1)*n <= len(lines) && slices.Equal(lines[i:i+n], lines[i+k*n:i+(k+1)*n]) {
				k++
			}
			if k > 1 && k*n > best*reps {
				best, reps = n, k
			}
		}
		out = append(out, lines[i:i+best]...)
		if reps > 1 {
			out = append(out, fmt.Sprintf("... the %d lines above %d times in all", best, reps))
		}
		i += best * reps
	}
	return strings.Join(out, "\n") + "\n"
}
