package profile

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for line, want := range map[string]float64{
		"4242 (postgres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 1 0 100 2000000 3000 18446744073709551615": 3000,
		"4242 (post gres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0":                                               -1,
		"4242 (bash) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0":                                                    -1,
		"4242 (postgres) S 1 2": -1,
		"":                      -1,
	} {
		got, ok := parseProcStat([]byte(line))
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}

// FuzzParseProcStat: any /proc/<pid>/stat line reads without a panic, and
// a CPU time it returns is never negative.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (postgres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 1 0 100 2000000 3000"))
	f.Add([]byte("1 (a) b) R 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ms, ok := parseProcStat(b); ok && (ms < 0 || ms != ms) {
			t.Fatalf("%q: %v", b, ms)
		}
	})
}

func TestParseSchedstat(t *testing.T) {
	for line, want := range map[string]float64{
		"180845561 17023700 399\n": 180845561,
		"0 0 1":                    0,
		"12 34":                    -1,
		"x 1 2":                    -1,
		"":                         -1,
	} {
		got, ok := parseSchedstat([]byte(line))
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}

// TestProcCPUOfThisProcess: a process that burns a few milliseconds of CPU
// shows them, at a finer grain than the clock tick.
func TestProcCPUOfThisProcess(t *testing.T) {
	// ProcCPU answers only for PostgreSQL's processes: this test reads its
	// own through the parsers instead.
	// The busy loop runs on this OS thread, whose own count is read
	// (a process's schedstat is its main thread's).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		t.Skip("no /proc/thread-self/schedstat on this kernel")
	}
	before, ok := parseSchedstat(b)
	if !ok {
		t.Fatalf("unreadable schedstat %q", b)
	}
	// The kernel adds a running thread's time to schedstat at its
	// scheduler tick or when it is switched out, not at every read: busy
	// work goes on until the count moves (a few ms), for at most 5 s.
	x, after := 0, before
	for deadline := time.Now().Add(5 * time.Second); after <= before && time.Now().Before(deadline); {
		for i := 0; i < 1_000_000; i++ {
			x += i % 7
		}
		b, _ = os.ReadFile("/proc/thread-self/schedstat")
		after, _ = parseSchedstat(b)
	}
	if after <= before || x == 0 {
		t.Errorf("schedstat did not move over 5 s of a busy loop: %v -> %v", before, after)
	}
}
