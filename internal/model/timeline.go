package model

import (
	"sort"
	"time"
)

// Timeline is what the sampled ticks of a check --sample or of a watch
// incident show over time, for the picture a report opens with: the
// sessions by state and wait event at each tick, the lock queue and the
// session at its head, PgBouncer's waiting clients, and for an incident
// the triggers as they fired, the stretch the rules judged and the gaps
// where nothing was sampled.
type Timeline struct {
	From  time.Time      `json:"from"`
	To    time.Time      `json:"to"`
	Ticks []TimelineTick `json:"ticks"`
	// Judged is the stretch the rules read: the whole sample for check
	// --sample, the ticks where the triggers fired for an incident.
	Judged *Span `json:"judged,omitempty"`
	// Fired are the incident's triggers as they fired, one span per run
	// of consecutive ticks.
	Fired []FiredSpan `json:"fired,omitempty"`
	Gaps  []Span      `json:"gaps,omitempty"`
	// PoolsSampled says PgBouncer was sampled with the sessions.
	PoolsSampled bool `json:"pools_sampled,omitempty"`
}

// TimelineTick is one tick of a timeline.
type TimelineTick struct {
	At time.Time `json:"at"`
	// Sessions counts the client sessions that were not idle, by what
	// they were doing: "CPU" (active, waiting for nothing), the wait
	// event ("Lock/transactionid", "IO/DataFileRead"), or the state of
	// one waiting for its client ("idle in transaction").
	Sessions map[string]int `json:"sessions"`
	// LockWaiters counts the sessions waiting for a lock another held.
	LockWaiters int `json:"lock_waiters,omitempty"`
	// Head is the session at the head of the longest lock queue: the one
	// the others wait for, that waits for no one.
	Head *Backend `json:"head,omitempty"`
	// HeadQueue counts the sessions waiting behind Head, directly or not.
	HeadQueue int `json:"head_queue,omitempty"`
	// PoolWaiting counts PgBouncer's clients waiting for a server
	// connection, over every pool; PoolMaxWaitMS the longest such wait.
	PoolWaiting   int     `json:"pool_waiting,omitempty"`
	PoolMaxWaitMS float64 `json:"pool_maxwait_ms,omitempty"`
}

// Span is a stretch of a timeline, with what it was.
type Span struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Note string    `json:"note,omitempty"`
}

// FiredSpan is a run of ticks at which one trigger fired.
type FiredSpan struct {
	Kind string    `json:"kind"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Activity is the key a session is counted under in a timeline.
func (b Backend) Activity() string {
	switch {
	case b.State == "active" && b.WaitType == "":
		return "CPU"
	case b.State == "active":
		return b.WaitType + "/" + b.Wait
	}
	return b.State
}

// NewTimeline makes the timeline of sampled ticks, in time order, and
// the pools sampled with them.
func NewTimeline(samples []ActivitySample, pools []PoolSample) *Timeline {
	if len(samples) == 0 {
		return nil
	}
	t := &Timeline{From: samples[0].At, To: samples[len(samples)-1].At, PoolsSampled: len(pools) > 0}
	// Each reading of the pools belongs to the tick nearest in time: the
	// sampler reads them right after the sessions.
	poolOf := map[int]PoolSample{}
	for _, p := range pools {
		i := sort.Search(len(samples), func(i int) bool { return !samples[i].At.Before(p.At) })
		if i == len(samples) || (i > 0 && p.At.Sub(samples[i-1].At) < samples[i].At.Sub(p.At)) {
			i--
		}
		poolOf[i] = p
	}
	for i, s := range samples {
		tick := TimelineTick{At: s.At, Sessions: map[string]int{}}
		for _, b := range s.Backends {
			if b.State == "idle" || b.State == "" {
				continue
			}
			tick.Sessions[b.Activity()]++
			if len(b.BlockedBy) > 0 && !b.BlockedByPgmedic {
				tick.LockWaiters++
			}
		}
		tick.Head, tick.HeadQueue = queueHead(s.Backends)
		if p, ok := poolOf[i]; ok {
			for _, pool := range p.Pools {
				tick.PoolWaiting += pool.ClWaiting
				tick.PoolMaxWaitMS = max(tick.PoolMaxWaitMS, pool.MaxWaitMS)
			}
		}
		t.Ticks = append(t.Ticks, tick)
	}
	return t
}

// queueHead finds, among one tick's sessions, the one that waits for no
// one and has the most sessions waiting behind it (through any chain of
// waits), and that number; nil when no session waits for a lock.
func queueHead(bs []Backend) (*Backend, int) {
	byPID := map[int]*Backend{}
	waitsFor := map[int][]int{} // blocker -> its direct waiters
	for i := range bs {
		byPID[bs[i].PID] = &bs[i]
		if bs[i].BlockedByPgmedic {
			continue
		}
		for _, p := range bs[i].BlockedBy {
			waitsFor[p] = append(waitsFor[p], bs[i].PID)
		}
	}
	var heads []int
	for p := range waitsFor {
		if b := byPID[p]; b == nil || len(b.BlockedBy) == 0 {
			heads = append(heads, p)
		}
	}
	sort.Ints(heads)
	var best *Backend
	bestN := 0
	for _, h := range heads {
		// Sessions behind h, each counted once (a session can wait for
		// two, and a deadlock in progress is a cycle).
		seen := map[int]bool{h: true}
		queue := []int{h}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, w := range waitsFor[p] {
				if !seen[w] {
					seen[w] = true
					queue = append(queue, w)
				}
			}
		}
		if n := len(seen) - 1; n > bestN {
			bestN = n
			if b := byPID[h]; b != nil {
				c := *b
				best = &c
			} else {
				// A blocker the sample did not show (another role's, or
				// pgmedic's own session filtered out): known by its pid.
				best = &Backend{PID: h}
			}
		}
	}
	return best, bestN
}

// HideValues puts each queue head's statement through normalise, as the
// report's other statement texts are unless values are asked for.
func (t *Timeline) HideValues(normalise func(string) string) {
	if t == nil {
		return
	}
	for i := range t.Ticks {
		if h := t.Ticks[i].Head; h != nil && h.Query != "" {
			h.Query = normalise(h.Query)
		}
	}
}

// Fire records that a trigger fired at a tick; prev is the tick before
// it (the zero time at the first): a trigger that fired then too
// extends its span.
func Fire(spans []FiredSpan, kind string, at, prev time.Time) []FiredSpan {
	for i := len(spans) - 1; i >= 0; i-- {
		if spans[i].Kind == kind {
			if spans[i].To.Equal(at) {
				return spans // fired twice at one tick
			}
			if !prev.IsZero() && spans[i].To.Equal(prev) {
				spans[i].To = at
				return spans
			}
			break
		}
	}
	return append(spans, FiredSpan{Kind: kind, From: at, To: at})
}

// IncidentWindow is what an incident covers, as watch tracks it and its
// bundle keeps it: when it opened, the stretch its bundle holds (Before
// ahead of the first trigger, After past the last), how many ticks each
// trigger fired at and when (a span per run of ticks), and why the bundle
// was written before the incident ended, if it was.
type IncidentWindow struct {
	Opened   time.Time      `json:"opened"`
	From     time.Time      `json:"from"`
	To       time.Time      `json:"to"`
	Firings  map[string]int `json:"firings"`
	Fired    []FiredSpan    `json:"fired,omitempty"`
	CutShort string         `json:"cut_short,omitempty"`
}
