package scenario

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
)

// Result is one scenario run: what it expected, what was missing or
// unexpected, the workload's own figures and check's report.
type Result struct {
	Scenario   string   `json:"scenario"`
	Expected   []Expect `json:"expected"`
	MustNot    []Expect `json:"must_not"`
	Missing    []string `json:"missing"`
	Unexpected []string `json:"unexpected"`
	// Metrics are the workload's own measurements.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Report  *report.Report     `json:"report"`
}

// Passed says whether every expected finding was there and nothing the
// scenario forbids.
func (r *Result) Passed() bool { return len(r.Missing) == 0 && len(r.Unexpected) == 0 }

// Run reproduces a scenario on the cluster and checks it as check would,
// with experiments allowed to write (it is a lab database). Expectations
// are judged on every finding; the report keeps those at or above min.
func Run(ctx context.Context, c *lab.Cluster, s Scenario, version string, o diagnose.Options, min model.Severity) (*Result, error) {
	env, err := Prepare(ctx, c, s, o.Log)
	if err != nil {
		return nil, &diagnose.InputError{Err: err}
	}
	o.Lab = true
	rep, err := diagnose.Check(ctx, c.DSN(env.DB), version, o, model.Info)
	if err != nil {
		return nil, err
	}
	// The statements an engineer would paste from the application's log:
	// explained with ANALYZE on the scenario's database, their findings
	// judged with check's.
	if len(s.Explain) > 0 {
		sess, err := envelope.Connect(ctx, c.DSN(env.DB), envelope.Options{StatementTimeout: o.StatementTimeout})
		if err != nil {
			return nil, err
		}
		defer sess.Close()
		for _, q := range s.Explain {
			stmt, e, err := diagnose.Query(ctx, sess, q, true, nil)
			if err != nil {
				return nil, err
			}
			in := rules.PlanInput{Explain: e, Query: q, Stmt: stmt, Object: model.Object{Kind: "query", Name: rules.Shorten(q, 80)}}
			fs, _, err := diagnose.Plan(ctx, sess, in, o)
			if err != nil {
				return nil, err
			}
			rep.Add(fs)
		}
		rules.Sort(rep.Findings)
	}
	missing, unexpected := s.Evaluate(rep.Findings)
	res := &Result{Scenario: s.Name, Expected: s.Expect, MustNot: s.MustNot, Missing: missing, Unexpected: unexpected,
		Metrics: env.Metrics, Report: rep.Filter(min)}
	if res.Expected == nil {
		res.Expected = []Expect{}
	}
	if res.MustNot == nil {
		res.MustNot = []Expect{}
	}
	return res, nil
}
