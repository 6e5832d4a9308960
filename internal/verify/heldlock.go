package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// The reproduction of a transaction left idle: the head sits idle for
// idleHold, and with the fix the server ends it after idleTimeout, the
// idle_in_transaction_session_timeout the reproduction sets on the head's
// session. idleWaiters sessions run the waiting statement meanwhile.
// When the finding says how long the head was seen idle and which timeout
// it proposes (Experiment.IdleMS, TimeoutMS), the reproduction holds that
// long (up to maxIdleHold) and sets that timeout: what is pasted is what
// was proved. Longer stalls are scaled down to maxIdleHold, the timeout
// with them, and the method says by how much.
const (
	idleHold    = 1200 * time.Millisecond
	idleTimeout = 300 * time.Millisecond
	maxIdleHold = 5 * time.Second
	idleWaiters = 3
)

// idleReproduction is how long the reproduction's head sits idle and the
// timeout it sets, and what the method says about them.
type idleReproduction struct {
	hold, timeout time.Duration
	note          string
}

// idlePlan sizes the reproduction from what the finding measured and
// proposes.
func idlePlan(exp *model.Experiment) idleReproduction {
	if exp.IdleMS <= 0 || exp.TimeoutMS <= 0 || exp.TimeoutMS >= exp.IdleMS {
		return idleReproduction{hold: idleHold, timeout: idleTimeout, note: " (the incident's idle time scaled down)"}
	}
	idle := time.Duration(exp.IdleMS * float64(time.Millisecond))
	timeout := time.Duration(exp.TimeoutMS * float64(time.Millisecond))
	if idle <= maxIdleHold {
		return idleReproduction{hold: idle.Round(10 * time.Millisecond), timeout: timeout, note: " (as long as it was seen idle)"}
	}
	k := float64(maxIdleHold) / float64(idle)
	return idleReproduction{hold: maxIdleHold, timeout: time.Duration(float64(timeout) * k).Round(time.Millisecond),
		note: fmt.Sprintf(" (the %s it was seen idle and the %s proposed, both scaled by %.2f to fit a check)", idle.Round(100*time.Millisecond), timeout, k)}
}

// heldLock proves what a transaction left idle costs the sessions behind
// it and what idle_in_transaction_session_timeout gives back: the longest
// wait of the waiting statement while a session holds the head's locks
// idle, as it happened and with the timeout on the head's session. Every
// statement runs in a transaction that is rolled back, on the twin only.
func (e *Engine) heldLock(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil || !e.InPlace {
		f.Verification = model.NotRunBecause("observed while sampling; check --twin reproduces it on a twin (a session holding the head's locks idle, the waiting statement behind it) with and without idle_in_transaction_session_timeout")
		return
	}
	wait, why := e.forSessions(ctx, exp.Waiter, "pgmedic_wait")
	if why != "" {
		f.Verification = model.NotRunBecause("the waiting statement: " + why)
		return
	}
	undone := ""
	if exp.Change != "" {
		var err error
		if undone, err = e.undoOnTwin(ctx, exp.Change); err != nil {
			f.Verification = model.NotRunBecause("the reproduction on the twin failed: " + envelope.Message(err))
			return
		}
	}
	take, how := e.headTake(ctx, exp, wait)
	plan := idlePlan(exp)
	worst, runs, err := e.idleSides(ctx, take, wait, exp.Change, plan)
	if err != nil {
		f.Verification = model.NotRunBecause("the reproduction on the twin failed: " + envelope.Message(err))
		return
	}
	reproduced := func() bool { return worst[0] >= float64(plan.hold.Milliseconds())/2 }
	// The head's own last statement may have locked rows the waiters'
	// values do not reach (the head updated an order, the waiters its
	// customer's row, locked by an earlier statement of the head's
	// transaction that was not sampled). Then the head takes its locks
	// with the waiting statement and its values: what the waiters wait
	// for is those rows, whatever locked them first.
	if !reproduced() && take.run != wait.run {
		if w, r, err := e.idleSides(ctx, wait, wait, exp.Change, plan); err == nil {
			worst, runs, take = w, r, wait
			how = "the waiting statement itself, with the same values (its own last statement locked other rows)"
		}
	}
	// Values bind chose for $n may match no row the twin holds: then the
	// head locks nothing and nobody waits. The head and the waiters take
	// one row of the table the twin does hold, as the incident's sessions
	// shared the rows the head had locked.
	if !reproduced() && take.run == wait.run && wait.prepare != "" {
		if onRow, ok := e.onARow(ctx, wait); ok {
			if w, r, err := e.idleSides(ctx, onRow, onRow, exp.Change, plan); err == nil {
				worst, runs, take, wait = w, r, onRow, onRow
				how = "the waiting statement itself, on one row of the table both it and the head took"
			}
		}
	}
	// The waiters must have waited as written, or the reproduction did not
	// reproduce the chain (values that match no row the head locked).
	if !reproduced() {
		f.Verification = model.NotRunBecause(fmt.Sprintf("the twin did not reproduce the wait: the waiting statement's longest run was %.1f ms while the head sat idle %s (its values may match no row the head locked)", worst[0], plan.hold))
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "longest wait behind the idle transaction (reproduction)", Value: worst[0], Unit: "ms"},
		model.Evidence{Label: "longest wait with idle_in_transaction_session_timeout (reproduction)", Value: worst[1], Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%sreproduced: a session took the head's locks with %s and sat idle in its transaction for %s%s, %swhile %d sessions ran the waiting statement in a loop (%d and %d runs); then the same with SET idle_in_transaction_session_timeout = '%s' on the head's session; every transaction rolled back",
			undone, how, plan.hold, plan.note, changeNote(exp.Change), idleWaiters, runs[0], runs[1], plan.timeout),
		Parameters: wait.params,
		Before:     &model.Measure{Value: worst[0], Unit: "ms longest wait"}, After: &model.Measure{Value: worst[1], Unit: "ms longest wait"}}
	judge(f, worst[0], worst[1])
}

// headTake is the statement the reproduction's head takes its locks with, and
// how the method says so: its own last statement when it can be replayed,
// else the waiters' statement and values (the same rows, so the same row
// locks), or LOCK TABLE for a table lock.
func (e *Engine) headTake(ctx context.Context, exp *model.Experiment, wait sessionStmt) (sessionStmt, string) {
	switch {
	case exp.HeadLock != "":
		return sessionStmt{run: "LOCK TABLE " + sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name) + " IN " + exp.HeadLock + " MODE"},
			"LOCK TABLE in " + exp.HeadLock + " mode, the lock it held"
	case exp.Query != "" && wait.prepare == "":
		// Only when the waiters' values are known too: values bind picks
		// for $n need not be the rows the head's own statement locked.
		if t, why := e.forSessions(ctx, exp.Query, "pgmedic_head"); why == "" {
			return t, "its own last statement"
		}
	}
	return wait, "the waiting statement itself, with the same values"
}

// changeNote says, in a held-lock reproduction's method, that a schema change
// queued behind the head.
func changeNote(change string) string {
	if change == "" {
		return ""
	}
	return fmt.Sprintf("the schema change %q queued behind it as on the target, ", printable.Shorten(change, 60))
}

// idleSides reproduces both sides, without and with the timeout.
func (e *Engine) idleSides(ctx context.Context, take, wait sessionStmt, change string, plan idleReproduction) (worst [2]float64, runs [2]int, err error) {
	return bothSides(func(timeout bool) ([]float64, error) { return e.reproduceIdle(ctx, take, wait, change, timeout, plan) })
}

// reproduceIdle runs one side: the head takes its locks and sits idle
// (with the timeout, the server ends its session), the waiters run the
// statement in rolled-back transactions until the head is gone. It
// returns the waiters' latencies (ms).
func (e *Engine) reproduceIdle(ctx context.Context, take, wait sessionStmt, change string, timeout bool, plan idleReproduction) ([]float64, error) {
	extra := 0
	if change != "" {
		extra = 1
	}
	conns, closeAll, err := e.openWorkers(ctx, 1+extra+idleWaiters)
	defer closeAll()
	if err != nil {
		return nil, err
	}
	head, waiters := conns[0], conns[1+extra:]
	if err := prepareOn(ctx, conns[:1], take.prepare); err != nil {
		return nil, fmt.Errorf("preparing the statements: %w", err)
	}
	if err := prepareOn(ctx, waiters, wait.prepare); err != nil {
		return nil, fmt.Errorf("preparing the statements: %w", err)
	}
	if timeout {
		if _, err := head.Exec(ctx, fmt.Sprintf("SET idle_in_transaction_session_timeout = %d", plan.timeout.Milliseconds())); err != nil {
			return nil, err
		}
	}
	if _, err := head.Exec(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	if _, err := head.Exec(ctx, take.run); err != nil {
		head.Exec(ctx, "ROLLBACK")
		return nil, fmt.Errorf("taking the head's locks: %w", err)
	}
	// A schema change in the chain queues for the head's lock before the
	// waiters come, as it did on the target; it is rolled back once it
	// has its lock.
	changed := make(chan error, 1)
	if change != "" {
		go func() { changed <- e.runChange(ctx, conns[1], change, false) }()
		e.sleep(ctx, queueLag)
	} else {
		changed <- nil
	}
	finish := e.loopTimed(ctx, waiters, func(ctx context.Context, c Session) (float64, error) {
		return rolledBackRun(ctx, c, wait.run)
	})
	// The client comes back after the hold and ends its transaction; with
	// the timeout the server has ended the session long before, and the
	// ROLLBACK fails on a closed connection, as the client's would.
	e.sleep(ctx, plan.hold)
	head.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	changeErr := <-changed
	e.sleep(ctx, queueRetry)
	lat, waitErr := finish()
	if changeErr != nil {
		return nil, fmt.Errorf("the schema change: %w", changeErr)
	}
	if waitErr != nil {
		return nil, fmt.Errorf("the waiting statement: %w", waitErr)
	}
	return lat, nil
}

// rolledBackRun runs one statement in a transaction it rolls back and
// returns how long the statement took (ms).
func rolledBackRun(ctx context.Context, c Session, q string) (float64, error) {
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return 0, err
	}
	ms, err := execMS(ctx, c, q)
	c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	return ms, err
}
