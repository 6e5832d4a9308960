package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// extendedStats measures what extended statistics on correlated columns
// change: on a copy of the table analysed afresh (the twin's, or a
// temporary one), the statement runs Runs times after a warm-up; then
// CREATE STATISTICS (dependencies, ndistinct, mcv) on the columns and
// ANALYZE, and the same runs again. The row estimate at the copy's scans
// and the medians are compared; both sides see the same rows and fresh
// single-column statistics, so what differs is the extended statistics
// alone. A better estimate that does not change the time refutes it.
func (e *Engine) extendedStats(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	stmt, err := statement(exp)
	if err != nil {
		f.Verification = model.NotRunBecause("cannot parse the statement: " + err.Error())
		return
	}
	if why := e.refusal(ctx, stmt); why != "" {
		f.Verification = model.NotRunBecause("not re-run: " + why)
		return
	}
	if !e.copyAllowed() {
		f.Verification = model.NotRunBecause("extended statistics are measured on a copy of the table: " + copyHint)
		return
	}
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	b.cleanup()
	copier, t, where := e, snap.Table(exp.Table), ""
	if e.Copies != nil {
		c := *e
		c.Conn, c.Lab, c.Copies = e.Copies.Conn, true, nil
		copier, t, where = &c, e.Copies.Snap.Table(exp.Table), e.Copies.Where(exp.Table)
	}
	if t == nil {
		f.Verification = model.NotRunBecause("the table is not in the snapshot")
		return
	}
	rewritten, n, err := stmt.Retarget(exp.Table, "pg_temp", copyName)
	if err != nil || n == 0 {
		f.Verification = model.NotRunBecause("cannot rewrite the statement to read a copy of the table")
		return
	}
	cols := make([]string, len(exp.StatColumns))
	for i, c := range exp.StatColumns {
		cols[i] = sqlparse.QuoteIdent(c)
	}
	combos, err := e.statCombos(ctx, stmt, b, exp)
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	var without, with []float64
	var estBefore, estAfter, planned, actual, plannedAfter float64
	_, err = copier.withCopy(ctx, t, func() error {
		_, release, err := copier.onCopy(ctx, b, rewritten)
		if err != nil {
			return err
		}
		defer release()
		common, err := commonCombos(ctx, copier.Conn, paramStatColumns(stmt, exp), b)
		if err != nil {
			return err
		}
		combos = append(common, combos[:min(len(combos), maxStatCombos-len(common))]...)
		// One series is every combination once per run: the workload of
		// the columns' common values, summed.
		series := func() ([]float64, float64, float64, float64, error) {
			var ms []float64
			var worst, p, a float64
			for i := range e.Runs + 1 {
				total := 0.0
				for _, c := range combos {
					target := rewritten.Text()
					if len(b.types) > 0 {
						target = "EXECUTE " + copyStmt + "(" + strings.Join(c, ", ") + ")"
					}
					ex, err := envelope.Explain(ctx, copier.Conn, "ANALYZE, TIMING OFF", target)
					if err != nil {
						return nil, 0, 0, 0, err
					}
					total += ex.PlanningMS + ex.ExecutionMS
					if m, pl, ac := copyEstimate(ex); i == 1 && m > worst {
						worst, p, a = m, pl, ac
					}
				}
				if i > 0 { // the first warms the cache
					ms = append(ms, total)
				}
			}
			return ms, worst, p, a, nil
		}
		if without, estBefore, planned, actual, err = series(); err != nil {
			return err
		}
		for _, q := range []string{"CREATE STATISTICS pg_temp.pgmedic_stats (dependencies, ndistinct, mcv) ON " + strings.Join(cols, ", ") + " FROM " + copyName, "ANALYZE " + copyName} {
			if _, err := copier.Conn.Exec(ctx, envelope.Tag+q); err != nil {
				return err
			}
		}
		if with, estAfter, plannedAfter, _, err = series(); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		f.Verification = model.NotRunBecause("measuring on a copy failed: " + envelope.Message(err))
		return
	}
	before, after := median(without), median(with)
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "rows the planner expected from the table, single-column statistics (worst combination)", Value: model.Round(planned, 0)},
		model.Evidence{Label: "rows the table's scan returned for it", Value: model.Round(actual, 0)},
		model.Evidence{Label: "rows the planner expected with the extended statistics (worst combination)", Value: model.Round(plannedAfter, 0)},
		model.Evidence{Label: "misestimate without / with the extended statistics", Value: model.Round(estBefore, 1), Unit: fmt.Sprintf("x / %.1fx", estAfter)},
		model.Evidence{Label: "measured without the extended statistics (median)", Value: model.Round(before, 2), Unit: "ms"},
		model.Evidence{Label: "measured with them (median)", Value: model.Round(after, 2), Unit: "ms"})
	f.Verification = model.Verification{Where: where, Parameters: b.desc,
		Method: fmt.Sprintf("EXPLAIN ANALYZE of the statement for %d combinations of values (the copy's commonest rows' on those columns, then the columns' common values in pg_stats crossed), x%d on a copy of %s analysed afresh, then x%d after CREATE STATISTICS (dependencies, ndistinct, mcv) ON %s and ANALYZE, in a rolled-back transaction; medians of the combinations' summed planning + execution time", len(combos), e.Runs, exp.Table.Name, e.Runs, strings.Join(exp.StatColumns, ", ")),
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "ms"}}
	// The statistics act through the estimate: one they leave where it
	// was (within 2x) changed nothing, and a difference in time is the
	// machine's, not theirs.
	if estAfter > estBefore/2 {
		f.Verification.Status, f.Severity = model.Refuted, model.Info
		f.Verification.Reason = fmt.Sprintf("the extended statistics left the planner's estimate where it was (misestimate %.1fx without, %.1fx with): a difference in time is not theirs", estBefore, estAfter)
		f.Title = fmt.Sprintf("extended statistics on %s.(%s) do not change the planner's estimate (misestimate %.1fx without, %.1fx with)", exp.Table.Name, strings.Join(exp.StatColumns, ", "), estBefore, estAfter)
		return
	}
	if judge(f, before, after) {
		saved := statementSaving(f.Impact.Share, before, after)
		f.Severity = savedSeverity(saved)
		f.Evidence = append(f.Evidence, model.Evidence{Label: "share of the database's statement time the statistics take back", Value: model.Round(100*saved, 2), Unit: "%"})
		f.Title = fmt.Sprintf("the planner expects %.0f rows of %s where %.0f come (the columns %s are correlated): %.1f ms for the common values, %.1f ms with extended statistics", planned, exp.Table.Name, actual, strings.Join(exp.StatColumns, ", "), before, after)
		return
	}
	f.Title = fmt.Sprintf("extended statistics on %s.(%s) do not make the statement faster (%.1f ms without, %.1f ms with; misestimate %.0fx, then %.0fx)", exp.Table.Name, strings.Join(exp.StatColumns, ", "), before, after, estBefore, estAfter)
}

// maxStatCombos bounds the combinations of values the experiment runs:
// the copy's commonest rows' (maxRowCombos), then the columns' common
// values crossed.
const (
	maxStatCombos = 9
	maxRowCombos  = 3
)

// paramStatColumns maps each parameter compared with one of the
// statistics' columns to that column (the first such, when a parameter
// meets several).
func paramStatColumns(stmt *sqlparse.Statement, exp *model.Experiment) map[int]string {
	out := map[int]string{}
	for n, cs := range stmt.ParamColumns() {
		for _, c := range cs {
			if slices.Contains(exp.StatColumns, c.Column) {
				out[n] = c.Column
				break
			}
		}
	}
	return out
}

// commonCombos are parameter lists whose values on the statistics'
// columns come together from the copy's commonest rows. Each column's
// common values, crossed, meet in combinations no row has when the
// columns are correlated (a district of another city): the statement
// then finds nothing with or without extended statistics, and the
// experiment would prove nothing. The copy is pgmedic's (a twin's table,
// or a bounded temporary one), so grouping it reads no more than was
// copied.
func commonCombos(ctx context.Context, conn envelope.Conn, cols map[int]string, b *bound) ([][]string, error) {
	if len(cols) < 2 {
		return nil, nil
	}
	params := slices.Sorted(maps.Keys(cols))
	var sel, grp []string
	for i, n := range params {
		sel = append(sel, fmt.Sprintf("%s::text AS c%d", sqlparse.QuoteIdent(cols[n]), i+1))
		grp = append(grp, fmt.Sprint(i+1))
	}
	// One value, read quietly: a copy too large for pgmedic's
	// statement_timeout leaves no ERROR in the server's log.
	q := fmt.Sprintf("SELECT coalesce(json_agg(json_build_array(%s)), '[]')::text FROM (SELECT %s FROM %s WHERE %s GROUP BY %s ORDER BY count(*) DESC LIMIT %d) r",
		strings.Join(placeholders(len(params)), ", "), strings.Join(sel, ", "), copyName, notNull(cols, params), strings.Join(grp, ", "), maxRowCombos)
	text, err := envelope.Value(ctx, conn, q)
	if err != nil {
		return nil, fmt.Errorf("reading the copy's commonest rows: %w", err)
	}
	var rows [][]string
	if err := json.Unmarshal([]byte(text), &rows); err != nil {
		return nil, fmt.Errorf("reading the copy's commonest rows: %w", err)
	}
	var out [][]string
	for _, vals := range rows {
		if len(vals) != len(params) {
			continue
		}
		c := slices.Clone(b.values)
		for i, n := range params {
			c[n-1] = sqlparse.QuoteLiteral(vals[i]) + "::" + b.types[n-1]
		}
		out = append(out, c)
	}
	return out, nil
}

// placeholders are the subquery's columns, named by position.
func placeholders(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r.c%d", i+1)
	}
	return out
}

// notNull keeps rows whose every column is set: a NULL compares equal to
// nothing.
func notNull(cols map[int]string, params []int) string {
	var w []string
	for _, n := range params {
		w = append(w, sqlparse.QuoteIdent(cols[n])+" IS NOT NULL")
	}
	return strings.Join(w, " AND ")
}

// statCombos are the parameter lists the experiment runs: the bound
// values, with each parameter compared with one of the statistics'
// columns set in turn to that column's most common values (up to three
// each, the combinations up to maxStatCombos). Independent columns give
// the same estimates either way; correlated ones meet in combinations
// that are common, and in ones that do not exist.
func (e *Engine) statCombos(ctx context.Context, stmt *sqlparse.Statement, b *bound, exp *model.Experiment) ([][]string, error) {
	combos := [][]string{b.values}
	cols := paramStatColumns(stmt, exp)
	for n := 1; n <= len(b.values); n++ {
		col := cols[n]
		if col == "" {
			continue
		}
		vals, err := e.columnValues(ctx, exp.Table, col)
		if err != nil {
			return nil, fmt.Errorf("cannot read the common values of %s.%s: %s", exp.Table.Name, col, envelope.Message(err))
		}
		vals = vals[:min(3, len(vals))]
		var next [][]string
		for _, c := range combos {
			for _, v := range vals {
				if len(next) == maxStatCombos {
					break
				}
				d := slices.Clone(c)
				d[n-1] = sqlparse.QuoteLiteral(v) + "::" + b.types[n-1]
				next = append(next, d)
			}
		}
		if len(next) > 0 {
			combos = next
		}
	}
	return combos, nil
}

// copyEstimate is the worst disagreement between the rows the plan
// expected from the copy's scans and the rows they returned (+1 so that
// none compares). Under a LIMIT that returned all the rows it asked for,
// a scan stopped early: only returning more than expected counts there.
func copyEstimate(ex *plan.Explain) (factor, planned, actual float64) {
	var walk func(n *plan.Node, stopped bool)
	walk = func(n *plan.Node, stopped bool) {
		if n.NodeType == "Limit" && n.ActualRows >= n.PlanRows && n.PlanRows > 0 {
			stopped = true
		}
		if n.RelationName == copyName {
			loops := max(n.ActualLoops, 1)
			p, a := n.PlanRows*loops, n.ActualRows*loops
			r := max((a+1)/(p+1), (p+1)/(a+1))
			if stopped && a <= p {
				// Stopped early, a scan returns fewer rows than it would
				// have: fewer than expected says nothing. More than
				// expected is a misestimate all the same, and at least
				// that large.
				r = 0
			}
			if r > factor {
				factor, planned, actual = r, p, a
			}
		}
		for _, c := range n.Children() {
			walk(c, stopped)
		}
	}
	walk(&ex.Plan, false)
	return factor, planned, actual
}
