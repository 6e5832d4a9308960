package verify

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// A load replay runs each side for loadPhase after loadWarm (sessions
// connected, caches warm), with at most loadMaxClients sessions. When no
// statement finished in the phase on either side (statements that take
// seconds each on a busy twin), both sides run again for loadLongPhase:
// a slow moment is measured longer, not given up on.
const (
	loadPhase      = 3 * time.Second
	loadLongPhase  = 4 * loadPhase
	loadWarm       = 500 * time.Millisecond
	loadMaxClients = 64
)

// load is one side of a replay: what finished, what failed, and the
// latencies the clients saw (pool waits and connecting included).
type load struct {
	ok, failed int64
	p95, p50   float64
	goodput    float64 // statements finished per second
}

// concurrency proves a connection-pressure or pool-saturation finding on
// a twin: the statement mix the samples showed, run by as many clients as
// were working, as they ran it (directly, a session per request when
// they churned, or through the pool they had) and through a PgBouncer
// pool of the proposed size; goodput and p95 of each.
func (e *Engine) concurrency(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil || !e.InPlace || e.Pool == nil {
		f.Verification = model.NotRunBecause(f.Verification.Reason + "; check --twin replays the sampled statements at this concurrency on a twin, directly and through a pool of the proposed size")
		return
	}
	mix, params, why := e.mixRuns(ctx, exp.Mix)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	clients, poolNow, pool := min(toTwinCores(exp.Clients, exp.Cores), loadMaxClients), toTwinCores(exp.PoolNow, exp.Cores), toTwinCores(exp.Pool, exp.Cores)
	here := runtime.NumCPU()
	var before, after load
	phase := loadPhase
	for {
		var err error
		if before, err = e.loadSide(ctx, mix, clients, poolNow, exp.Reconnect, phase); err != nil {
			f.Verification = model.NotRunBecause("the replay on the twin failed: " + envelope.Message(err))
			return
		}
		if after, err = e.loadSide(ctx, mix, clients, pool, false, phase); err != nil {
			f.Verification = model.NotRunBecause("the replay on the twin through a pool failed: " + envelope.Message(err))
			return
		}
		if before.ok > 0 || after.ok > 0 || phase >= loadLongPhase {
			break
		}
		phase = loadLongPhase
	}
	longer := ""
	if phase > loadPhase {
		longer = fmt.Sprintf(" (run again for %s after no statement finished in %s on either side)", phase, loadPhase)
	}
	asRan := "directly"
	switch {
	case poolNow > 0:
		asRan = fmt.Sprintf("through a pool of %d", poolNow)
	case exp.Reconnect:
		asRan = "directly, a new session per statement"
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: fmt.Sprintf("replayed goodput, %d clients %s", clients, asRan), Value: model.Round(before.goodput, 1), Unit: "statements/s"},
		model.Evidence{Label: fmt.Sprintf("replayed goodput, %d clients through a pool of %d", clients, pool), Value: model.Round(after.goodput, 1), Unit: "statements/s"},
		model.Evidence{Label: "replayed p95 " + asRan, Value: model.Round(before.p95, 1), Unit: "ms"},
		model.Evidence{Label: fmt.Sprintf("replayed p95 through a pool of %d", pool), Value: model.Round(after.p95, 1), Unit: "ms"},
		model.Evidence{Label: "replayed statements failed (as run, pooled)", Value: float64(before.failed + after.failed)})
	method := fmt.Sprintf("replayed on the twin: %d distinct statements in the proportions sampled, %d clients (%d on the server's %d cores, scaled to the twin's %d) for %s each%s, %s and through PgBouncer in transaction mode with %d server connections; writes rolled back; goodput is statements finished per second, p95 as the clients saw it (pool waits and connecting included)",
		distinct(exp.Mix), clients, exp.Clients, exp.Cores, here, phase, longer, asRan, pool)
	f.Verification = model.Verification{Method: method, Parameters: params,
		Before: &model.Measure{Value: model.Round(before.goodput, 1), Unit: "statements/s", HigherIsBetter: true},
		After:  &model.Measure{Value: model.Round(after.goodput, 1), Unit: "statements/s", HigherIsBetter: true}}
	if before.ok == 0 && after.ok == 0 {
		// Nothing to compare: every statement outlasted the phase on
		// both sides (on a twin whose machine is slower than the
		// server's, or a mix of long statements).
		f.Verification.Status, f.Verification.Before, f.Verification.After = model.NotRun, nil, nil
		f.Verification.Reason = fmt.Sprintf("no replayed statement finished within %s on either side, nor within %s when run again (%d failed, the others outlasted it): a load this slow on the twin cannot be compared; replay the log (pgmedic replay) with the clients' own timeouts", loadPhase, phase, before.failed+after.failed)
		return
	}
	// The pool must give back goodput, or the same goodput at a p95 the
	// clients feel; anything less is not worth the change.
	if after.ok > 0 && (after.goodput >= before.goodput/helpedRatio || (after.goodput >= 0.95*before.goodput && after.p95 <= before.p95*helpedRatio)) {
		f.Verification.Status = model.Confirmed
		return
	}
	f.Verification.Status = model.Refuted
	f.Verification.Method += fmt.Sprintf("; the pool gave no more goodput (%.1f against %.1f statements/s) nor a better p95 (%.1f against %.1f ms): the statements' own cost is the limit, so make them cheaper first. The replay's clients wait as long as it takes; clients that time out and retry (the cascade) waste work a pool would save, and a replay of the log with their timeouts measures that",
		after.goodput, before.goodput, after.p95, before.p95)
	f.Severity = model.Info
}

// toTwinCores scales a count of sessions from the server's cores to the
// twin's machine, which keeps sessions per core: at least 1, and 0 stays
// 0 (no pool); unchanged when the server's cores are not known.
func toTwinCores(n, cores int) int {
	if cores <= 0 || n == 0 {
		return n
	}
	return max(1, int(math.Round(float64(n)*float64(runtime.NumCPU())/float64(cores))))
}

// mixRun is one statement of a replayed mix, with its values written in
// (a transaction-mode pool keeps nothing prepared), and whether it writes.
type mixRun struct {
	sql    string
	writes bool
}

func (e *Engine) mixRuns(ctx context.Context, texts []string) ([]mixRun, []string, string) {
	bound := map[string]mixRun{}
	var runs []mixRun
	var params []string
	for _, q := range texts {
		r, ok := bound[q]
		if !ok {
			w, why := e.forSessions(ctx, q, "pgmedic_mix")
			if why != "" {
				return nil, nil, "a sampled statement: " + why
			}
			r = mixRun{sql: w.query, writes: w.writes}
			if w.prepare != "" {
				var err error
				if r.sql, err = sqlparse.Inline(w.query, w.values); err != nil {
					return nil, nil, "writing a sampled statement's values in: " + err.Error()
				}
				params = append(params, w.params...)
			}
			bound[q] = r
		}
		runs = append(runs, r)
	}
	return runs, params, ""
}

// loadSide runs the mix from clients sessions for loadPhase: directly
// (pool 0; a session per statement with reconnect) or through a pool of
// that many server connections.
func (e *Engine) loadSide(ctx context.Context, mix []mixRun, clients, pool int, reconnect bool, phase time.Duration) (load, error) {
	connect := e.Workers
	if pool > 0 {
		c, stop, err := e.Pool(ctx, pool)
		if err != nil {
			return load{}, err
		}
		defer stop()
		connect = c
	}
	var conns []Session
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	if !reconnect {
		for i := range clients {
			c, err := connect(withClient(ctx, i))
			if err != nil {
				return load{}, fmt.Errorf("opening %d sessions: %w", clients, err)
			}
			conns = append(conns, c)
		}
	}
	return runClients(ctx, clients, phase, func(pctx context.Context, i int, t *tally) {
		// A client with a session of its own keeps its clock on it (a
		// replayed one runs to the end of its recording); one that
		// connects for each statement has the side's. The statement the
		// side's end cancels is no failure: live, the side's context has
		// ended; replayed, it is the recording's last call.
		clk := &clientClock{live: t.since}
		more := func() bool { return pctx.Err() == nil }
		cut := func(err error) bool { return pctx.Err() != nil }
		if r, ok := sessionOf(conns, i).(Replayed); ok && !reconnect {
			clk.virtual = true
			more = func() bool { return !r.Ended() }
			cut = func(err error) bool { return err != nil && r.Ended() }
		}
		for n := i; more(); n++ {
			start := clk.now()
			err := clk.ran(sessionOf(conns, i), func() error { return runOne(pctx, connect, conns, i, reconnect, mix[n%len(mix)]) })
			if !cut(err) {
				t.add(start, clk.now(), err)
			}
		}
	})
}

// tally is what one side of a load replay counted in its phase (after
// its warm-up): statements finished and failed, the latencies of those
// that finished, the first error.
type tally struct {
	begin      time.Time
	phase      time.Duration
	ok, failed atomic.Int64
	mu         sync.Mutex
	lat        []float64
	firstErr   error
}

// since is the wall-clock time since the side began.
func (t *tally) since() time.Duration { return time.Since(t.begin) }

// sessionOf is client i's own session, nil for a client that connects
// for each statement.
func sessionOf(conns []Session, i int) Session {
	if i < len(conns) {
		return conns[i]
	}
	return nil
}

// inPhase says whether a moment of a client's clock is in the measured
// phase: after the warm-up, before the side ends.
func (t *tally) inPhase(at time.Duration) bool {
	return at >= loadWarm && at < loadWarm+t.phase
}

// add counts a statement that ran from start to end on its client's
// clock and ended with err, when it ended within the phase (one still
// running at the end was cancelled, and is not a failure).
func (t *tally) add(start, end time.Duration, err error) {
	if !t.inPhase(end) {
		return
	}
	if err != nil {
		t.failed.Add(1)
		t.fail(err)
		return
	}
	t.ok.Add(1)
	t.mu.Lock()
	t.lat = append(t.lat, float64((end-start).Microseconds())/1000)
	t.mu.Unlock()
}

// fail keeps the first error, which says why a side finished nothing.
func (t *tally) fail(err error) {
	t.mu.Lock()
	t.firstErr = cmpErr(t.firstErr, err)
	t.mu.Unlock()
}

// runClients runs client(i) for clients sessions for loadWarm+phase,
// measuring after loadWarm, and returns what they finished: goodput is
// statements finished per second of the phase. A side that finished
// nothing returns its first error.
func runClients(ctx context.Context, clients int, phase time.Duration, client func(pctx context.Context, i int, t *tally)) (load, error) {
	t := tally{begin: time.Now(), phase: phase}
	pctx, stop := context.WithTimeout(ctx, loadWarm+phase)
	defer stop()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client(withClient(pctx, i), i, &t)
		}()
	}
	wg.Wait()
	if t.ok.Load() == 0 && t.firstErr != nil {
		return load{}, t.firstErr
	}
	sort.Float64s(t.lat)
	return load{ok: t.ok.Load(), failed: t.failed.Load(), p50: model.Percentile(t.lat, 0.5), p95: model.Percentile(t.lat, 0.95),
		goodput: float64(t.ok.Load()) / phase.Seconds()}, nil
}

// clientKey carries a load client's number in the contexts its
// sessions are opened with.
type clientKey struct{}

func withClient(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, clientKey{}, i)
}

// ClientOf is the number (from 0) of the load client a session is
// opened for, when it is one: a recording keeps each client's sessions
// and refused connections apart, and a replay gives each its own.
func ClientOf(ctx context.Context) (int, bool) {
	i, ok := ctx.Value(clientKey{}).(int)
	return i, ok
}

// runOne runs one statement of the mix on client i's session, or on a
// session of its own with reconnect; writes in a transaction rolled back.
func runOne(ctx context.Context, connect func(context.Context) (Session, error), conns []Session, i int, reconnect bool, r mixRun) error {
	var c Session
	if reconnect {
		var err error
		if c, err = connect(ctx); err != nil {
			return err
		}
		defer c.Close(context.WithoutCancel(ctx))
	} else {
		c = conns[i]
	}
	if !r.writes {
		_, err := c.Exec(ctx, r.sql)
		return err
	}
	_, err := rolledBackRun(ctx, c, r.sql)
	return err
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func distinct(texts []string) int {
	seen := map[string]bool{}
	for _, t := range texts {
		seen[strings.TrimSpace(t)] = true
	}
	return len(seen)
}
