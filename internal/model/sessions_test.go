package model

import (
	"strings"
	"testing"
)

// TestSessionsSummary: average active sessions by wait and by statement, and
// the longest transactions, from the samples.
func TestSessionsSummary(t *testing.T) {
	smp := func(bs ...Backend) ActivitySample { return ActivitySample{Backends: bs} }
	cpu := Backend{PID: 1, State: "active", QueryID: 7, Query: "SELECT 1", XactMS: 5}
	lock := Backend{PID: 2, State: "active", WaitType: "Lock", Wait: "transactionid", QueryID: 8, Query: "UPDATE t", XactMS: 900}
	idle := Backend{PID: 3, State: "idle in transaction", XactMS: 4000}
	s := (&Sampling{Seconds: 0.4, Samples: []ActivitySample{smp(cpu, lock, idle), smp(lock, idle), smp(lock), smp()}}).Summary()
	if s.Ticks != 4 || len(s.ByWait) != 2 || s.ByWait[0] != (Load{Key: "Lock/transactionid", AAS: 0.75}) || s.ByWait[1] != (Load{Key: "CPU", AAS: 0.25}) {
		t.Errorf("by wait: %+v", s.ByWait)
	}
	if len(s.ByQuery) != 2 || s.ByQuery[0].QueryID != 8 || s.ByQuery[0].AAS != 0.75 {
		t.Errorf("by statement: %+v", s.ByQuery)
	}
	if len(s.Longest) != 3 || s.Longest[0].PID != 3 {
		t.Errorf("longest: %+v", s.Longest)
	}
	if (*Sampling)(nil).Summary() != nil || (&Sampling{}).Summary() != nil {
		t.Errorf("nothing sampled gave a section")
	}
}

// TestBlockingTree: the tree is taken at the tick with the most waiting
// sessions, with the session at its head.
func TestBlockingTree(t *testing.T) {
	head := Backend{PID: 1, State: "idle in transaction"}
	w := func(pid int, by ...int) Backend {
		return Backend{PID: pid, State: "active", WaitType: "Lock", BlockedBy: by}
	}
	s := (&Sampling{Samples: []ActivitySample{
		{Backends: []Backend{head, w(2, 1)}},
		{Backends: []Backend{head, w(2, 1), w(3, 2), w(4, 2)}},
		{Backends: []Backend{head}},
	}}).Summary()
	if len(s.Blocking) != 4 || s.Blocking[0].PID != 1 || len(s.Blocking[0].BlockedBy) != 0 || s.Blocking[3].BlockedBy[0] != 2 {
		t.Errorf("%+v", s.Blocking)
	}
}

// TestSessionsWithoutQueryID: PostgreSQL 13 has no query_id in
// pg_stat_activity; statements that differ only in their values are one
// line, shown without the values.
func TestSessionsWithoutQueryID(t *testing.T) {
	b := func(q string) Backend { return Backend{State: "active", Query: q} }
	s := (&Sampling{Samples: []ActivitySample{
		{Backends: []Backend{b("UPDATE t SET v = 1 WHERE id = 7"), b("SELECT 1")}},
		{Backends: []Backend{b("UPDATE t SET v = 2 WHERE id = 9")}},
	}}).Summary()
	if len(s.ByQuery) != 2 || s.ByQuery[0].AAS != 1 || strings.Contains(s.ByQuery[0].Key, "7") || !strings.Contains(s.ByQuery[0].Key, "$1") {
		t.Errorf("by statement: %+v", s.ByQuery)
	}
}
