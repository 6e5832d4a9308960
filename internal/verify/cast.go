package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// castExperiment proves an implicit-cast finding: the statement is planned
// and, for a SELECT, run (EXPLAIN ANALYZE in a rolled-back read-only
// transaction, Runs times each) as written and with the comparison in the
// column's own type. Confirmed needs the rewritten statement to use an
// index on the table and to be at least 1.25x faster.
func (e *Engine) castExperiment(ctx context.Context, f *model.Finding) {
	exp := f.Experiment
	if exp.Query == "" {
		f.Verification.Status = model.NotRun
		return
	}
	stmt, err := statement(exp)
	if err != nil {
		f.Verification = model.NotRunBecause("cannot parse the statement: " + err.Error())
		return
	}
	if len(exp.ClientTypes) > 0 {
		e.clientTypeExperiment(ctx, f, stmt)
		return
	}
	fixed, n, err := stmt.CastToColumn(exp.Column, exp.ColumnType, exp.KeepValue)
	if err != nil {
		f.Verification = model.NotRunBecause("cannot rewrite the statement: " + err.Error())
		return
	}
	if n == 0 {
		f.Verification = model.Verification{Status: model.NotRun,
			Reason: "the statement's text has no comparison of " + exp.Column + " with a value to rewrite (the value's type may come from the driver's parameter types)"}
		return
	}
	before, err := e.castRuns(ctx, stmt, exp, nil)
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	after, err := e.castRuns(ctx, fixed, exp, nil)
	if err != nil {
		f.Verification = model.NotRunBecause("the rewritten statement failed: " + err.Error())
		return
	}
	f.Fix.SQL = "-- the statement with the comparison in the column's type:\n" + sqlparse.EscapeControls(fixed.Text())
	method := fmt.Sprintf("re-planned with %s compared as %s", exp.Column, exp.ColumnType)
	if exp.KeepValue {
		method = fmt.Sprintf("re-planned without the cast on %s", exp.Column)
	}
	e.castVerdict(f, method, before, after)
}

// clientTypeExperiment measures a cast the client's parameter type causes:
// the statement prepared with the types the client sends, then with the
// column's type for that parameter, and run with the same values.
func (e *Engine) clientTypeExperiment(ctx context.Context, f *model.Finding, stmt *sqlparse.Statement) {
	exp := f.Experiment
	if exp.Param < 1 || exp.Param > len(exp.ClientTypes) {
		f.Verification = model.NotRunBecause("the finding names no parameter")
		return
	}
	fixed := append([]string(nil), exp.ClientTypes...)
	fixed[exp.Param-1] = exp.ColumnType
	before, err := e.castRuns(ctx, stmt, exp, exp.ClientTypes)
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	after, err := e.castRuns(ctx, stmt, exp, fixed)
	if err != nil {
		f.Verification = model.NotRunBecause("with the column's type: " + err.Error())
		return
	}
	method := fmt.Sprintf("prepared with $%d as %s, as the client sends it, and as %s, the column's type, with the same values",
		exp.Param, exp.ClientTypes[exp.Param-1], exp.ColumnType)
	e.castVerdict(f, method, before, after)
}

// castVerdict judges a cast experiment from the runs with and without the
// cast: confirmed when the plan without it uses an index on the table and
// is at least helpedRatio faster.
func (e *Engine) castVerdict(f *model.Finding, method string, before, after *castResult) {
	exp := f.Experiment
	if before.analyzed {
		method += fmt.Sprintf("; EXPLAIN ANALYZE x%d each in a rolled-back read-only transaction, medians", e.Runs)
	}
	if after.index != "" {
		method += "; the plan without the cast uses " + after.index
	} else {
		method += "; the plan without the cast still uses no index on " + exp.Table.Name
	}

	unit := "ms"
	if !before.analyzed {
		unit = "cost"
	}
	f.Verification = model.Verification{Method: method, Parameters: before.desc,
		Before: &model.Measure{Value: model.Round(before.value, 2), Unit: unit}, After: &model.Measure{Value: model.Round(after.value, 2), Unit: unit}}
	if !before.analyzed {
		// Only SELECT is executed on a target; the rest is compared on cost.
		f.Verification.Status = model.Estimated
		return
	}
	if after.index == "" {
		f.Verification.Status = model.Refuted
		f.Verification.Reason = "the statement without the cast still scans " + exp.Table.Name + " without an index"
		f.Severity = model.Info
		return
	}
	judge(f, before.value, after.value)
}

type castResult struct {
	value    float64 // median execution ms, or total cost when not analyzed
	analyzed bool
	index    string // an index on the table the plan uses
	desc     []string
}

// castRuns measures stmt, as written or rewritten: EXPLAIN ANALYZE Runs
// times when it may be executed, else the planner's cost once.
func (e *Engine) castRuns(ctx context.Context, stmt *sqlparse.Statement, exp *model.Experiment, types []string) (*castResult, error) {
	r := &castResult{}
	r.analyzed = e.refusal(ctx, stmt) == ""
	b, why := e.bindAs(ctx, stmt, exp, types)
	if why != "" {
		return nil, fmt.Errorf("%s", why)
	}
	defer b.cleanup()
	r.desc = b.desc
	opts, runs := "", 1
	if r.analyzed {
		opts, runs = "ANALYZE", e.Runs
	}
	var times []float64
	for i := 0; i < runs; i++ {
		var ex *plan.Explain
		err := e.readOnly(ctx, func() (err error) {
			ex, err = envelope.Explain(ctx, e.Conn, opts, b.target)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("EXPLAIN failed: %s", envelope.Message(err))
		}
		times = append(times, ex.ExecutionMS)
		r.value = ex.Plan.TotalCost
		r.index = indexOn(ex, exp.Table.Name)
	}
	if r.analyzed {
		r.value = median(times)
	}
	return r, nil
}

// indexOn names an index the plan reads for table (a bitmap index scan
// names only the index, so its heap scan's table is used).
func indexOn(ex *plan.Explain, table string) string {
	found := ""
	ex.Plan.Walk(func(n, parent *plan.Node) {
		if found != "" || n.IndexName == "" {
			return
		}
		switch {
		case n.RelationName == table:
			found = n.IndexName
		case n.NodeType == "Bitmap Index Scan" && parent != nil:
			for p := parent; p != nil; p = nil {
				if p.RelationName == table || p.NodeType == "BitmapAnd" || p.NodeType == "BitmapOr" {
					found = n.IndexName
				}
			}
		}
	})
	return found
}
