package report

import (
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
