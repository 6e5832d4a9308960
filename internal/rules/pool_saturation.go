package rules

import (
	"fmt"
	"math"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// PoolSaturationID is the rule id.
const PoolSaturationID = "pool-saturation"

// poolSaturation finds PgBouncer pools whose clients queue for a server
// connection while every one of them is busy: the pool is the bottleneck,
// and what keeps its connections busy (the slowest statements) is what to
// fix before the pool size.
func poolSaturation(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if s.Sampling != nil && s.Sampling.PgBouncer == "" && s.Sampling.BouncerError != "" {
		return nil, []model.Skip{{Rule: PoolSaturationID, Reason: "PgBouncer was not sampled: " + s.Sampling.BouncerError,
			Fix: "give --pgbouncer the admin console: postgres://USER@HOST:6432/pgbouncer with USER in admin_users or stats_users"}}
	}
	if s.Sampling == nil || s.Sampling.PgBouncer == "" {
		return nil, []model.Skip{{Rule: PoolSaturationID, Reason: "no PgBouncer was sampled", Fix: "pass --pgbouncer with the admin console's DSN when clients go through PgBouncer"}}
	}
	pools, order := poolsOverWindow(s.Sampling.Pools)
	var top *model.Statement
	if len(s.Statements) > 0 {
		top = &s.Statements[0]
	}
	var out []model.Finding
	for _, k := range order {
		a := pools[k]
		if a.full < stallMinSamples {
			continue
		}
		sev := model.Warning
		switch mean, known := meanPoolWait(s, a.pool.Database); {
		case a.maxWaitMS >= 1000:
			sev = model.Critical
		case a.maxWaitMS < poolWaitWarnMS && (!known || mean < poolMeanWaitWarnMS):
			// A queue that drains in tens of milliseconds costs the
			// clients little: a pool the size of the server's cores
			// queues so for a moment whenever the machine is busy.
			sev = model.Info
		}
		f := model.Finding{
			Rule: PoolSaturationID, Severity: sev,
			Title: fmt.Sprintf("PgBouncer pool %s: up to %d clients waited for a server connection while all %d were busy (longest wait %.0f ms)",
				k, a.maxWaiting, a.busy, a.maxWaitMS),
			Object: model.Object{Kind: "pool", Name: k, Database: a.pool.Database},
			Evidence: []model.Evidence{
				ev("samples with clients waiting and no idle server connection", float64(a.full), ""),
				ev("clients waiting, at most", float64(a.maxWaiting), ""),
				ev("longest wait (maxwait)", a.maxWaitMS, "ms"),
				ev("server connections in use while clients waited", float64(a.busy), ""),
			},
			Impact:       model.Impact{Summary: "requests queue in the pool before they reach PostgreSQL: client-side latency that no statement timing shows"},
			Fix:          model.Fix{Summary: "make the statements that hold the pool's connections cheaper first (they are what the queue waits for); then size the pool to the server's cores, not to the clients; keep transactions short in transaction mode"},
			Verification: model.NotRunBecause("observed in PgBouncer's SHOW POOLS while sampling"),
			Docs:         docsPath(PoolSaturationID),
		}
		if a.pool.Mode != "" {
			f.Evidence = append(f.Evidence, model.Evidence{Label: "pool mode: " + a.pool.Mode, Value: 1, Fact: true})
		}
		poolSizeExperiment(s, &f, a)
		for _, st := range s.Sampling.BouncerStats {
			if st.Database == a.pool.Database && st.Transactions > 0 {
				f.Evidence = append(f.Evidence, ev("mean wait for a server connection per transaction (SHOW STATS)", st.WaitMS/float64(st.Transactions), "ms"),
					ev("transactions served in the window", float64(st.Transactions), ""))
			}
		}
		if top != nil {
			f.Impact.Summary += fmt.Sprintf("; the statement with the most time is %q (mean %.1f ms over %d calls%s): see its findings",
				printable.Shorten(top.Query, 80), top.MeanExecMS(), top.Calls, jitNote(top))
		}
		out = append(out, f)
	}
	return out, nil
}

// Below both of these a pool's queue is info, not a warning: the
// longest wait seen (PgBouncer's maxwait) and the clients' mean wait for a
// server connection per transaction (SHOW STATS). The lab's saturated
// pool measured 257 ms and 254 ms; its roomy counterpart 32 ms and 4.9 ms
// on a loaded machine, 0.1 ms mean on a quiet one.
const (
	poolWaitWarnMS     = 100
	poolMeanWaitWarnMS = 20
)

// meanPoolWait is the clients' mean wait for a server connection per
// transaction in a database's pools over the window, when SHOW STATS
// counted any transaction.
func meanPoolWait(s *model.Snapshot, database string) (float64, bool) {
	for _, st := range s.Sampling.BouncerStats {
		if st.Database == database && st.Transactions > 0 {
			return st.WaitMS / float64(st.Transactions), true
		}
	}
	return 0, false
}

// poolWindow is one PgBouncer pool over the sampling window.
type poolWindow struct {
	pool               model.Pool // as last seen
	waitingTicks, full int        // ticks with clients waiting; and no idle server connection
	// busy is the most server connections in use while clients waited
	// with none idle: the pool's real size (the last tick may be after
	// the queue drained).
	busy                 int
	maxWaiting           int
	maxClients           int // clients active and waiting, at most
	maxWaitMS, firstWait float64
}

// poolsOverWindow folds SHOW POOLS' ticks by database/user pair, in the
// order the pools first appeared.
func poolsOverWindow(ticks []model.PoolSample) (map[string]*poolWindow, []string) {
	pools := map[string]*poolWindow{}
	var order []string
	for i, ps := range ticks {
		for _, p := range ps.Pools {
			k := p.Database + "/" + p.User
			a := pools[k]
			if a == nil {
				a = &poolWindow{}
				pools[k] = a
				order = append(order, k)
			}
			a.pool = p
			if p.ClWaiting > 0 {
				a.waitingTicks++
				if p.SvIdle == 0 {
					a.full++
					a.busy = max(a.busy, p.SvActive+p.SvUsed)
				}
			}
			a.maxWaiting = max(a.maxWaiting, p.ClWaiting)
			a.maxClients = max(a.maxClients, p.ClActive+p.ClWaiting)
			if i == 0 {
				a.firstWait = p.MaxWaitMS
			}
			a.maxWaitMS = math.Max(a.maxWaitMS, p.MaxWaitMS)
		}
	}
	return pools, order
}

// poolSaturationLog: clients PgBouncer closed after they waited longer
// than query_wait_timeout for a server connection. Each is a request that
// failed without reaching the database: the pool was full for that long.
func poolSaturationLog(in LogInput) []model.Finding {
	le := in.Events
	if le.PoolWaitTimeouts == 0 {
		return nil
	}
	sev := model.Warning
	if le.PoolWaitTimeouts >= 10 {
		sev = model.Critical
	}
	return []model.Finding{{Rule: PoolSaturationID, Severity: sev,
		Title:  fmt.Sprintf("PgBouncer closed %d clients that waited longer than query_wait_timeout for a server connection", le.PoolWaitTimeouts),
		Object: logObject(in),
		Evidence: []model.Evidence{ev2("clients closed: query_wait_timeout", le.PoolWaitTimeouts), ev2("logins", le.PoolLogins),
			ev("the log's span", math.Round(le.Seconds), "s")},
		Impact:       model.Impact{Summary: "every server connection of the pool stayed busy longer than the clients would wait: their requests failed without reaching PostgreSQL, and clients that retry add to the queue"},
		Fix:          model.Fix{Summary: "find what holds the server connections (slow statements, transactions left open, in SHOW POOLS and pg_stat_activity); make those cheaper first, then size the pool to the server's cores (2 x cores) rather than to the clients; check --pgbouncer samples the pools while it happens"},
		Verification: model.NotRunBecause("counted in PgBouncer's log, which does not say what the server connections ran; check --pgbouncer --twin, while it happens, samples the pools and replays the sampled statements through a pool of the proposed size"),
		Docs:         docsPath(PoolSaturationID)}}
}
