package verify

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// Admitted are sessions of a role the server admits only so many of.
// Each connector is called with the load client's number in its context
// (ClientOf); a replayed one says ErrRecordingEnded when the client's
// recording has no more connections.
type Admitted struct {
	// Connect opens one directly; past the limit the server refuses it.
	Connect func(context.Context) (Session, error)
	// Pool starts PgBouncer in transaction mode with size server
	// connections of the role, and returns a connector through it.
	Pool func(ctx context.Context, size int) (connect func(context.Context) (Session, error), stop func(), err error)
	// Close drops the role.
	Close func()
}

// ErrRecordingEnded is what a replayed connector (a transcript's) says
// when the client's recording holds no more connections: the client has
// done what it did when recorded.
var ErrRecordingEnded = errors.New("the recording holds no more connections for this client")

// A held-sessions replay admits at most heldMaxSlots sessions on the
// twin (the server's own slots, scaled down: a twin's machine need not
// hold hundreds of backends), with half as many clients again as it
// admits, the fewest that make the server refuse a third of them; each
// client sits idle between its statements for the time the samples saw,
// within heldThink.
const (
	heldMaxSlots = 12
	heldMinThink = 20 * time.Millisecond
	heldMaxThink = 500 * time.Millisecond
)

// heldSide is one side of a held-sessions replay.
type heldSide struct {
	load
	refused int64 // connection attempts the server refused (53300)
}

// heldSessions proves a finding of connections held idle until the
// server refuses new ones: on a twin whose role admits as many sessions
// as the server admitted (scaled), more clients than that each hold a
// session, as they did, and the same clients go through a PgBouncer pool
// of the proposed size. Goodput (statements finished per second) of
// each, and the connections refused.
func (e *Engine) heldSessions(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Admit == nil || !e.InPlace {
		f.Verification = model.NotRunBecause(f.Verification.Reason + "; check --twin replays the held sessions on a twin of pgmedic's own, as many as the server admits and more, directly and through a pool")
		return
	}
	mix, params, why := e.mixRuns(ctx, exp.Mix)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	slots := min(exp.Slots, heldMaxSlots)
	clients := slots + (slots+1)/2
	pool := min(toTwinCores(exp.Pool, exp.Cores), slots)
	think := min(max(time.Duration(exp.ThinkMS*float64(time.Millisecond)), heldMinThink), heldMaxThink).Round(time.Millisecond)
	adm, err := e.Admit(ctx, slots)
	if err != nil {
		f.Verification = model.NotRunBecause("a role of limited connections on the twin: " + envelope.Message(err))
		return
	}
	defer adm.Close()
	before, err := e.holdSide(ctx, mix, clients, think, adm.Connect)
	if err != nil {
		f.Verification = model.NotRunBecause("the replay on the twin failed: " + envelope.Message(err))
		return
	}
	connect, stop, err := adm.Pool(ctx, pool)
	if err != nil {
		f.Verification = model.NotRunBecause("starting a pool on the twin: " + envelope.Message(err))
		return
	}
	after, err := e.holdSide(ctx, mix, clients, think, connect)
	stop()
	if err != nil {
		f.Verification = model.NotRunBecause("the replay on the twin through a pool failed: " + envelope.Message(err))
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: fmt.Sprintf("replayed goodput, %d clients holding a session each, %d admitted", clients, slots), Value: model.Round(before.goodput, 1), Unit: "statements/s"},
		model.Evidence{Label: fmt.Sprintf("replayed goodput, %d clients through a pool of %d", clients, pool), Value: model.Round(after.goodput, 1), Unit: "statements/s"},
		model.Evidence{Label: "replayed connections refused, holding a session each", Value: float64(before.refused)},
		model.Evidence{Label: "replayed connections refused, through the pool", Value: float64(after.refused)},
		model.Evidence{Label: "replayed p95 through the pool", Value: model.Round(after.p95, 1), Unit: "ms"})
	method := fmt.Sprintf("replayed on the twin: a role admitted to %d sessions at once (the %d max_connections leaves to ordinary roles, scaled to the twin), %d clients each running the sampled statements (%d distinct) in turn with %s idle between them (the samples' idle time), for %s: first each holding a session of its own, as they did (refused clients try again after their idle time), then through PgBouncer in transaction mode with %d server connections; writes rolled back; goodput is statements finished per second",
		slots, exp.Slots, clients, distinct(exp.Mix), think, loadPhase, pool)
	f.Verification = model.Verification{Method: method, Parameters: params,
		Before: &model.Measure{Value: model.Round(before.goodput, 1), Unit: "statements/s", HigherIsBetter: true},
		After:  &model.Measure{Value: model.Round(after.goodput, 1), Unit: "statements/s", HigherIsBetter: true}}
	// The pool must let every client in, and serve them: no refusal, and
	// at least the goodput the held sessions had.
	if before.refused > 0 && after.refused == 0 && after.failed == 0 && after.ok > 0 && after.goodput >= 0.95*before.goodput {
		f.Verification.Status = model.Confirmed
		return
	}
	f.Verification.Status = model.Refuted
	f.Severity = model.Info
	f.Verification.Method += fmt.Sprintf("; the pool did not serve every client better: %d refused and %d failed through it (%d refused holding sessions), %.1f against %.1f statements/s",
		after.refused, after.failed, before.refused, after.goodput, before.goodput)
}

// holdSide runs the mix from clients that each keep one session (opened
// through connect) and sit think between statements, for loadPhase
// after loadWarm. A client the server refuses counts the refusal and
// tries again after its idle time, as an application's next request
// would. Replayed (a transcript: the engine's Sleep is injected), each
// client runs its recording to the end on a clock of its own: the
// recorded time of its calls and the idle time it slept.
func (e *Engine) holdSide(ctx context.Context, mix []mixRun, clients int, think time.Duration, connect func(context.Context) (Session, error)) (heldSide, error) {
	var refused atomic.Int64
	l, err := runClients(ctx, clients, loadPhase, func(pctx context.Context, i int, t *tally) {
		clk := &clientClock{live: t.since, virtual: e.Sleep != nil}
		var c Session
		defer func() {
			if c != nil {
				c.Close(context.WithoutCancel(ctx))
			}
		}()
		// A virtual clock ends with the recording; twice the side's
		// length bounds it should a live session meet an injected Sleep.
		more := func() bool { return pctx.Err() == nil }
		if clk.virtual {
			more = func() bool { return clk.now() < 2*(loadWarm+loadPhase) }
		}
		for n := i; more(); n++ {
			if c == nil {
				var err error
				if c, err = connect(pctx); err != nil {
					c = nil
					switch {
					case errors.Is(err, ErrRecordingEnded):
						return
					case pctx.Err() != nil:
					case envelope.NoSlot(err):
						if t.inPhase(clk.now()) {
							refused.Add(1)
						}
					default:
						t.fail(err)
					}
					clk.sleep(pctx, think)
					continue
				}
			}
			r, replayed := c.(Replayed)
			if replayed && r.Ended() {
				return
			}
			start := clk.now()
			err := clk.ran(c, func() error { return runOne(pctx, nil, []Session{c}, 0, false, mix[n%len(mix)]) })
			// The side's end cancels no failure: live its context has
			// ended, replayed it is the recording's last call.
			if pctx.Err() == nil && !(replayed && err != nil && r.Ended()) {
				t.add(start, clk.now(), err)
			}
			clk.sleep(pctx, think)
		}
	})
	return heldSide{load: l, refused: refused.Load()}, err
}

// clientClock is a load client's time since its side began: the wall
// clock's, or (virtual, for sessions replayed from a transcript) what its
// recorded calls took plus the idle time it slept, without sleeping, so
// that a replay counts what the recording counted.
type clientClock struct {
	live    func() time.Duration
	virtual bool
	at      time.Duration
}

func (c *clientClock) now() time.Duration {
	if c.virtual {
		return c.at
	}
	return c.live()
}

func (c *clientClock) sleep(ctx context.Context, d time.Duration) {
	if c.virtual {
		c.at += d
		return
	}
	wait.For(ctx, d)
}

// ran runs f on session s and, on a virtual clock, moves it by the
// time s's calls in f took when recorded.
func (c *clientClock) ran(s Session, f func() error) error {
	r, ok := s.(Replayed)
	if !c.virtual || !ok {
		return f()
	}
	before := r.Elapsed()
	err := f()
	c.at += r.Elapsed() - before
	return err
}
