package model

import (
	"sort"

	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Sessions is what the report says of the sampled sessions: average
// active sessions by wait and by statement (the way Performance Insights
// counts load), the longest transactions, the window's counters, what the
// sampler cost, and every sample for charts.
type Sessions struct {
	Seconds    float64          `json:"seconds"`
	Ticks      int              `json:"ticks"`
	IntervalMS float64          `json:"interval_ms"`
	OverheadMS float64          `json:"overhead_ms"`
	BackedOff  bool             `json:"backed_off,omitempty"`
	Hidden     string           `json:"hidden,omitempty"`
	ByWait     []Load           `json:"by_wait"`
	ByQuery    []Load           `json:"by_statement"`
	Longest    []Backend        `json:"longest_transactions"`
	Delta      DatabaseDelta    `json:"delta"`
	Samples    []ActivitySample `json:"samples"`
	// PgBouncer's version, its pools at each tick, the change of its
	// SHOW STATS, and why it could not be read.
	PgBouncer      string          `json:"pgbouncer,omitempty"`
	Pools          []PoolSample    `json:"pools,omitempty"`
	BouncerStats   []BouncerStat   `json:"pgbouncer_stats,omitempty"`
	BouncerError   string          `json:"pgbouncer_error,omitempty"`
	BouncerClients *BouncerClients `json:"pgbouncer_clients,omitempty"`
	// Blocking is the blocking tree at the tick with the most sessions
	// waiting on locks: each waiting session and the ones it waits for.
	Blocking []Blocked `json:"blocking_at_worst,omitempty"`
}

// Blocked is one edge of the blocking tree.
type Blocked struct {
	PID       int    `json:"pid"`
	BlockedBy []int  `json:"blocked_by"`
	State     string `json:"state"`
	Query     string `json:"query,omitempty"`
}

// Load is average active sessions: session-samples in a state, divided by
// the number of ticks.
type Load struct {
	Key     string  `json:"key"`
	QueryID int64   `json:"queryid,omitempty"`
	AAS     float64 `json:"aas"`
}

// Summary summarises a sampling; nil when nothing was sampled.
func (s *Sampling) Summary() *Sessions {
	if s == nil || len(s.Samples) == 0 {
		return nil
	}
	out := &Sessions{Seconds: Round(s.Seconds, 2), Ticks: len(s.Samples), IntervalMS: s.IntervalMS,
		OverheadMS: Round(s.OverheadMS, 2), BackedOff: s.BackedOff, Hidden: s.Hidden, Delta: s.Delta, Samples: s.Samples,
		ByWait: []Load{}, ByQuery: []Load{}, Longest: []Backend{},
		PgBouncer: s.PgBouncer, Pools: s.Pools, BouncerStats: s.BouncerStats, BouncerError: s.BouncerError, BouncerClients: s.BouncerClients}
	worst, worstN := -1, 0
	for i, smp := range s.Samples {
		if n := countBlocked(smp); n > worstN {
			worst, worstN = i, n
		}
	}
	if worst >= 0 {
		involved := map[int]bool{}
		for _, b := range s.Samples[worst].Backends {
			for _, p := range b.BlockedBy {
				involved[p] = true
			}
		}
		for _, b := range s.Samples[worst].Backends {
			if len(b.BlockedBy) > 0 || involved[b.PID] {
				out.Blocking = append(out.Blocking, Blocked{PID: b.PID, BlockedBy: append([]int{}, b.BlockedBy...), State: b.State, Query: printable.Cut(b.Query, 100)})
			}
		}
	}
	byWait, byQuery, queries := map[string]int{}, map[int64]int{}, map[int64]string{}
	longest := map[int]Backend{}
	byText := textCounts{n: map[string]int{}, norm: map[string]string{}}
	for _, smp := range s.Samples {
		for _, b := range smp.Backends {
			if b.XactMS > 0 && b.XactMS > longest[b.PID].XactMS {
				longest[b.PID] = b
			}
			if b.State != "active" {
				continue
			}
			w := "CPU"
			if b.WaitType != "" {
				w = b.WaitType + "/" + b.Wait
			}
			byWait[w]++
			if b.QueryID != 0 {
				byQuery[b.QueryID]++
				queries[b.QueryID] = b.Query
			} else if b.Query != "" {
				byText.add(b.Query)
			}
		}
	}
	ticks := float64(len(s.Samples))
	for k, n := range byWait {
		out.ByWait = append(out.ByWait, Load{Key: k, AAS: Round(float64(n)/ticks, 2)})
	}
	for id, n := range byQuery {
		out.ByQuery = append(out.ByQuery, Load{Key: printable.Cut(queries[id], 100), QueryID: id, AAS: Round(float64(n)/ticks, 2)})
	}
	for text, n := range byText.n {
		out.ByQuery = append(out.ByQuery, Load{Key: printable.Cut(text, 100), AAS: Round(float64(n)/ticks, 2)})
	}
	byLoad := func(l []Load) {
		sort.Slice(l, func(i, j int) bool { return l[i].AAS > l[j].AAS || l[i].AAS == l[j].AAS && l[i].Key < l[j].Key })
	}
	byLoad(out.ByWait)
	byLoad(out.ByQuery)
	for _, b := range longest {
		out.Longest = append(out.Longest, b)
	}
	sort.Slice(out.Longest, func(i, j int) bool { return out.Longest[i].XactMS > out.Longest[j].XactMS })
	if len(out.Longest) > 5 {
		out.Longest = out.Longest[:5]
	}
	return out
}

func countBlocked(smp ActivitySample) int {
	n := 0
	for _, b := range smp.Backends {
		if len(b.BlockedBy) > 0 {
			n++
		}
	}
	return n
}

// textCounts counts statements by their text without values: how the
// sessions view knows a statement without a query_id (PostgreSQL 13, or
// compute_query_id off).
type textCounts struct {
	n    map[string]int
	norm map[string]string // text as sampled -> without values
}

func (c textCounts) add(q string) {
	n, ok := c.norm[q]
	if !ok {
		_, n = sqlparse.Fingerprint(q)
		c.norm[q] = n
	}
	c.n[n]++
}

// HideValues replaces every statement text the sampler saw (with the
// literals the application sent: names, e-mail addresses, ids) by its
// normalised form, for a report that is pasted into tickets and pull
// requests; check --show-values keeps them. normalise is called once per
// distinct text.
func (s *Sessions) HideValues(normalise func(string) string) {
	if s == nil {
		return
	}
	seen := map[string]string{}
	hide := func(q *string) {
		if *q == "" {
			return
		}
		n, ok := seen[*q]
		if !ok {
			n = normalise(*q)
			seen[*q] = n
		}
		*q = n
	}
	for i := range s.Samples {
		for j := range s.Samples[i].Backends {
			hide(&s.Samples[i].Backends[j].Query)
		}
	}
	for i := range s.Longest {
		hide(&s.Longest[i].Query)
	}
	for i := range s.Blocking {
		hide(&s.Blocking[i].Query)
	}
	for i := range s.ByQuery {
		hide(&s.ByQuery[i].Key)
	}
}
