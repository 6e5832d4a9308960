package verify_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// A tape is what one experiment run sent to PostgreSQL 15 and what the
// server answered, with the engine's inputs: the snapshot and the findings
// the rules produced. Recorded once from a lab scenario (-record), it
// replays the run without a server, so a test sees every statement the
// engine sends and every figure it judges.
type tape struct {
	Scenario string
	Snapshot *model.Snapshot
	Findings []tapedFinding
	Calls    []call
	// Workers are the calls of each worker session the experiments
	// opened (Engine.Workers), in the order they were opened.
	Workers [][]call `json:",omitempty"`
	// Admitted and Pooled are each load client's connection attempts
	// through the held-sessions role's connectors (Engine.Admit),
	// directly and through its pool, in order; Admitted[i] is client i's.
	Admitted, Pooled [][]attempt `json:",omitempty"`
	// Twin says the connection stood for a twin's, whose tables are
	// pgmedic's own: a VACUUM of one is no write to a target.
	Twin bool `json:",omitempty"`
}

// attempt is one connection a load client asked for: refused (Err), cut
// by the end of its side (Cut), or the worker session it got (Worker,
// an index into Workers).
type attempt struct {
	Worker int              `json:",omitempty"`
	Err    *testkit.CallErr `json:",omitempty"`
	Cut    bool             `json:",omitempty"`
}

type tapedFinding struct {
	Finding    model.Finding
	Experiment *model.Experiment
	// Unreported are the experiment's fields a report never shows (the
	// statements with their values, the lock modes): a reproduction replays
	// them, so the tape keeps them beside it.
	Unreported *unreported `json:",omitempty"`
}

type unreported struct {
	Waiter, HeadLock, Change, FixLock string   `json:",omitempty"`
	Mix                               []string `json:",omitempty"`
}

// experiment is the taped experiment with its unreported fields back.
func (tf tapedFinding) experiment() *model.Experiment {
	if tf.Experiment == nil || tf.Unreported == nil {
		return tf.Experiment
	}
	e := *tf.Experiment
	u := tf.Unreported
	e.Waiter, e.HeadLock, e.Change, e.FixLock, e.Mix = u.Waiter, u.HeadLock, u.Change, u.FixLock, u.Mix
	return &e
}

// taped is a finding's experiment as a tape keeps it.
func taped(f model.Finding, exp *model.Experiment) tapedFinding {
	tf := tapedFinding{Finding: f, Experiment: exp}
	if exp.Waiter != "" || exp.HeadLock != "" || exp.Change != "" || exp.FixLock != "" || len(exp.Mix) > 0 {
		tf.Unreported = &unreported{Waiter: exp.Waiter, HeadLock: exp.HeadLock, Change: exp.Change, FixLock: exp.FixLock, Mix: exp.Mix}
	}
	return tf
}

// call is one statement of a tape (testkit's format).
type call = testkit.Call

// newReplayer answers the engine from a tape's calls; the transcript shows
// EXPLAIN outputs by their root node and times.
func newReplayer(t *testing.T, name string, calls []call) *testkit.Replayer {
	return &testkit.Replayer{T: t, Name: name, Calls: calls, Strip: envelope.Tag, Show: valueText,
		Rerecord: "re-record: go test ./internal/verify -run Transcripts -record"}
}

// valueText is a short form of an answer: an EXPLAIN's root node and
// times, else the value itself cut to a line.
func valueText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '[' {
		if ex, err := plan.ParseJSON(raw); err == nil {
			s := "plan: " + ex.Plan.NodeType
			if ex.Plan.RelationName != "" {
				s += " on " + ex.Plan.RelationName
			}
			s += fmt.Sprintf(", cost %.2f", ex.Plan.TotalCost)
			if ex.ExecutionMS > 0 {
				s += fmt.Sprintf(", %.3f ms", ex.PlanningMS+ex.ExecutionMS)
			}
			if b := ex.Plan.Buffers; b.SharedHit+b.SharedRead+b.LocalHit+b.LocalRead > 0 {
				s += fmt.Sprintf(", buffers shared %d/%d local %d/%d", b.SharedHit, b.SharedRead, b.LocalHit, b.LocalRead)
			}
			if ex.JIT != nil && ex.JIT.Functions > 0 {
				s += fmt.Sprintf(", JIT %d functions", ex.JIT.Functions)
			}
			return s
		}
	}
	s := oneLine(string(raw))
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func readTape(path string) (*tape, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tp tape
	if err := json.Unmarshal(b, &tp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &tp, nil
}

func writeTape(path string, tp *tape) error {
	b, err := json.MarshalIndent(tp, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
