package verify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

const (
	// throttleTarget is how long the slower VACUUM should take on its
	// copy, as its throttle predicts: long enough that its sleeps, not
	// the machine, set its pace; throttleLimit ends it if the prediction
	// was wrong (the copy's time then is a lower bound).
	throttleTarget = 1500 * time.Millisecond
	throttleLimit  = 15 * time.Second
	// The copies are this many heap pages at least and at most.
	throttleMinPages = 16
	throttleMaxPages = 2000
)

// vacuumThrottle times what the cost delay does to a table's VACUUM. On a
// twin (or a lab database) the same rows of the table go into two tables
// of pgmedic's own, with the table's indexes and autovacuum off, and a
// third of each page's rows is deleted, as dead rows spread over a table
// are. One is vacuumed at the throttle autovacuum runs the table at now,
// the other at the proposed one, with the target's page costs: the two
// times, and what they come to for the table's size.
func (e *Engine) vacuumThrottle(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.Lab || e.Workers == nil {
		f.Verification = model.NotRunBecause("measuring it copies rows and runs VACUUM, which pgmedic does not do on a target: check --twin times a VACUUM of a copy of " + exp.Table.Name + " at both throttles")
		return
	}
	now, fix, err := throttles(exp)
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	conns, closeAll, err := e.openWorkers(ctx, 1)
	defer closeAll()
	if err != nil {
		f.Verification = model.NotRunBecause("opening a session for the experiment: " + envelope.Message(err))
		return
	}
	c := conns[0]
	rel := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	var rows, pages int64
	if err := c.QueryRow(ctx, "SELECT count(*), pg_relation_size($1::regclass) / current_setting('block_size')::int8 FROM "+rel, rel).Scan(&rows, &pages); err != nil {
		f.Verification = model.NotRunBecause("reading the table's size failed: " + envelope.Message(err))
		return
	}
	if rows == 0 || pages == 0 {
		f.Verification = model.NotRunBecause("the table has no rows to copy")
		return
	}
	// As many pages as the slower throttle gets through in
	// throttleTarget, at what a page costs it (read from shared buffers,
	// then dirtied by pruning).
	pageCost := setting(snap, "vacuum_cost_page_hit", 1) + setting(snap, "vacuum_cost_page_dirty", 20)
	slow := math.Min(now.CostPerSecond(), fix.CostPerSecond())
	want := int64(throttleMaxPages)
	if !math.IsInf(slow, 1) {
		want = int64(throttleTarget.Seconds() * slow / pageCost)
	}
	want = min(max(want, throttleMinPages), throttleMaxPages, pages)
	copyRows := max(1, rows*want/pages)
	names := [2]string{"pgmedic_vacuum_now", "pgmedic_vacuum_fix"}
	defer func() {
		for _, n := range names {
			c.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+n)
		}
	}()
	for _, n := range names {
		for _, q := range []string{
			fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING INDEXES) WITH (autovacuum_enabled = off)", n, rel),
			fmt.Sprintf("INSERT INTO %s SELECT * FROM %s LIMIT %d", n, rel, copyRows),
			// Every third line pointer of every page: dead rows on each
			// page, as a table's updates and deletes leave them.
			fmt.Sprintf("DELETE FROM %s WHERE (ctid::text::point)[1]::int %% 3 = 0", n),
		} {
			if _, err := c.Exec(ctx, envelope.Tag+q); err != nil {
				f.Verification = model.NotRunBecause("copying rows of the table failed: " + envelope.Message(err))
				return
			}
		}
	}
	// Written out, as a table's pages are by the time autovacuum gets to
	// them: a page VACUUM prunes is then dirtied again, at page_dirty's
	// cost, as it would be on the target (a role that may not checkpoint
	// measures both sides on pages still dirty: cheaper, as alike).
	checkpointed := true
	if _, err := c.Exec(ctx, envelope.Tag+"CHECKPOINT"); err != nil {
		checkpointed = false
	}
	var copyPages int64
	if err := c.QueryRow(ctx, "SELECT pg_relation_size('"+names[0]+"') / current_setting('block_size')::int8").Scan(&copyPages); err != nil || copyPages == 0 {
		f.Verification = model.NotRunBecause("reading the copy's size failed")
		return
	}
	nowS, nowDone, err := e.timedVacuum(ctx, c, snap, names[0], exp.AppSettings)
	var fixS float64
	var fixDone bool
	if err == nil {
		fixS, fixDone, err = e.timedVacuum(ctx, c, snap, names[1], exp.FixSettings)
	}
	if err != nil {
		f.Verification = model.NotRunBecause("vacuuming the copy failed: " + envelope.Message(err))
		return
	}
	if !fixDone {
		f.Verification = model.NotRunBecause(fmt.Sprintf("even at the proposed throttle the VACUUM of %d pages did not finish within %s: the machine is too slow to tell", copyPages, throttleLimit))
		return
	}
	bound := ""
	if !nowDone {
		bound = fmt.Sprintf(" (stopped at %s: at least that)", throttleLimit)
	}
	perK := func(sec float64) float64 { return sec / float64(copyPages) * 1000 }
	if !checkpointed {
		bound += " (pages not written out first: no CHECKPOINT privilege)"
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "seconds per 1,000 heap pages at the throttle now (measured)" + bound, Value: model.Round(perK(nowS), 3), Unit: "s"},
		model.Evidence{Label: "seconds per 1,000 heap pages at the proposed throttle (measured)", Value: model.Round(perK(fixS), 3), Unit: "s"})
	if t := snap.Table(exp.Table); t != nil && t.HeapBytes > 0 {
		tablePages := float64(t.HeapBytes) / setting(snap, "block_size", 8192)
		whole := func(sec float64) float64 { return model.Round(sec/float64(copyPages)*tablePages, 1) }
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: fmt.Sprintf("the table's %s heap pages at that pace now", printable.Count(math.Round(tablePages))), Value: whole(nowS), Unit: "s"},
			model.Evidence{Label: fmt.Sprintf("the table's %s heap pages at the proposed pace", printable.Count(math.Round(tablePages))), Value: whole(fixS), Unit: "s"})
	}
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%s rows of %s copied twice into tables of their own (%d heap pages each, its indexes, autovacuum off), a third of each page's rows deleted; VACUUM timed on one at vacuum_cost_delay = %s ms, vacuum_cost_limit = %s (the throttle now%s) and on the other at %s ms, %s (proposed), with the target's page costs",
			printable.Count(float64(copyRows)), rel, copyPages, exp.AppSettings["vacuum_cost_delay"], exp.AppSettings["vacuum_cost_limit"], bound, exp.FixSettings["vacuum_cost_delay"], exp.FixSettings["vacuum_cost_limit"]),
		Before: &model.Measure{Value: model.Round(nowS*1000, 1), Unit: "ms"}, After: &model.Measure{Value: model.Round(fixS*1000, 1), Unit: "ms"}}
	judge(f, nowS, fixS)
}

// throttles reads the two sides' throttles from the experiment.
func throttles(exp *model.Experiment) (now, fix model.VacuumThrottle, err error) {
	read := func(m map[string]string) (model.VacuumThrottle, bool) {
		var t model.VacuumThrottle
		_, e1 := fmt.Sscan(m["vacuum_cost_delay"], &t.DelayMS)
		_, e2 := fmt.Sscan(m["vacuum_cost_limit"], &t.Limit)
		return t, e1 == nil && e2 == nil && t.Limit > 0
	}
	var ok1, ok2 bool
	now, ok1 = read(exp.AppSettings)
	fix, ok2 = read(exp.FixSettings)
	if !ok1 || !ok2 {
		return now, fix, errors.New("the finding names no vacuum throttle to compare")
	}
	return now, fix, nil
}

// setting is a numeric setting of the target, or def.
func setting(snap *model.Snapshot, name string, def float64) float64 {
	if st, ok := snap.Settings[name]; ok {
		return st.Float()
	}
	return def
}

// timedVacuum runs VACUUM on table at the throttle set, with the target's
// page costs, and times it by the engine's clock; done is false when
// throttleLimit stopped it.
func (e *Engine) timedVacuum(ctx context.Context, c Session, snap *model.Snapshot, table string, set map[string]string) (sec float64, done bool, err error) {
	stmts := []string{
		"SET vacuum_cost_delay = " + set["vacuum_cost_delay"],
		"SET vacuum_cost_limit = " + set["vacuum_cost_limit"],
		fmt.Sprintf("SET statement_timeout = %d", throttleLimit.Milliseconds()),
	}
	for _, p := range []string{"vacuum_cost_page_hit", "vacuum_cost_page_miss", "vacuum_cost_page_dirty"} {
		if st, ok := snap.Settings[p]; ok {
			stmts = append(stmts, "SET "+p+" = "+fmt.Sprint(int64(st.Float())))
		}
	}
	defer c.Exec(context.WithoutCancel(ctx), "RESET ALL")
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			return 0, false, err
		}
	}
	start := e.now()
	_, err = c.Exec(ctx, envelope.Tag+"VACUUM "+table)
	sec = e.now().Sub(start).Seconds()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57014" {
		return sec, false, nil
	}
	return sec, err == nil, err
}
