package verify

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgconn"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// copyName is the temporary table the index experiment measures on. It
// lives in pg_temp and inside a transaction that is always rolled back, so
// it disappears with the transaction, or with the session if pgmedic is
// killed.
const (
	copyName = "pgmedic_copy"
	copyStmt = "pgmedic_copy_stmt"
)

// DefaultMaxCopyBytes bounds the tables --verify-indexes copies and the
// relations pgstattuple reads.
const DefaultMaxCopyBytes = 1 << 30

func (e *Engine) maxCopy() int64 {
	if e.MaxCopyBytes <= 0 {
		return DefaultMaxCopyBytes
	}
	return e.MaxCopyBytes
}

// indexExperiment proves a proposed index: the planner's cost with and
// without it as a HypoPG hypothetical index (estimated), then, in the lab or
// with --verify-indexes, measured runs on a temporary copy of the table
// before and after creating the index on the copy.
func (e *Engine) indexExperiment(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	stmt, err := sqlparse.Parse(exp.Query)
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "cannot parse the statement: " + err.Error()}
		return
	}
	var reasons []string
	hypoBefore, hypoAfter, hypoUsed, why := e.hypoCost(ctx, snap, stmt, exp)
	if why != "" {
		reasons = append(reasons, why)
	}
	m, why := e.measureOnCopy(ctx, snap, stmt, exp)
	if why != "" {
		reasons = append(reasons, why)
	}
	if hypoBefore > 0 {
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: "planner cost now (HypoPG)", Value: round(hypoBefore)},
			model.Evidence{Label: "planner cost with the index (HypoPG)", Value: round(hypoAfter)})
	}
	switch {
	case m != nil:
		before, after := median(m.before), median(m.after)
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: "measured on the copy without the index (median)", Value: round(before), Unit: "ms"},
			model.Evidence{Label: "measured on the copy with the index (median)", Value: round(after), Unit: "ms"},
			model.Evidence{Label: "buffers per run without the index", Value: float64(m.buffersBefore)},
			model.Evidence{Label: "buffers per run with the index", Value: float64(m.buffersAfter)})
		method := fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS) x%d before and x%d after creating the index on a temporary copy of %s (%d rows, its indexes copied) in a rolled-back transaction, jit off; medians", e.Runs, e.Runs, exp.Table.Schema+"."+exp.Table.Name, m.rows)
		if m.params != "" {
			method += "; parameters: " + m.params
		}
		f.Verification = model.Verification{Method: method,
			Before: &model.Measure{Value: round(before), Unit: "ms"}, After: &model.Measure{Value: round(after), Unit: "ms"}}
		if after <= before*helpedRatio {
			f.Verification.Status = model.Confirmed
			return
		}
		f.Verification.Status = model.Refuted
		f.Severity = model.Info
		f.Title = fmt.Sprintf("index re-measured: %s does not make the statement faster (%.1f ms without, %.1f ms with)", strings.TrimPrefix(f.Fix.SQL, "CREATE INDEX CONCURRENTLY "), before, after)
	case hypoBefore > 0:
		f.Verification = model.Verification{Status: model.Estimated,
			Method: "HypoPG hypothetical index: planner cost of the statement without and with it (nothing is created)",
			Reason: strings.Join(reasons, "; "),
			Before: &model.Measure{Value: round(hypoBefore), Unit: "cost"}, After: &model.Measure{Value: round(hypoAfter), Unit: "cost"}}
		if !hypoUsed || hypoAfter >= hypoBefore {
			f.Severity = model.Info
			f.Title += " (but the planner would not use it)"
		}
	default:
		f.Verification = model.Verification{Status: model.NotRun, Reason: strings.Join(reasons, "; ")}
	}
}

// hypoCost asks the planner what the statement costs without and with the
// index, using HypoPG (hypothetical indexes live in pgmedic's backend
// memory only). Plans are custom plans for representative values.
func (e *Engine) hypoCost(ctx context.Context, snap *model.Snapshot, stmt *sqlparse.Statement, exp *model.Experiment) (before, after float64, used bool, why string) {
	if _, ok := snap.Extensions["hypopg"]; !ok {
		return 0, 0, false, "HypoPG is not installed in this database, so the planner's view was not checked (CREATE EXTENSION hypopg; Debian/Ubuntu package postgresql-15-hypopg)"
	}
	b, why := e.bind(ctx, stmt, exp.Query)
	if why != "" {
		return 0, 0, false, why
	}
	defer b.cleanup()
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"BEGIN READ ONLY"); err != nil {
		return 0, 0, false, "cannot start a read-only transaction: " + errText(err)
	}
	defer e.Conn.Exec(context.WithoutCancel(ctx), pgconn.Tag+"ROLLBACK")
	defer e.Conn.Exec(context.WithoutCancel(ctx), pgconn.Tag+"SELECT hypopg_reset()")
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
		return 0, 0, false, errText(err)
	}
	cost := func() (*plan.Explain, error) {
		var out []byte
		if err := e.Conn.QueryRow(ctx, pgconn.Tag+"EXPLAIN (FORMAT JSON) "+b.target).Scan(&out); err != nil {
			return nil, err
		}
		return plan.ParseJSON(out)
	}
	p0, err := cost()
	if err != nil {
		return 0, 0, false, "EXPLAIN failed: " + errText(err)
	}
	var name string
	if err := e.Conn.QueryRow(ctx, pgconn.Tag+"SELECT indexname FROM hypopg_create_index($1)", exp.Index).Scan(&name); err != nil {
		return 0, 0, false, "HypoPG could not create the hypothetical index: " + errText(err)
	}
	p1, err := cost()
	if err != nil {
		return 0, 0, false, "EXPLAIN with the hypothetical index failed: " + errText(err)
	}
	p1.Plan.Walk(func(n, _ *plan.Node) {
		if n.IndexName == name {
			used = true
		}
	})
	return p0.Plan.TotalCost, p1.Plan.TotalCost, used, ""
}

type copyRuns struct {
	before, after               []float64
	buffersBefore, buffersAfter int64
	rows                        int64
	params                      string
}

// measureOnCopy copies the table into a temporary table with its indexes,
// runs the statement (rewritten to read the copy) before and after creating
// the proposed index on the copy, and rolls everything back. Data-changing
// statements run only when every relation they touch is the copy, each run
// inside a savepoint that is rolled back.
func (e *Engine) measureOnCopy(ctx context.Context, snap *model.Snapshot, stmt *sqlparse.Statement, exp *model.Experiment) (*copyRuns, string) {
	if !e.Lab && !e.VerifyIndexes {
		return nil, "measured verification was not run: pass --verify-indexes to time the statement on a temporary copy of the table with and without the index"
	}
	t := snap.Table(exp.Table)
	if t == nil {
		return nil, "the table is not in the snapshot"
	}
	if t.Partitioned {
		return nil, "partitioned tables are not copied for a measured run"
	}
	if t.TotalBytes > e.maxCopy() {
		return nil, fmt.Sprintf("not measured: %s is %.0f MB with its indexes, over the copy limit of %.0f MB (--verify-max-size)", t.Name, float64(t.TotalBytes)/(1<<20), float64(e.maxCopy())/(1<<20))
	}
	sh := stmt.Shape()
	if !e.Lab {
		if fn := stmt.SideEffect(); fn != "" {
			return nil, "not measured: the statement calls " + fn + "()"
		}
		if sh.Command != "SELECT" && !sqlparse.OnlyRelation(sh, exp.Table) {
			return nil, "not measured: the statement writes and reads tables other than the copied one"
		}
	}
	rewritten, n, err := sqlparse.Retarget(exp.Query, exp.Table, "pg_temp", copyName)
	if err != nil || n == 0 {
		return nil, "cannot rewrite the statement to read a copy of the table"
	}
	b, why := e.bind(ctx, stmt, exp.Query)
	if why != "" {
		return nil, why
	}
	b.cleanup() // only the types and values are needed
	qt := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	tail := exp.Index[strings.Index(exp.Index, " ("):]
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"BEGIN READ WRITE"); err != nil {
		return nil, "cannot start a transaction: " + errText(err)
	}
	// ROLLBACK drops the copy, its indexes and the prepared plan's table.
	defer e.Conn.Exec(context.WithoutCancel(ctx), pgconn.Tag+"ROLLBACK")
	defer e.Conn.Exec(context.WithoutCancel(ctx), pgconn.Tag+"DEALLOCATE "+copyStmt)
	steps := []string{
		"SET LOCAL statement_timeout = '" + e.copyTimeout() + "'",
		"SET LOCAL plan_cache_mode = force_custom_plan",
		"CREATE TEMP TABLE " + copyName + " (LIKE " + qt + " INCLUDING INDEXES)",
		"INSERT INTO " + copyName + " SELECT * FROM " + qt,
		"ANALYZE " + copyName,
	}
	for _, q := range steps {
		if _, err := e.Conn.Exec(ctx, pgconn.Tag+q); err != nil {
			return nil, "copying the table failed: " + errText(err)
		}
	}
	runs := &copyRuns{params: b.desc}
	if err := e.Conn.QueryRow(ctx, pgconn.Tag+"SELECT count(*) FROM "+copyName).Scan(&runs.rows); err != nil {
		return nil, errText(err)
	}
	target := rewritten
	if len(b.types) > 0 {
		if _, err := e.Conn.Exec(ctx, pgconn.Tag+"PREPARE "+copyStmt+"("+strings.Join(b.types, ", ")+") AS "+rewritten); err != nil {
			return nil, "cannot prepare the statement on the copy: " + errText(err)
		}
		target = "EXECUTE " + copyStmt + "(" + strings.Join(b.values, ", ") + ")"
	}
	measure := func() ([]float64, int64, error) {
		var times []float64
		var buffers int64
		for i := 0; i <= e.Runs; i++ { // the first run warms the cache
			if _, err := e.Conn.Exec(ctx, pgconn.Tag+"SAVEPOINT pgmedic_run"); err != nil {
				return nil, 0, err
			}
			var out []byte
			err := e.Conn.QueryRow(ctx, pgconn.Tag+"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+target).Scan(&out)
			if _, rerr := e.Conn.Exec(ctx, pgconn.Tag+"ROLLBACK TO SAVEPOINT pgmedic_run"); err == nil {
				err = rerr
			}
			if err != nil {
				return nil, 0, err
			}
			ex, err := plan.ParseJSON(out)
			if err != nil {
				return nil, 0, err
			}
			if i > 0 {
				times = append(times, ex.PlanningMS+ex.ExecutionMS)
				buffers = ex.Plan.SharedHitBlocks + ex.Plan.SharedReadBlocks + localBlocks(out)
			}
		}
		return times, buffers, nil
	}
	if runs.before, runs.buffersBefore, err = measure(); err != nil {
		return nil, "running the statement on the copy failed: " + errText(err)
	}
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"CREATE INDEX ON "+copyName+tail); err != nil {
		return nil, "creating the index on the copy failed: " + errText(err)
	}
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"ANALYZE "+copyName); err != nil {
		return nil, errText(err)
	}
	if runs.after, runs.buffersAfter, err = measure(); err != nil {
		return nil, "running the statement on the copy with the index failed: " + errText(err)
	}
	return runs, ""
}

func (e *Engine) copyTimeout() string {
	if e.CopyTimeout <= 0 {
		return "120s"
	}
	return fmt.Sprintf("%dms", e.CopyTimeout.Milliseconds())
}

// localBlocks reads the top node's local (temporary table) buffer counts,
// which is where a temp copy's pages live.
func localBlocks(out []byte) int64 {
	var hit, read int64
	for _, key := range []string{`"Local Hit Blocks": `, `"Local Read Blocks": `} {
		i := strings.Index(string(out), key)
		if i < 0 {
			continue
		}
		var v int64
		fmt.Sscan(string(out[i+len(key):]), &v)
		if key[8] == 'H' {
			hit = v
		} else {
			read = v
		}
	}
	return hit + read
}

// indexStats reads pgstatindex figures of an existing index: random keys
// leave leaves about 70% full and fragmented, ordered keys about 90% and
// unfragmented.
func (e *Engine) indexStats(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if _, ok := snap.Extensions["pgstattuple"]; !ok {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "pgstattuple is not installed in this database, so leaf density was not measured (CREATE EXTENSION pgstattuple; it ships with postgresql-contrib)"}
		return
	}
	var bytes int64
	for _, ix := range snap.Indexes {
		if ix.Schema == exp.Table.Schema && ix.Name == exp.Index {
			bytes = ix.Bytes
		}
	}
	if bytes > e.maxCopy() {
		f.Verification = model.Verification{Status: model.NotRun, Reason: fmt.Sprintf("the index is %.0f MB, over the %.0f MB pgmedic reads with pgstatindex (--verify-max-size)", float64(bytes)/(1<<20), float64(e.maxCopy())/(1<<20))}
		return
	}
	var density, frag float64
	var leaves int64
	err := e.readOnly(ctx, func() error {
		return e.Conn.QueryRow(ctx, pgconn.Tag+"SELECT avg_leaf_density, leaf_fragmentation, leaf_pages FROM pgstatindex($1::regclass)",
			quoteIdent(exp.Table.Schema)+"."+quoteIdent(exp.Index)).Scan(&density, &frag, &leaves)
	})
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "pgstatindex failed: " + errText(err) + " (it needs the pg_stat_scan_tables role or superuser)"}
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "average leaf density (pgstatindex; ordered keys ~90)", Value: round(density), Unit: "%"},
		model.Evidence{Label: "leaf fragmentation (pgstatindex; ordered keys ~0)", Value: round(frag), Unit: "%"},
		model.Evidence{Label: "leaf pages", Value: float64(leaves)})
	method := "pgstatindex: average leaf density and leaf fragmentation of the index, both measured"
	if density < 80 && frag > 20 {
		f.Verification = model.Verification{Status: model.Confirmed, Method: method,
			Reason: fmt.Sprintf("leaves are %.1f%% full and %.1f%% fragmented, the signature of random inserts", density, frag)}
		return
	}
	f.Verification = model.Verification{Status: model.Refuted, Method: method,
		Reason: fmt.Sprintf("leaves are %.1f%% full and %.1f%% fragmented: the index is compact (recently rebuilt, or the keys arrive mostly in order)", density, frag)}
	f.Severity = model.Info
}

// tableStats reads pgstattuple (or pgstattuple_approx above the size limit)
// to measure the share of the table that is dead rows and free space.
func (e *Engine) tableStats(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if _, ok := snap.Extensions["pgstattuple"]; !ok {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "pgstattuple is not installed in this database, so dead space was not measured (CREATE EXTENSION pgstattuple; it ships with postgresql-contrib)"}
		return
	}
	t := snap.Table(exp.Table)
	if t == nil {
		return
	}
	fn, approx := "pgstattuple", false
	if t.HeapBytes > e.maxCopy() {
		fn, approx = "pgstattuple_approx", true
	}
	var dead, free, live float64
	err := e.readOnly(ctx, func() error {
		q := fmt.Sprintf("SELECT dead_tuple_percent, free_percent, tuple_percent FROM %s($1::regclass)", fn)
		if approx {
			q = fmt.Sprintf("SELECT dead_tuple_percent, approx_free_percent, approx_tuple_percent FROM %s($1::regclass)", fn)
		}
		return e.Conn.QueryRow(ctx, pgconn.Tag+q, quoteIdent(t.Schema)+"."+quoteIdent(t.Name)).Scan(&dead, &free, &live)
	})
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Reason: fn + " failed: " + errText(err) + " (it needs the pg_stat_scan_tables role or superuser)"}
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "dead rows, share of the table (" + fn + ")", Value: round(dead), Unit: "%"},
		model.Evidence{Label: "free space, share of the table (" + fn + ")", Value: round(free), Unit: "%"},
		model.Evidence{Label: "live rows, share of the table (" + fn + ")", Value: round(live), Unit: "%"})
	method := fn + ": dead-row and live-row shares of the table's bytes, both measured"
	if dead+free >= 30 {
		f.Verification = model.Verification{Status: model.Confirmed, Method: method,
			Reason: fmt.Sprintf("%.0f%% of the table is dead rows and %.0f%% free space; live rows fill %.0f%%", dead, free, live)}
		return
	}
	f.Verification = model.Verification{Status: model.Refuted, Method: method,
		Reason: fmt.Sprintf("only %.0f%% dead and %.0f%% free: the counters overstate it (vacuum ran since, or they were reset)", dead, free)}
	f.Severity = model.Info
}

// misestimate runs the statement that reads the stale table with EXPLAIN
// ANALYZE and compares planned with actual rows at its scans; in the lab it
// then runs ANALYZE on the table and measures again.
func (e *Engine) misestimate(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	stmt, err := sqlparse.Parse(exp.Query)
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "cannot parse the statement: " + err.Error()}
		return
	}
	if ok, why := stmt.SafeToAnalyze(); !ok {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "not re-run: " + why}
		return
	}
	b, why := e.bind(ctx, stmt, exp.Query)
	if why != "" {
		f.Verification = model.Verification{Status: model.NotRun, Reason: why}
		return
	}
	defer b.cleanup()
	factor := func() (float64, float64, float64, error) {
		var out []byte
		err := e.readOnly(ctx, func() error {
			if _, err := e.Conn.Exec(ctx, pgconn.Tag+"SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
				return err
			}
			return e.Conn.QueryRow(ctx, pgconn.Tag+"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "+b.target).Scan(&out)
		})
		if err != nil {
			return 0, 0, 0, err
		}
		ex, err := plan.ParseJSON(out)
		if err != nil {
			return 0, 0, 0, err
		}
		return scanMisestimate(ex, exp.Table)
	}
	before, planned, actual, err := factor()
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "EXPLAIN ANALYZE failed: " + errText(err)}
		return
	}
	if planned == 0 && actual == 0 {
		f.Verification = model.Verification{Status: model.NotRun, Reason: "the measured plan does not scan the table"}
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "rows the planner expected from the scan (measured run)", Value: math.Round(planned)},
		model.Evidence{Label: "rows the scan returned (measured run)", Value: math.Round(actual)},
		model.Evidence{Label: "misestimate factor", Value: round(before), Unit: "x"})
	method := "EXPLAIN ANALYZE of the statement: planned vs actual rows at the scans of the table"
	if b.desc != "" {
		method += "; parameters: " + b.desc
	}
	if before < 10 {
		f.Verification = model.Verification{Status: model.Refuted, Method: method,
			Reason: fmt.Sprintf("the statement's estimate is within %.1fx of the actual rows despite the stale statistics", before)}
		f.Severity = model.Info
		return
	}
	if !e.Lab {
		f.Verification = model.Verification{Status: model.NotRun, Method: method,
			Reason: fmt.Sprintf("measured a %.0fx misestimate; re-measuring after ANALYZE would write statistics, which pgmedic does not do on a target", before)}
		if before >= 100 {
			f.Severity = model.Critical
		}
		return
	}
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"BEGIN READ WRITE"); err == nil {
		_, err = e.Conn.Exec(ctx, pgconn.Tag+"ANALYZE "+quoteIdent(exp.Table.Schema)+"."+quoteIdent(exp.Table.Name))
		if err == nil {
			_, err = e.Conn.Exec(ctx, pgconn.Tag+"COMMIT")
		} else {
			e.Conn.Exec(context.WithoutCancel(ctx), pgconn.Tag+"ROLLBACK")
		}
		if err != nil {
			f.Verification = model.Verification{Status: model.NotRun, Method: method, Reason: "ANALYZE in the lab failed: " + errText(err)}
			return
		}
	}
	after, _, _, err := factor()
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Method: method, Reason: "EXPLAIN ANALYZE after ANALYZE failed: " + errText(err)}
		return
	}
	f.Verification = model.Verification{Method: method + "; then ANALYZE of the table (lab only) and measured again",
		Before: &model.Measure{Value: round(before), Unit: "x misestimate"}, After: &model.Measure{Value: round(after), Unit: "x misestimate"}}
	if after <= before/10 {
		f.Verification.Status = model.Confirmed
		if before >= 100 {
			f.Severity = model.Critical
		}
		return
	}
	f.Verification.Status = model.Refuted
	f.Severity = model.Info
}

// scanMisestimate is the worst planned/actual disagreement over the scans of
// one table (rows times loops; +1 so that empty results compare).
func scanMisestimate(ex *plan.Explain, t model.RelRef) (factor, planned, actual float64, err error) {
	// Under a LIMIT a scan stops early, so fewer actual rows than planned
	// is no misestimate there.
	limited := false
	ex.Plan.Walk(func(n, _ *plan.Node) {
		if n.NodeType == "Limit" {
			limited = true
		}
	})
	ex.Plan.Walk(func(n, _ *plan.Node) {
		if n.RelationName != t.Name || (n.Schema != "" && n.Schema != t.Schema) {
			return
		}
		loops := math.Max(n.ActualLoops, 1)
		p, a := n.PlanRows*loops, n.ActualRows*loops
		if limited && p > a {
			return
		}
		r := math.Max((a+1)/(p+1), (p+1)/(a+1))
		if r > factor {
			factor, planned, actual = r, p, a
		}
	})
	return factor, planned, actual, nil
}

// readOnly runs fn inside a read-only transaction that is rolled back.
func (e *Engine) readOnly(ctx context.Context, fn func() error) error {
	if _, err := e.Conn.Exec(ctx, pgconn.Tag+"BEGIN READ ONLY"); err != nil {
		return err
	}
	defer e.Conn.Exec(context.WithoutCancel(ctx), pgconn.Tag+"ROLLBACK")
	return fn()
}
