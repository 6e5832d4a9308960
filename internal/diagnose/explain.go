package diagnose

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// maxPlanBytes bounds what explain reads: the largest real plans are a
// few megabytes.
const maxPlanBytes = 64 << 20

// ExplainOptions are `explain`'s: a plan from Path (or stdin, "-"), or
// Query EXPLAINed on DSN.
type ExplainOptions struct {
	PlanOptions
	Path    string
	Stdin   io.Reader
	DSN     string
	Query   string
	Analyze bool
	// Warn says what the report cannot (a plan without ANALYZE figures).
	Warn func(string)
}

// Explain is `explain`: the plan read or run, the plan rules on it, and
// the implicit-cast experiment when a server is given.
func Explain(ctx context.Context, version string, o ExplainOptions, min model.Severity) (*report.PlanReport, error) {
	var sess *envelope.Session
	if o.DSN != "" {
		var err error
		sess, err = envelope.Connect(ctx, o.DSN, envelope.Options{StatementTimeout: o.StatementTimeout})
		if err != nil {
			return nil, err
		}
		defer sess.Close()
	}
	var e *plan.Explain
	var stmt *sqlparse.Statement
	var source string
	if o.Query != "" {
		var err error
		if stmt, e, err = Query(ctx, sess, o.Query, o.Analyze, o.AllowFunctions); err != nil {
			return nil, err
		}
		source = "--query on " + sess.Target.String()
	} else {
		var err error
		if e, source, err = ReadPlan(ctx, o.Path, o.Stdin); err != nil {
			return nil, err
		}
	}
	in := rules.PlanInput{Explain: e, Object: model.Object{Kind: "plan", Name: source}, Query: o.Query, Stmt: stmt}
	findings, skipped, err := Plan(ctx, sess, in, o.PlanOptions)
	if err != nil {
		return nil, err
	}
	if !e.HasAnalyze && len(skipped) > 0 && o.Warn != nil {
		o.Warn(fmt.Sprintf("the plan has no ANALYZE figures; %s need EXPLAIN (ANALYZE, BUFFERS) and did not run", skipped[0].Rule))
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return report.NewPlan(version, source, e, findings, skipped, len(rules.PlanRules()), min), nil
}

// ComparePlans is `explain --compare A B`: two plans of one query aligned,
// and the difference that decides which is faster.
func ComparePlans(ctx context.Context, version, pathA, pathB string, stdin io.Reader) (*report.CompareReport, error) {
	if pathA == "-" && pathB == "-" {
		return nil, InputErrorf("only one of the two plans can come from stdin")
	}
	a, nameA, err := ReadPlan(ctx, pathA, stdin)
	if err != nil {
		return nil, err
	}
	b, nameB, err := ReadPlan(ctx, pathB, stdin)
	if err != nil {
		return nil, err
	}
	return report.NewCompare(version, nameA, nameB, a, b, plan.Compare(a, b)), nil
}

// ReadPlan reads a plan file or stdin ("-") and parses it. A read of
// stdin gives up when ctx ends: a terminal or a pipe that has not closed
// would otherwise hold Ctrl-C until its end of input.
func ReadPlan(ctx context.Context, path string, stdin io.Reader) (*plan.Explain, string, error) {
	var r io.Reader = stdin
	name := "stdin"
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, "", InputErrorf("cannot read the plan: %w", err)
		}
		defer fh.Close()
		r, name = fh, path
	}
	var buf bytes.Buffer
	if fh, ok := r.(*os.File); ok {
		// A file's size is known: one buffer of that size instead of a
		// doubling one (a large plan is megabytes).
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= maxPlanBytes {
			buf.Grow(int(st.Size()) + bytes.MinRead)
		}
	}
	var err error
	if path == "-" {
		err = readUntilDone(ctx, &buf, io.LimitReader(r, maxPlanBytes+1))
	} else {
		_, err = buf.ReadFrom(io.LimitReader(r, maxPlanBytes+1))
	}
	b := buf.Bytes()
	if err != nil {
		return nil, "", InputErrorf("cannot read the plan from %s: %w", name, err)
	}
	if len(b) > maxPlanBytes {
		return nil, "", InputErrorf("%s is larger than %d MB; that is not one plan", name, maxPlanBytes>>20)
	}
	e, err := plan.Parse(b)
	if err != nil {
		return nil, "", InputErrorf("%s: %w (pgmedic reads EXPLAIN output in JSON or TEXT format)", name, err)
	}
	return e, name, nil
}

// readUntilDone reads r into buf, or returns ctx's error when ctx ends
// first. The read itself cannot be interrupted (a blocking descriptor);
// it is left to the process's exit, and buf is not touched after.
func readUntilDone(ctx context.Context, buf *bytes.Buffer, r io.Reader) error {
	if ctx.Done() == nil {
		_, err := buf.ReadFrom(r)
		return err
	}
	var own bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := own.ReadFrom(r)
		done <- err
	}()
	select {
	case err := <-done:
		*buf = own
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ExplainTimeout is explain's default statement_timeout: a query the user
// names is expected to run longer than check's catalog reads.
const ExplainTimeout = 30 * time.Second
