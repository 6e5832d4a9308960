package verify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
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
	stmt, err := statement(exp)
	if err != nil {
		f.Verification = model.NotRunBecause("cannot parse the statement: " + err.Error())
		return
	}
	if exp.Proposal == nil {
		f.Verification = model.NotRunBecause("the finding proposes no index to try")
		return
	}
	var reasons []string
	var hypoBefore, hypoAfter float64
	var hypoUsed bool
	// On a twin the index itself is built: the planner's guess adds
	// nothing to the measurement.
	if !e.InPlace {
		var why string
		if hypoBefore, hypoAfter, hypoUsed, why = e.hypoCost(ctx, snap, stmt, exp); why != "" {
			reasons = append(reasons, why)
		}
	}
	m, why := e.measureOnCopy(ctx, snap, stmt, exp)
	if why != "" {
		reasons = append(reasons, why)
	}
	if hypoBefore > 0 {
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: "planner cost now (HypoPG)", Value: model.Round(hypoBefore, 2)},
			model.Evidence{Label: "planner cost with the index (HypoPG)", Value: model.Round(hypoAfter, 2)})
	}
	switch {
	case m != nil:
		before, after := median(m.before), median(m.after)
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: "measured on the copy without the index (median)", Value: model.Round(before, 2), Unit: "ms"},
			model.Evidence{Label: "measured on the copy with the index (median)", Value: model.Round(after, 2), Unit: "ms"},
			model.Evidence{Label: "buffers per run without the index", Value: float64(m.buffersBefore)},
			model.Evidence{Label: "buffers per run with the index", Value: float64(m.buffersAfter)})
		on := "a temporary copy of %s (%d rows, its indexes copied)"
		if m.inPlace {
			on = "the twin's %s (%d rows)"
		}
		method := fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS) x%d before and x%d after creating the index on "+on+" in a rolled-back transaction, jit off; medians", e.Runs, e.Runs, exp.Table.Schema+"."+exp.Table.Name, m.rows)

		m.writes.evidence(f)
		if m.writesWhy != "" {
			method += "; the writers' cost was not measured: " + m.writesWhy
		}
		f.Verification = model.Verification{Method: method, Parameters: m.params,
			Before: &model.Measure{Value: model.Round(before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "ms"}}
		if judge(f, before, after) {
			rankBySaving(snap, f, before, after, m.buffersBefore)
			return
		}
		f.Title = fmt.Sprintf("index re-measured: %s does not make the statement faster (%.1f ms without, %.1f ms with)", strings.TrimPrefix(f.Fix.SQL, "CREATE INDEX CONCURRENTLY "), before, after)
	case hypoBefore > 0:
		f.Verification = model.Verification{Status: model.Estimated,
			Method: "HypoPG hypothetical index: planner cost of the statement without and with it (nothing is created)",
			Reason: strings.Join(reasons, "; "),
			Before: &model.Measure{Value: model.Round(hypoBefore, 2), Unit: "cost"}, After: &model.Measure{Value: model.Round(hypoAfter, 2), Unit: "cost"}}
		if !hypoUsed || hypoAfter >= hypoBefore {
			f.Severity = model.Info
			f.Title += " (but the planner would not use it)"
		}
		bloatedUnmeasured(snap, f)
	default:
		f.Verification = model.NotRunBecause(strings.Join(reasons, "; "))
		bloatedUnmeasured(snap, f)
	}
}

// The missing-index rule's own bar: a statement under indexWorthMS a call
// that is also under indexWorthShare of the database's statement time is
// not worth an index.
const (
	indexWorthMS    = 5.0
	indexWorthShare = 0.05
)

// bloatedUnmeasured judges an index proposed for a bloated table that was
// not measured on its live rows (no copy allowed): the statement's time
// and buffers are the bloat's as much as the missing index's. What a scan
// of the live rows alone would take is estimated from their share of the
// heap; when that falls under the bar the rule sets for any statement (a
// few milliseconds a call and a small share of the time), the index is
// info and the bloat is the fix (table-bloat's finding); otherwise both
// fixes matter, the bloat first.
func bloatedUnmeasured(snap *model.Snapshot, f *model.Finding) {
	t := snap.Table(f.Experiment.Table)
	if !snap.Bloated(t) {
		return
	}
	bloat := snap.BloatShare(t)
	compacted := f.Experiment.MeanMS * (1 - bloat)
	what := fmt.Sprintf("%.0f%% of the table's heap is not live rows (%d live, %d dead row versions)", 100*bloat, t.Live, t.Dead)
	if f.Experiment.MeanMS > 0 && (compacted >= indexWorthMS || f.Impact.Share*(1-bloat) >= indexWorthShare) {
		f.Impact.Summary = fmt.Sprintf("%s: fix the bloat first (table-bloat), and create the index: on the live rows alone the scan would still take about %.1f ms of the %.1f ms (estimated from their share; check --verify-indexes measures it on a copy). %s",
			what, compacted, f.Experiment.MeanMS, f.Impact.Summary)
		return
	}
	f.Severity = model.Info
	f.Title += fmt.Sprintf(" (the table is %.0f%% bloat: see table-bloat)", 100*bloat)
	f.Impact.Summary = fmt.Sprintf("%s: the scan's time is the bloat's as much as the missing index's. Fix the bloat first (table-bloat); on the live rows alone the scan would take about %.2f ms (estimated), so measure the index again after it (check --verify-indexes times it on a copy of the live rows). %s",
		what, compacted, f.Impact.Summary)
}

// rankBySaving sizes a confirmed index by what it saves of the time the
// application sees. On a compact, freshly copied table the statement can
// be much faster than the application's calls (the original is bloated,
// its pages are not cached, it waits for locks): the index saves only the
// difference it makes on the copy, so the finding's share and severity
// follow that saving, and it says where the rest of the time goes.
//
// A gap nothing explains is not read that way. When the calls touched
// about the buffers the copy's run did, they did the same work at another
// moment (a busier server: in an incident, the moment the server was
// slowest), and the index removes the same part of it as on the copy.
// Shrinking the saving to the copy's milliseconds would rank an index
// lower the busier the server was when its calls were counted.
func rankBySaving(snap *model.Snapshot, f *model.Finding, before, after float64, copyBuffers int64) {
	app := f.Experiment.MeanMS
	if app <= 0 || before >= app/2 {
		return
	}
	saved := math.Max(before-after, 0)
	var rest []string
	t := snap.Table(f.Experiment.Table)
	if t != nil && t.Dead > t.Live/5 {
		rest = append(rest, fmt.Sprintf("the original table holds %d dead rows beside %d live ones, which the compact copy does not (see table-bloat)", t.Dead, t.Live))
	} else if t != nil && snap.Bloated(t) {
		rest = append(rest, fmt.Sprintf("about %.0f%% of the original table's pages hold no live rows, the copy's hold only live rows (see table-bloat)", 100*snap.BloatShare(t)))
	}

	// More buffers a call than the copy's run is more work, not a busier
	// moment: the calls' values select more rows than the ones pgmedic
	// bound from pg_stats, or the original's rows lie on more pages.
	if calls, cp := f.Experiment.BuffersPerCall, float64(copyBuffers); calls >= 2*cp && calls-cp >= 100 {
		rest = append(rest, fmt.Sprintf("the application's calls touched %.0f buffers each, the copy's run %d: their values, or the original's layout, make more work than the copy's", calls, copyBuffers))
	}
	if r := f.Experiment.ReadShare; r >= 0.2 {
		rest = append(rest, fmt.Sprintf("%.0f%% of the statement's buffers were read from outside shared buffers, the copy's were cached", 100*r))
	}
	for _, w := range snap.LockWaits {
		if w.QueryID == f.Experiment.QueryID {
			rest = append(rest, fmt.Sprintf("it was seen waiting on %s", w.WaitEvent))
			break
		}
	}
	if len(rest) == 0 {
		part := saved / before
		f.Impact.Share = model.Round(f.Impact.Share*part, 4)
		f.Impact.Summary = fmt.Sprintf("the application's calls took %.2f ms on average, the copy %.2f ms without the index and %.2f ms with it; nothing shows the original differs from the copy (it is not bloated, its reads were cached, it was not seen waiting on a lock, its calls touched about the buffers the copy's run did), so the calls were slower for their moment (a busier server), and the index removes the same %.0f%% of their work. %s",
			app, before, after, 100*part, f.Impact.Summary)
		if part < 0.2 && f.Severity > model.Info {
			f.Severity--
		}
		return
	}
	part := math.Min(saved/app, 1)
	f.Impact.Share = model.Round(f.Impact.Share*part, 4)
	f.Impact.Summary = fmt.Sprintf("the index saves %.2f ms of the %.2f ms the application's calls take (measured %.2f -> %.2f ms on a copy); the rest: %s. %s",
		saved, app, before, after, strings.Join(rest, "; "), f.Impact.Summary)
	switch {
	case snap.Bloated(t) && part < 0.2:
		// On the compacted rows the index saves little of what the
		// application waits for: the bloat is the fix that matters, and
		// the index a question to ask again once it is gone.
		f.Severity = model.Info
		f.Impact.Summary = "fix the bloat first (table-bloat), then decide on the index: " + f.Impact.Summary
	case snap.Bloated(t):
		f.Impact.Summary = "fix the bloat (table-bloat) and create the index: on the compacted rows the index still saves most of the time. " + f.Impact.Summary
	case part < 0.2 && f.Severity > model.Info:
		f.Severity--
	}
}

// hypoCost asks the planner what the statement costs without and with the
// index, using HypoPG (hypothetical indexes live in pgmedic's backend
// memory only). Plans are custom plans for representative values.
func (e *Engine) hypoCost(ctx context.Context, snap *model.Snapshot, stmt *sqlparse.Statement, exp *model.Experiment) (before, after float64, used bool, why string) {
	if _, ok := snap.Extensions["hypopg"]; !ok {
		return 0, 0, false, "HypoPG is not installed in this database, so the planner's view was not checked (CREATE EXTENSION hypopg; Debian/Ubuntu package postgresql-15-hypopg)"
	}
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		return 0, 0, false, why
	}
	defer b.cleanup()
	var p0, p1 *plan.Explain
	var name string
	err := e.readOnly(ctx, func() error {
		// Hypothetical indexes live in the session, not the transaction.
		defer e.Conn.Exec(context.WithoutCancel(ctx), envelope.Tag+"SELECT hypopg_reset()")
		if _, err := e.Conn.Exec(ctx, envelope.Tag+"SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
			return errors.New(envelope.Message(err))
		}
		cost := func() (*plan.Explain, error) { return envelope.Explain(ctx, e.Conn, "", b.target) }
		var err error
		if p0, err = cost(); err != nil {
			return errors.New("EXPLAIN failed: " + envelope.Message(err))
		}
		if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT indexname FROM hypopg_create_index($1)", exp.Proposal.SQL(false)).Scan(&name); err != nil {
			return errors.New("HypoPG could not create the hypothetical index: " + envelope.Message(err))
		}
		if p1, err = cost(); err != nil {
			return errors.New("EXPLAIN with the hypothetical index failed: " + envelope.Message(err))
		}
		return nil
	})
	if err != nil {
		return 0, 0, false, err.Error()
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
	params                      []string
	inPlace                     bool // measured on the twin's table itself
	writes                      *writeCost
	writesWhy                   string // why the writers' cost was not measured
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
	if e.InPlace {
		return e.measureInPlace(ctx, t, stmt, exp)
	}
	sh := stmt.Shape()
	if !e.Lab {
		if why := e.refusalOfCalls(ctx, stmt); why != "" {
			return nil, "not measured: " + why
		}
		if sh.Command != "SELECT" && !sqlparse.OnlyRelation(sh, exp.Table) {
			return nil, "not measured: the statement writes and reads tables other than the copied one"
		}
	}
	rewritten, n, err := stmt.Retarget(exp.Table, "pg_temp", copyName)
	if err != nil || n == 0 {
		return nil, "cannot rewrite the statement to read a copy of the table"
	}
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		return nil, why
	}
	b.cleanup() // only the types and values are needed
	runs := &copyRuns{params: b.desc}
	var result string
	rows, err := e.withCopy(ctx, t, func() error {
		result = e.runOnCopy(ctx, runs, b, rewritten, exp.Proposal.On(copyName), copyName)
		return nil
	})
	if err != nil {
		return nil, err.Error()
	}
	if result != "" {
		return nil, result
	}
	runs.rows = rows
	return runs, ""
}

// measureInPlace is measureOnCopy on a twin: its table is already a
// throwaway copy, so the index is built on it directly, inside a
// transaction that is rolled back, with no second copy (and no copy
// limit: the twin's size was bounded when it was built).
func (e *Engine) measureInPlace(ctx context.Context, t *model.Table, stmt *sqlparse.Statement, exp *model.Experiment) (*copyRuns, string) {
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		return nil, why
	}
	b.cleanup()
	qt := sqlparse.QuoteQualified(t.Schema, t.Name)
	runs := &copyRuns{params: b.desc, inPlace: true}
	var result string
	err := e.inTempTransaction(ctx, e.Conn, func() error {
		if _, err := e.Conn.Exec(ctx, envelope.Tag+"SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
			return err
		}
		if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT reltuples::bigint FROM pg_class WHERE oid = $1::oid", t.OID).Scan(&runs.rows); err != nil {
			return err
		}
		e.writesOf(ctx, runs, qt, exp.Proposal)
		result = e.runOnCopy(ctx, runs, b, stmt, exp.Proposal.On(qt), qt)
		return nil
	})
	if err != nil {
		return nil, "measuring on the twin failed: " + envelope.Message(err)
	}
	if result != "" {
		return nil, result
	}
	return runs, ""
}

// withCopy copies a table with its indexes into the temporary table
// pgmedic_copy, analyzes it and calls fn, all in one transaction that is
// rolled back: the copy never outlives the experiment, and if pgmedic is
// killed the server drops it with the session.
func (e *Engine) withCopy(ctx context.Context, t *model.Table, fn func() error) (int64, error) {
	qt := sqlparse.QuoteIdent(t.Schema) + "." + sqlparse.QuoteIdent(t.Name)
	if why := e.lockedOut(ctx, qt); why != "" {
		return 0, fmt.Errorf("not measured: %s", why)
	}
	// The size with indexes and TOAST is measured now, for this table
	// only: the catalog pass reads only heap sizes, since measuring every
	// relation's forks costs seconds on a database with many tables.
	var total int64
	if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT pg_total_relation_size($1::oid)", t.OID).Scan(&total); err != nil {
		return 0, fmt.Errorf("not measured: cannot read the size of %s: %s", t.Name, envelope.Message(err))
	}
	if total > e.maxCopy() {
		return 0, fmt.Errorf("not measured: %s is %.0f MB with its indexes, over the copy limit of %.0f MB (--verify-max-size)", t.Name, float64(total)/(1<<20), float64(e.maxCopy())/(1<<20))
	}
	var rows int64
	err := envelope.RolledBack(ctx, e.Conn, envelope.ReadWrite, func() error {
		steps := []string{
			"SET LOCAL statement_timeout = '" + e.copyTimeout() + "'",
			"SET LOCAL plan_cache_mode = force_custom_plan",
			"CREATE TEMP TABLE " + copyName + " (LIKE " + qt + " INCLUDING INDEXES)",
			"INSERT INTO " + copyName + " SELECT * FROM " + qt,
			"ANALYZE " + copyName,
		}
		for _, q := range steps {
			if _, err := e.Conn.Exec(ctx, envelope.Tag+q); err != nil {
				return fmt.Errorf("copying the table failed: %s", envelope.Message(err))
			}
		}
		if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT count(*) FROM "+copyName).Scan(&rows); err != nil {
			return fmt.Errorf("counting the copy: %s", envelope.Message(err))
		}
		return fn()
	})
	return rows, err
}

// runOnCopy times the rewritten statement before and after creating the
// index (createIndex, on the copy).
func (e *Engine) runOnCopy(ctx context.Context, runs *copyRuns, b *bound, rewritten *sqlparse.Statement, createIndex, analyze string) string {
	target, release, err := e.onCopy(ctx, b, rewritten)
	if err != nil {
		return "cannot prepare the statement on the copy: " + envelope.Message(err)
	}
	defer release()
	measure := func() ([]float64, int64, error) {
		var times []float64
		var buffers int64
		for i := 0; i <= e.Runs; i++ { // the first run warms the cache
			if _, err := e.Conn.Exec(ctx, envelope.Tag+"SAVEPOINT pgmedic_run"); err != nil {
				return nil, 0, err
			}
			ex, err := envelope.Explain(ctx, e.Conn, "ANALYZE, BUFFERS", target)
			if _, rerr := e.Conn.Exec(ctx, envelope.Tag+"ROLLBACK TO SAVEPOINT pgmedic_run"); err == nil {
				err = rerr
			}
			if err != nil {
				return nil, 0, err
			}
			if i > 0 {
				times = append(times, ex.PlanningMS+ex.ExecutionMS)
				buffers = blocksTouched(ex.Plan.Buffers)
			}
		}
		return times, buffers, nil
	}
	if runs.before, runs.buffersBefore, err = measure(); err != nil {
		return "running the statement on the copy failed: " + envelope.Message(err)
	}
	if _, err := e.Conn.Exec(ctx, envelope.Tag+createIndex); err != nil {
		return "creating the index on the copy failed: " + envelope.Message(err)
	}
	if _, err := e.Conn.Exec(ctx, envelope.Tag+"ANALYZE "+analyze); err != nil {
		return envelope.Message(err)
	}
	if runs.after, runs.buffersAfter, err = measure(); err != nil {
		return "running the statement on the copy with the index failed: " + envelope.Message(err)
	}
	return ""
}

// onCopy makes the statement rewritten for the copy runnable: prepared
// with the parameter types and values bind chose for the original, or as it
// is when it has no parameters. release drops the prepared statement.
func (e *Engine) onCopy(ctx context.Context, b *bound, rewritten *sqlparse.Statement) (target string, release func(), err error) {
	// The text as PREPARE takes it: pg_stat_statements leaves typed
	// literals as "interval $2", which only its runnable form parses.
	query, err := rewritten.Runnable()
	if err != nil {
		return "", nil, err
	}
	if len(b.types) == 0 {
		return query, func() {}, nil
	}
	if err := envelope.PrepareAs(ctx, e.Conn, copyStmt, b.types, query); err != nil {
		return "", nil, err
	}
	release = func() { e.Conn.Exec(context.WithoutCancel(ctx), envelope.Tag+"DEALLOCATE "+copyStmt) }
	return "EXECUTE " + copyStmt + "(" + strings.Join(b.values, ", ") + ")", release, nil
}

func (e *Engine) copyTimeout() string {
	if e.CopyTimeout <= 0 {
		return "120s"
	}
	return fmt.Sprintf("%dms", e.CopyTimeout.Milliseconds())
}

// blocksTouched counts the pages a run read or found in cache: shared
// buffers for real tables, local buffers for the temporary copy. (It
// replaces a text scan of the EXPLAIN JSON that never counted local hits.)
func blocksTouched(b plan.Buffers) int64 {
	return b.SharedHit + b.SharedRead + b.LocalHit + b.LocalRead
}

// copyAllowed says whether experiments may build temporary copies.
func (e *Engine) copyAllowed() bool { return e.Lab || e.VerifyIndexes || e.Copies != nil }

const copyHint = "pass --verify-indexes (or --twin) to compare with a temporary copy"

// Copies is where the copy half of a measurement runs when it may not run
// on the target: the twin, whose tables hold the target's rows. The half
// that reads the target as it is (pgstattuple, pgstatindex, sizes) stays
// on the target.
type Copies struct {
	Conn envelope.Conn
	// Where says where a table's copy is, for the verification, and
	// Fraction which share of the table's rows it holds (1 for all).
	Where    func(model.RelRef) string
	Fraction func(model.RelRef) float64
	// Snap is the snapshot as the copies' server sees it (its oids).
	Snap *model.Snapshot
}

// copySide is the connection the copy half runs on, and where that is
// ("" for the target).
func (e *Engine) copySide(t model.RelRef) (envelope.Conn, string) {
	if e.Copies != nil {
		return e.Copies.Conn, e.Copies.Where(t)
	}
	return e.Conn, ""
}

// indexStats reads pgstatindex figures of an existing index: random keys
// leave leaves about 70% full and fragmented, ordered keys about 90% and
// unfragmented. With copies allowed, the same keys are inserted in order
// into a temporary B-tree and its density is measured for comparison.
func (e *Engine) indexStats(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	_, installed := snap.Extensions["pgstattuple"]
	if !installed && e.Copies == nil {
		f.Verification = model.NotRunBecause("pgstattuple is not installed in this database, so leaf density was not measured (CREATE EXTENSION pgstattuple; it ships with postgresql-contrib), and without --twin the keys are not inserted anywhere else")
		return
	}
	var ix *model.Index
	for i := range snap.Indexes {
		if snap.Indexes[i].Schema == exp.Table.Schema && snap.Indexes[i].Name == exp.Index {
			ix = &snap.Indexes[i]
		}
	}
	t := snap.Table(exp.Table)
	if ix == nil || t == nil || len(ix.Columns) != 1 {
		return
	}
	if !installed {
		if col := snap.Column(t, ix.Columns[0]); col != nil {
			e.keyOrderOnTwin(ctx, snap, f, col)
		}
		return
	}
	if ix.Bytes > e.maxCopy() {
		f.Verification = model.NotRunBecause(fmt.Sprintf("the index is %.0f MB, over the %.0f MB pgmedic reads with pgstatindex (--verify-max-size)", float64(ix.Bytes)/(1<<20), float64(e.maxCopy())/(1<<20)))
		return
	}
	var density, frag float64
	indexName := sqlparse.QuoteIdent(exp.Table.Schema) + "." + sqlparse.QuoteIdent(exp.Index)
	if why := e.lockedOut(ctx, indexName, sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)); why != "" {
		f.Verification = model.NotRunBecause("pgstatindex was not run: " + why)
		return
	}
	err := e.readOnly(ctx, func() error {
		return e.Conn.QueryRow(ctx, envelope.Tag+"SELECT avg_leaf_density, leaf_fragmentation FROM pgstatindex($1::regclass)", indexName).Scan(&density, &frag)
	})
	if err != nil {
		f.Verification = model.NotRunBecause("pgstatindex failed: " + envelope.Message(err) + " (it needs the pg_stat_scan_tables role or superuser)")
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "average leaf density (pgstatindex)", Value: model.Round(density, 2), Unit: "%"},
		model.Evidence{Label: "leaf fragmentation (pgstatindex)", Value: model.Round(frag, 2), Unit: "%"})
	random := density < 80 && frag > 20
	if !random {
		f.Verification = model.Verification{Status: model.Refuted, Method: "pgstatindex",
			Reason: fmt.Sprintf("leaves are %.1f%% full and %.1f%% fragmented: the index is compact (recently rebuilt, or keys arrive mostly in order)", density, frag)}
		f.Severity = model.Info
		return
	}
	if !e.copyAllowed() {
		f.Verification = model.Verification{Status: model.NotRun, Method: "pgstatindex",
			Reason: fmt.Sprintf("measured leaves %.1f%% full and %.1f%% fragmented, the signature of random inserts; %s of the same keys inserted in order", density, frag, copyHint)}
		return
	}
	col := snap.Column(t, ix.Columns[0])
	if col == nil {
		return
	}
	ordered, where, err := e.orderedDensity(ctx, exp.Table, t, col)
	if err != nil {
		f.Verification = model.Verification{Status: model.NotRun, Method: "pgstatindex",
			Reason: fmt.Sprintf("measured leaves %.1f%% full and %.1f%% fragmented; the ordered comparison failed: %s", density, frag, envelope.Message(err))}
		return
	}
	f.Evidence = append(f.Evidence, model.Evidence{Label: "leaf density of the same keys inserted in order (temporary B-tree)", Value: model.Round(ordered, 2), Unit: "%"})
	f.Verification = model.Verification{Status: model.Confirmed, Where: where,
		Method: "pgstatindex of the index as it is, and of a temporary B-tree with the same keys inserted in ascending order (rolled back)",
		Before: &model.Measure{Value: model.Round(density, 2), Unit: "% leaf density", HigherIsBetter: true},
		After:  &model.Measure{Value: model.Round(ordered, 2), Unit: "% leaf density", HigherIsBetter: true}}
	if ordered < density+10 {
		f.Verification.Status = model.Refuted
		f.Severity = model.Info
	}
}

// orderedDensity is the leaf density of a temporary B-tree built from the
// same keys as the index, inserted in ascending order, and where it was
// built ("" on the target).
func (e *Engine) orderedDensity(ctx context.Context, rel model.RelRef, t *model.Table, col *model.Column) (ordered float64, where string, err error) {
	conn, where := e.copySide(rel)
	err = e.inTempTransaction(ctx, conn, func() error {
		for _, q := range []string{
			"CREATE EXTENSION IF NOT EXISTS pgstattuple",
			"CREATE TEMP TABLE pgmedic_keys (k " + col.Type + " PRIMARY KEY)",
			"INSERT INTO pgmedic_keys SELECT " + sqlparse.QuoteIdent(col.Name) + " FROM " + sqlparse.QuoteIdent(t.Schema) + "." + sqlparse.QuoteIdent(t.Name) + " WHERE " + sqlparse.QuoteIdent(col.Name) + " IS NOT NULL ORDER BY 1",
		} {
			if strings.HasPrefix(q, "CREATE EXTENSION") && where == "" {
				continue // the target already has it (checked by indexStats)
			}
			if _, err := conn.Exec(ctx, envelope.Tag+q); err != nil {
				return err
			}
		}
		return conn.QueryRow(ctx, envelope.Tag+"SELECT avg_leaf_density FROM pgstatindex('pg_temp.pgmedic_keys_pkey')").Scan(&ordered)
	})
	return ordered, where, err
}

// mayCopy says whether t may be copied for f's experiment; when not, it
// sets f's verification to the notes so far and why (hint: what check
// --twin or --verify-indexes would copy).
func (e *Engine) mayCopy(f *model.Finding, t *model.Table, notes []string, hint string) bool {
	why := ""
	switch {
	case !e.copyAllowed():
		why = hint
	case t.HeapBytes > e.maxCopy():
		why = "the table is over --verify-max-size"
	default:
		return true
	}
	f.Verification = model.NotRunBecause(strings.Join(append(notes, why), "; "))
	return false
}

// inTempTransaction runs fn in a read-write transaction on conn that is
// always rolled back; callers create only temporary objects in it.
func (e *Engine) inTempTransaction(ctx context.Context, conn envelope.Conn, fn func() error) error {
	return envelope.RolledBack(ctx, conn, envelope.ReadWrite, func() error {
		if _, err := conn.Exec(ctx, envelope.Tag+"SET LOCAL statement_timeout = '"+e.copyTimeout()+"'"); err != nil {
			return err
		}
		return fn()
	})
}

// tableStats measures the table's wasted space: pgstattuple's dead and free
// shares when the extension is there, and with copies allowed the size of
// a compact copy of its live rows against its size now.
func (e *Engine) tableStats(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	t := snap.Table(f.Experiment.Table)
	if t == nil {
		return
	}
	var notes []string
	locked := e.lockedOut(ctx, sqlparse.QuoteQualified(t.Schema, t.Name))
	if locked != "" {
		notes = append(notes, "pgstattuple was not run: "+locked)
	}
	if _, ok := snap.Extensions["pgstattuple"]; ok && t.HeapBytes <= e.maxCopy() && locked == "" {
		var dead, free float64
		err := e.readOnly(ctx, func() error {
			return e.Conn.QueryRow(ctx, envelope.Tag+"SELECT dead_tuple_percent, free_percent FROM pgstattuple($1::regclass)",
				sqlparse.QuoteIdent(t.Schema)+"."+sqlparse.QuoteIdent(t.Name)).Scan(&dead, &free)
		})
		if err == nil {
			f.Evidence = append(f.Evidence,
				model.Evidence{Label: "dead rows, share of the table (pgstattuple)", Value: model.Round(dead, 2), Unit: "%"},
				model.Evidence{Label: "free space, share of the table (pgstattuple)", Value: model.Round(free, 2), Unit: "%"})
			notes = append(notes, fmt.Sprintf("pgstattuple measured %.0f%% dead rows and %.0f%% free space", dead, free))
		} else {
			notes = append(notes, "pgstattuple failed: "+envelope.Message(err))
		}
	} else {
		notes = append(notes, "pgstattuple is not installed (CREATE EXTENSION pgstattuple) or the table is over --verify-max-size")
	}
	if !e.mayCopy(f, t, notes, copyHint+" of the live rows") {
		return
	}
	var now, compact int64
	qt := sqlparse.QuoteQualified(t.Schema, t.Name)
	conn, where := e.copySide(f.Experiment.Table)
	copyLive := func() error {
		if _, err := conn.Exec(ctx, envelope.Tag+"CREATE TEMP TABLE "+copyName+" AS SELECT * FROM "+qt); err != nil {
			return err
		}
		return conn.QueryRow(ctx, envelope.Tag+"SELECT pg_relation_size('pg_temp."+copyName+"')").Scan(&compact)
	}
	size := func() error {
		return e.Conn.QueryRow(ctx, envelope.Tag+"SELECT pg_relation_size($1::regclass)", qt).Scan(&now)
	}
	var err error
	if where == "" {
		// One transaction on the target: its size, then the copy.
		err = e.inTempTransaction(ctx, conn, func() error {
			if err := size(); err != nil {
				return err
			}
			return copyLive()
		})
	} else if err = e.readOnly(ctx, size); err == nil {
		err = e.inTempTransaction(ctx, conn, copyLive)
	}
	if err != nil {
		f.Verification = model.NotRunBecause(strings.Join(append(notes, "copying the live rows failed: "+envelope.Message(err)), "; "))
		return
	}
	before, after := float64(now)/(1<<20), float64(compact)/(1<<20)
	if e.Copies != nil && e.Copies.Fraction != nil {
		if fr := e.Copies.Fraction(f.Experiment.Table); fr > 0 && fr < 1 {
			// A sample's compact size, scaled to all the rows: an estimate,
			// and said to be one.
			after /= fr
			notes = append(notes, fmt.Sprintf("the compact size is scaled from a %.0f%% sample", 100*fr))
		}
	}
	f.Verification = model.Verification{Where: where,
		Method: "heap size now vs a compact temporary copy of its live rows (what VACUUM FULL or pg_repack would leave), rolled back; " + strings.Join(notes, "; "),
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "MB"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "MB"}}
	judge(f, before, after)
}

// misestimate runs the statement that reads the stale table with EXPLAIN
// ANALYZE and compares planned with actual rows at its scans; with copies
// allowed it runs the statement again on a freshly analysed temporary copy
// of the table, which is what the table's plans would see after ANALYZE.
func (e *Engine) misestimate(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
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
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	defer func() { f.Verification.Parameters = b.desc }()
	var ex *plan.Explain
	err = e.readOnly(ctx, func() error {
		if _, err := e.Conn.Exec(ctx, envelope.Tag+"SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
			return err
		}
		ex, err = envelope.Explain(ctx, e.Conn, "ANALYZE, TIMING OFF", b.target)
		return err
	})
	b.cleanup()
	if err != nil {
		f.Verification = model.NotRunBecause("EXPLAIN ANALYZE failed: " + envelope.Message(err))
		return
	}
	before, planned, actual := scanMisestimate(ex, exp.Table)
	if planned == 0 && actual == 0 {
		f.Verification = model.NotRunBecause("the measured plan does not scan the table")
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "rows the planner expected from the scan (measured run)", Value: math.Round(planned)},
		model.Evidence{Label: "rows the scan returned (measured run)", Value: math.Round(actual)},
		model.Evidence{Label: "misestimate factor", Value: model.Round(before, 2), Unit: "x"})
	method := "EXPLAIN ANALYZE of the statement: planned vs actual rows at the scans of the table"

	if before < 10 {
		f.Verification = model.Verification{Status: model.Refuted, Method: method,
			Reason: fmt.Sprintf("the statement's estimate is within %.1fx of the actual rows despite the stale statistics", before)}
		f.Severity = model.Info
		return
	}
	// A measured misestimate is decisive whatever the rule thought of the
	// table's age (a finding within autovacuum's lag starts at info).
	f.Severity = max(f.Severity, model.Warning)
	if before >= 100 {
		f.Severity = model.Critical
	}
	if !e.copyAllowed() {
		f.Verification = model.Verification{Status: model.NotRun, Method: method,
			Reason: fmt.Sprintf("measured a %.0fx misestimate; %s analysed afresh", before, copyHint)}
		return
	}
	after, where, why := e.misestimateAnalysed(ctx, snap, stmt, b, exp.Table)
	if why != "" {
		f.Verification = model.Verification{Status: model.NotRun, Method: method, Reason: why}
		return
	}
	f.Verification = model.Verification{Where: where, Method: method + "; then the same on a temporary copy of the table analysed afresh (rolled back)",
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "x misestimate"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "x misestimate"}}
	if after <= before/10 {
		f.Verification.Status = model.Confirmed
		return
	}
	f.Verification.Status = model.Refuted
	f.Severity = model.Info
}

// misestimateAnalysed measures the misestimate on a freshly analysed copy
// of the table: on the twin when there is one (where says so), else on a
// temporary copy on this connection.
func (e *Engine) misestimateAnalysed(ctx context.Context, snap *model.Snapshot, stmt *sqlparse.Statement, b *bound, table model.RelRef) (after float64, where, why string) {
	copier, t := e, snap.Table(table)
	if e.Copies != nil {
		c := *e
		c.Conn, c.Lab, c.Copies = e.Copies.Conn, true, nil
		copier, t, where = &c, e.Copies.Snap.Table(table), e.Copies.Where(table)
	}
	if t == nil {
		return 0, where, "the table is not in the snapshot"
	}
	after, why = copier.misestimateOnCopy(ctx, t, stmt, b, table)
	return after, where, why
}

// misestimateOnCopy runs the statement on a freshly analysed temporary
// copy of the table, which is what its plans would see after ANALYZE, and
// returns the misestimate there, or why it could not.
func (e *Engine) misestimateOnCopy(ctx context.Context, t *model.Table, stmt *sqlparse.Statement, b *bound, table model.RelRef) (float64, string) {
	rewritten, n, err := stmt.Retarget(table, "pg_temp", copyName)
	if err != nil || n == 0 {
		return 0, "cannot rewrite the statement to read a copy of the table"
	}
	var after float64
	_, err = e.withCopy(ctx, t, func() error {
		target, release, err := e.onCopy(ctx, b, rewritten)
		if err != nil {
			return err
		}
		defer release()
		ex, err := envelope.Explain(ctx, e.Conn, "ANALYZE, TIMING OFF", target)
		if err != nil {
			return err
		}
		after, _, _ = scanMisestimate(ex, model.RelRef{Name: copyName})
		return nil
	})
	if err != nil {
		return 0, "measuring on an analysed copy failed: " + envelope.Message(err)
	}
	return after, ""
}

// scanMisestimate is the worst planned/actual disagreement over the scans of
// one table (rows times loops; +1 so that empty results compare).
func scanMisestimate(ex *plan.Explain, t model.RelRef) (factor, planned, actual float64) {
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
	return factor, planned, actual
}

// readOnly runs fn inside a read-only transaction that is rolled back.
func (e *Engine) readOnly(ctx context.Context, fn func() error) error {
	return envelope.RolledBack(ctx, e.Conn, envelope.ReadOnly, fn)
}

// lockedOut says why relations cannot be opened now, or "": a schema
// change's ACCESS EXCLUSIVE lock held or queued on one of them. A read
// that opens the relation (pgstattuple, pgstatindex, a copy) would queue
// behind it into pgmedic's lock_timeout, an ERROR in the target's log,
// and hold up whatever queues behind pgmedic meanwhile.
func (e *Engine) lockedOut(ctx context.Context, relations ...string) string {
	var locked []string
	err := e.Conn.QueryRow(ctx, envelope.Tag+`SELECT coalesce(array_agg(DISTINCT l.relation::regclass::text), '{}') FROM pg_locks l
		WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.relation = ANY (SELECT to_regclass(r) FROM unnest($1::text[]) r)`, relations).Scan(&locked)
	switch {
	case err != nil:
		return "its locks could not be read: " + envelope.Message(err)
	case len(locked) > 0:
		return "a schema change's ACCESS EXCLUSIVE lock is held or queued on " + strings.Join(locked, ", ") + ", and reading it would queue behind the change"
	}
	return ""
}
