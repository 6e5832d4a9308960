package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/pgmedic/pgmedic/internal/model"
)

// The connection storm (the UK coronavirus dashboard's cascade): clients
// with a 1.5 s timeout and a retry run a statement JIT makes slow, through
// PgBouncer and directly. While check samples, three times the pool's size
// of clients run both ways at once; after it, goodput is measured at one
// and three times the pool's size, before and after the fix (jit = off for
// the role), and that table verifies connection-pressure and
// pool-saturation.

const (
	stormQuery   = `SELECT o.id, (SELECT sum(l.amount) FROM order_lines l WHERE l.order_id = o.id) AS total FROM orders o WHERE o.customer_id = $1`
	stormTimeout = 1500 * time.Millisecond
	stormRetries = 1
	stormPhase   = 3 * time.Second // with JIT: a request takes about a second
	// stormPhaseFixed is a phase with the fix: hundreds of requests a
	// second, so a second measures them as well.
	stormPhaseFixed = time.Second
	// stormSettle lets the statements cancelled at the end of a phase end:
	// LLVM compilation does not stop for a cancel request. Without JIT a
	// cancelled statement stops at once.
	stormSettle = time.Second
)

// stormRun is one measured phase.
type stormRun struct {
	Clients   int
	Pooled    bool
	JIT       bool
	Goodput   float64 // successful requests per second
	ErrorRate float64 // failed requests (all tries timed out) per request
	P95MS     float64 // of successful requests, retries included
	Finished  int64   // requests that ended in the phase, succeeded or failed
	Seconds   float64 // the phase's length
}

func (r stormRun) label() string {
	via := "direct"
	if r.Pooled {
		via = "via PgBouncer"
	}
	jit := "jit on"
	if !r.JIT {
		jit = "jit off"
	}
	return fmt.Sprintf("%d clients %s, %s", r.Clients, via, jit)
}

// connectionStorm is the load while check samples: 3x the pool's size of
// clients through PgBouncer and as many directly, until check is done.
func connectionStorm(ctx context.Context, env *Env) error {
	// A few calls alone first, as the application makes them on a quiet
	// day: pg_stat_statements records only calls that complete, and
	// during the storm most are cancelled. Two clients, three calls each
	// (jit-overhead needs 5 calls).
	quiet := make(chan error, 2)
	for c := range 2 {
		go func() {
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				quiet <- err
				return
			}
			defer conn.Close(context.Background())
			for i := c * 3; i < c*3+3 && ctx.Err() == nil; i++ {
				rows, err := conn.Query(ctx, stormQuery, 1+i*37)
				if err != nil {
					quiet <- err
					return
				}
				rows.Close()
			}
			quiet <- nil
		}()
	}
	for range 2 {
		if err := <-quiet; err != nil {
			return err
		}
	}
	env.Ready()
	n := 3 * env.Bouncer.PoolSize
	var wg sync.WaitGroup
	for _, pooled := range []bool{true, false} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stormClients(ctx, env, n, pooled, nil)
		}()
	}
	wg.Wait()
	return nil
}

// connectionStormGoodput measures the goodput table after check, and
// turns it into the verification of the pressure findings.
func connectionStormGoodput(ctx context.Context, env *Env, findings []model.Finding) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	pool := env.Bouncer.PoolSize
	var runs []stormRun
	for _, jit := range []bool{true, false} {
		if !jit {
			// The fix, for this database only: every new backend of the
			// role starts with JIT off; PgBouncer's server connections are
			// opened again so they get it.
			if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER ROLE %s IN DATABASE %s SET jit = off", AppRole, env.DB)); err != nil {
				return err
			}
			if err := env.Bouncer.Reconnect(ctx, env.DB); err != nil {
				return err
			}
		}
		for _, c := range []struct {
			n      int
			pooled bool
		}{{pool, true}, {3 * pool, true}, {3 * pool, false}} {
			r := stormRun{Clients: c.n, Pooled: c.pooled, JIT: jit}
			if jit || c.n == pool {
				time.Sleep(stormSettle) // after a phase with JIT (the first jit = off phase follows one)
			}
			phase := stormPhase
			if !jit {
				phase = stormPhaseFixed
			}
			var lat []float64
			var mu sync.Mutex
			ok, failed := stormPhaseRun(ctx, env, c.n, c.pooled, phase, func(ms float64) { mu.Lock(); lat = append(lat, ms); mu.Unlock() })
			if ok+failed == 0 && phase < stormPhase {
				// Nothing finished in the short phase (the server still busy
				// with the statements the last phase cancelled): measured
				// again, settled and over the long phase, rather than read
				// as no goodput.
				time.Sleep(stormSettle)
				phase = stormPhase
				ok, failed = stormPhaseRun(ctx, env, c.n, c.pooled, phase, func(ms float64) { mu.Lock(); lat = append(lat, ms); mu.Unlock() })
			}
			r.Finished, r.Seconds = ok+failed, phase.Seconds()
			r.Goodput = float64(ok) / phase.Seconds()
			if ok+failed > 0 {
				r.ErrorRate = float64(failed) / float64(ok+failed)
			} else {
				r.ErrorRate = 1 // nothing finished in the phase
			}
			sort.Float64s(lat)
			r.P95MS = model.Percentile(lat, 0.95)
			runs = append(runs, r)
			env.Record("goodput req/s: "+r.label(), model.Round(r.Goodput, 1))
			env.Record("error rate %: "+r.label(), model.Round(100*r.ErrorRate, 1))
			env.Record("p95 ms: "+r.label(), model.Round(r.P95MS, 1))
		}
	}
	before, after := runs[1], runs[4] // 3x the pool via PgBouncer, before and after the fix
	if runs[1].Goodput >= runs[0].Goodput {
		env.Log("connection-storm: 3x the clients did not lower goodput (%.1f vs %.1f req/s)", runs[1].Goodput, runs[0].Goodput)
	}
	for i := range findings {
		f := &findings[i]
		if f.Rule != "connection-pressure" && f.Rule != "pool-saturation" {
			continue
		}
		f.Verification = model.Verification{
			Method: fmt.Sprintf("goodput of the scenario's clients (%.1f s timeout, %d retry) at %d clients via PgBouncer, before and after jit = off for the role; %.1f s per run before, %.1f s after; at %d clients %.1f req/s, at %d directly %.1f req/s before the fix",
				stormTimeout.Seconds(), stormRetries, before.Clients, before.Seconds, after.Seconds, runs[0].Clients, runs[0].Goodput, runs[2].Clients, runs[2].Goodput),
			Before: &model.Measure{Value: model.Round(before.Goodput, 1), Unit: "req/s", HigherIsBetter: true},
			After:  &model.Measure{Value: model.Round(after.Goodput, 1), Unit: "req/s", HigherIsBetter: true},
		}
		switch {
		case after.Finished == 0 || (before.Finished == 0 && after.Goodput == 0):
			// A side where no request finished measured nothing: neither
			// a gain nor its absence.
			f.Verification.Status = model.NotRun
			f.Verification.Reason = "inconclusive: no request finished in a run with the fix, or in either run, so there is no goodput to compare"
		case after.Goodput > 0 && after.Goodput >= before.Goodput*1.25:
			f.Verification.Status = model.Confirmed
		default:
			f.Verification.Status = model.Refuted
		}
	}
	return nil
}

// stormPhaseRun runs n clients for one phase.
func stormPhaseRun(ctx context.Context, env *Env, n int, pooled bool, phase time.Duration, latency func(ms float64)) (ok, failed int64) {
	pctx, stop := context.WithTimeout(ctx, phase)
	defer stop()
	return stormClients(pctx, env, n, pooled, latency)
}

// stormClients runs n clients until ctx ends; each request has a 1 s
// timeout and is retried twice. It returns the requests that succeeded
// and those that failed, and reports each success's latency.
func stormClients(ctx context.Context, env *Env, n int, pooled bool, latency func(ms float64)) (ok, failed int64) {
	var okN, failN atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			dsn := env.AppDSN()
			if pooled {
				dsn = env.BouncerDSN()
			}
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				return
			}
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			if !pooled {
				// A timed-out request is cancelled on the server, as
				// drivers do, and the connection stays usable. Through
				// PgBouncer the connection is dropped instead: PgBouncer
				// 1.18 exits ("bad client state") on a cancel request that
				// arrives for a pool it has just closed.
				cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
					return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
				}
			}
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			rng := rand.New(rand.NewSource(int64(w)))
			for ctx.Err() == nil {
				if conn == nil || conn.IsClosed() {
					if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
						conn = nil
						time.Sleep(50 * time.Millisecond)
						continue
					}
				}
				start := time.Now()
				done, timedOut := false, false
				for try := 0; try <= stormRetries && !done && ctx.Err() == nil; try++ {
					rctx, cancel := context.WithTimeout(ctx, stormTimeout)
					rows, err := conn.Query(rctx, stormQuery, 1+rng.Intn(300))
					if err == nil {
						for rows.Next() {
						}
						rows.Close()
						err = rows.Err()
					}
					cancel()
					done = err == nil
					timedOut = timedOut || errors.Is(err, context.DeadlineExceeded) || (err != nil && ctx.Err() == nil)
					if conn.IsClosed() {
						break
					}
				}
				if ctx.Err() != nil {
					if !done && timedOut {
						failN.Add(1) // it had already timed out when the phase ended
					}
					break
				}
				if done {
					okN.Add(1)
					if latency != nil {
						latency(float64(time.Since(start).Microseconds()) / 1000)
					}
				} else {
					failN.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	return okN.Load(), failN.Load()
}
