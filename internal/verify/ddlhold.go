package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ddlHold proves what a schema change that holds its lock while it runs
// (a CREATE INDEX without CONCURRENTLY: SHARE, which blocks every write
// for the whole build) costs the statements queued behind it, and what
// its fixed form gives back: on a twin, a session holds the change's lock
// for idleHold (the build's time, scaled down to what a check can spend)
// while sessions run the queued statement in a loop, rolled back; then
// the same with the lock the fixed form takes. The build itself is not
// run: on the twin's empty copy it would take no time, and the lock,
// not the build, is what the queue waits for.
func (e *Engine) ddlHold(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil || !e.InPlace {
		f.Verification = model.NotRunBecause("observed while sampling; check --twin reproduces it on a twin (the change's lock held, the queued statement behind it) with the lock its CONCURRENTLY form takes")
		return
	}
	wait, why := e.forSessions(ctx, exp.Waiter, "pgmedic_wait")
	if why != "" {
		f.Verification = model.NotRunBecause("the queued statement: " + why)
		return
	}
	table := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	worst, runs, err := bothSides(func(fixed bool) ([]float64, error) {
		mode := exp.HeadLock
		if fixed {
			mode = exp.FixLock
		}
		return e.reproduceIdle(ctx, sessionStmt{run: "LOCK TABLE " + table + " IN " + mode + " MODE"}, wait, "", false, idleReproduction{hold: idleHold})
	})
	if err != nil {
		f.Verification = model.NotRunBecause("the reproduction on the twin failed: " + envelope.Message(err))
		return
	}
	if worst[0] < float64(idleHold.Milliseconds())/2 {
		f.Verification = model.NotRunBecause(fmt.Sprintf("the twin did not reproduce the queue: the queued statement's longest run was %.1f ms while %s was held for %s (it does not conflict with that lock)", worst[0], exp.HeadLock, idleHold))
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "longest run of the queued statement under the change's lock (reproduction)", Value: worst[0], Unit: "ms"},
		model.Evidence{Label: "longest run under the lock of its CONCURRENTLY form (reproduction)", Value: worst[1], Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("reproduced: a session held %s on %s for %s, as the change does while it runs, and %d sessions ran the queued statement in a loop, each run rolled back (%d runs); then the same under %s, the lock the change's CONCURRENTLY form takes (%d runs)",
			exp.HeadLock, table, idleHold, idleWaiters, runs[0], exp.FixLock, runs[1]),
		Parameters: wait.params,
		Before:     &model.Measure{Value: worst[0], Unit: "ms longest run"}, After: &model.Measure{Value: worst[1], Unit: "ms longest run"}}
	judge(f, worst[0], worst[1])
}
