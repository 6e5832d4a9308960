package report

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestSessionsOf: average active sessions by wait and by statement, and
// the longest transactions, from the samples.
func TestSessionsOf(t *testing.T) {
	smp := func(bs ...model.Backend) model.ActivitySample { return model.ActivitySample{Backends: bs} }
	cpu := model.Backend{PID: 1, State: "active", QueryID: 7, Query: "SELECT 1", XactMS: 5}
	lock := model.Backend{PID: 2, State: "active", WaitType: "Lock", Wait: "transactionid", QueryID: 8, Query: "UPDATE t", XactMS: 900}
	idle := model.Backend{PID: 3, State: "idle in transaction", XactMS: 4000}
	s := SessionsOf(&model.Sampling{Seconds: 0.4, Samples: []model.ActivitySample{smp(cpu, lock, idle), smp(lock, idle), smp(lock), smp()}})
	if s.Ticks != 4 || len(s.ByWait) != 2 || s.ByWait[0] != (Load{Key: "Lock/transactionid", AAS: 0.75}) || s.ByWait[1] != (Load{Key: "CPU", AAS: 0.25}) {
		t.Errorf("by wait: %+v", s.ByWait)
	}
	if len(s.ByQuery) != 2 || s.ByQuery[0].QueryID != 8 || s.ByQuery[0].AAS != 0.75 {
		t.Errorf("by statement: %+v", s.ByQuery)
	}
	if len(s.Longest) != 3 || s.Longest[0].PID != 3 {
		t.Errorf("longest: %+v", s.Longest)
	}
	if SessionsOf(nil) != nil || SessionsOf(&model.Sampling{}) != nil {
		t.Errorf("nothing sampled gave a section")
	}
}

// TestBlockingTree: the tree is taken at the tick with the most waiting
// sessions, with the session at its head.
func TestBlockingTree(t *testing.T) {
	head := model.Backend{PID: 1, State: "idle in transaction"}
	w := func(pid int, by ...int) model.Backend {
		return model.Backend{PID: pid, State: "active", WaitType: "Lock", BlockedBy: by}
	}
	s := SessionsOf(&model.Sampling{Samples: []model.ActivitySample{
		{Backends: []model.Backend{head, w(2, 1)}},
		{Backends: []model.Backend{head, w(2, 1), w(3, 2), w(4, 2)}},
		{Backends: []model.Backend{head}},
	}})
	if len(s.Blocking) != 4 || s.Blocking[0].PID != 1 || len(s.Blocking[0].BlockedBy) != 0 || s.Blocking[3].BlockedBy[0] != 2 {
		t.Errorf("%+v", s.Blocking)
	}
}

// TestSessionsWithoutQueryID: PostgreSQL 13 has no query_id in
// pg_stat_activity; statements that differ only in their values are one
// line, shown without the values.
func TestSessionsWithoutQueryID(t *testing.T) {
	b := func(q string) model.Backend { return model.Backend{State: "active", Query: q} }
	s := SessionsOf(&model.Sampling{Samples: []model.ActivitySample{
		{Backends: []model.Backend{b("UPDATE t SET v = 1 WHERE id = 7"), b("SELECT 1")}},
		{Backends: []model.Backend{b("UPDATE t SET v = 2 WHERE id = 9")}},
	}})
	if len(s.ByQuery) != 2 || s.ByQuery[0].AAS != 1 || strings.Contains(s.ByQuery[0].Key, "7") || !strings.Contains(s.ByQuery[0].Key, "$1") {
		t.Errorf("by statement: %+v", s.ByQuery)
	}
}
