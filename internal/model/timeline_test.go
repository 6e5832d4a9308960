package model

import (
	"testing"
	"time"
)

func TestQueueHead(t *testing.T) {
	for _, c := range []struct {
		name     string
		backends []Backend
		head     int
		queue    int
	}{
		{"no waits", []Backend{{PID: 1, State: "active"}, {PID: 2, State: "idle"}}, 0, 0},
		{"a chain: 3 waits for 2, which waits for 1 idle in transaction",
			[]Backend{{PID: 1, State: "idle in transaction"}, {PID: 2, State: "active", BlockedBy: []int{1}}, {PID: 3, State: "active", BlockedBy: []int{2}}}, 1, 2},
		{"two queues: the longer one's head",
			[]Backend{{PID: 1, State: "idle in transaction"}, {PID: 2, BlockedBy: []int{1}},
				{PID: 5, State: "active"}, {PID: 6, BlockedBy: []int{5}}, {PID: 7, BlockedBy: []int{5}}}, 5, 2},
		{"a session waiting for two is counted once",
			[]Backend{{PID: 1}, {PID: 2, BlockedBy: []int{1}}, {PID: 3, BlockedBy: []int{1, 2}}}, 1, 2},
		{"a head the sample did not show", []Backend{{PID: 2, BlockedBy: []int{9}}}, 9, 1},
		{"waits pgmedic caused are not a queue", []Backend{{PID: 1}, {PID: 2, BlockedBy: []int{1}, BlockedByPgmedic: true}}, 0, 0},
		{"a deadlock in progress has no head", []Backend{{PID: 1, BlockedBy: []int{2}}, {PID: 2, BlockedBy: []int{1}}}, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, n := queueHead(c.backends)
			pid := 0
			if h != nil {
				pid = h.PID
			}
			if pid != c.head || n != c.queue {
				t.Errorf("head %d behind it %d, want %d and %d", pid, n, c.head, c.queue)
			}
		})
	}
}

func TestNewTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	samples := []ActivitySample{
		{At: at(0), Backends: []Backend{{PID: 1, State: "idle"}, {PID: 2, State: "active"}}},
		{At: at(100), Backends: []Backend{{PID: 1, State: "idle in transaction", WaitType: "Client", Wait: "ClientRead"},
			{PID: 2, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{1}},
			{PID: 3, State: "active", WaitType: "Lock", Wait: "tuple", BlockedBy: []int{2}}}},
	}
	// Pools read a few ms after each tick's sessions.
	pools := []PoolSample{{At: at(3), Pools: []Pool{{ClWaiting: 1}}}, {At: at(104), Pools: []Pool{{ClWaiting: 2, MaxWaitMS: 40}, {ClWaiting: 3, MaxWaitMS: 900}}}}
	tl := NewTimeline(samples, pools)
	if len(tl.Ticks) != 2 || !tl.From.Equal(at(0)) || !tl.To.Equal(at(100)) || !tl.PoolsSampled {
		t.Fatalf("%+v", tl)
	}
	first, second := tl.Ticks[0], tl.Ticks[1]
	if len(first.Sessions) != 1 || first.Sessions["CPU"] != 1 || first.PoolWaiting != 1 {
		t.Errorf("first tick %+v", first)
	}
	if second.Sessions["idle in transaction"] != 1 || second.Sessions["Lock/transactionid"] != 1 || second.Sessions["Lock/tuple"] != 1 {
		t.Errorf("second tick's sessions %v", second.Sessions)
	}
	if second.LockWaiters != 2 || second.Head == nil || second.Head.PID != 1 || second.HeadQueue != 2 || second.PoolWaiting != 5 || second.PoolMaxWaitMS != 900 {
		t.Errorf("second tick %+v", second)
	}
	if NewTimeline(nil, pools) != nil {
		t.Error("a timeline without ticks")
	}
}

func TestFire(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	s := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	var spans []FiredSpan
	var prev time.Time
	// lock-queue fires at ticks 0-2 and 5, pool-waits at 1 and 2 (twice at 2).
	for n := 0; n <= 5; n++ {
		kinds := map[int][]string{0: {"lock-queue"}, 1: {"lock-queue", "pool-waits"}, 2: {"lock-queue", "pool-waits", "pool-waits"}, 5: {"lock-queue"}}[n]
		for _, k := range kinds {
			spans = Fire(spans, k, s(n), prev)
		}
		prev = s(n)
	}
	want := []FiredSpan{{"lock-queue", s(0), s(2)}, {"pool-waits", s(1), s(2)}, {"lock-queue", s(5), s(5)}}
	if len(spans) != len(want) {
		t.Fatalf("%v", spans)
	}
	for i := range want {
		if spans[i].Kind != want[i].Kind || !spans[i].From.Equal(want[i].From) || !spans[i].To.Equal(want[i].To) {
			t.Errorf("span %d: %v, want %v", i, spans[i], want[i])
		}
	}
}
