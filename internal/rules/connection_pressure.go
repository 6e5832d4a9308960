package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
)

// ConnectionPressureID is the stable id of the rule.
const ConnectionPressureID = "connection-pressure"

// Thresholds of connection-pressure (see docs/rules/connection-pressure.md).
const (
	churnPerSecond = 10.0 // new sessions per second
	activePerCore  = 2.0  // active sessions per core
)

// runQueue is what the samples say about the sessions that wanted a core.
// A session counts only when it is active with no wait event: waiting
// for a lock, for its client, for I/O or WAL, or idle in a transaction,
// it does not compete for a core (and the first two have rules of their
// own).
//
// The figures are weighted by time, not counted by sample: each sample
// stands for the time until the next one. A sampler that had to wait for
// a saturated server took fewer samples inside a burst than outside it,
// and a count of samples would judge the burst by the quiet around it.
type runQueue struct {
	onCPU     float64 // sessions on CPU, mean over the window's time
	peak      int
	ticksOver int     // samples with more sessions on CPU than cores
	overShare float64 // share of the window's time with more sessions on CPU than cores
	waiting   float64 // active sessions that waited (lock, I/O, LWLock, client), mean over the time
	// coresGot is how many cores the sampled backends got over the window,
	// from their processes' CPU time (a server on pgmedic's machine); 0
	// when not measured.
	coresGot float64
}

// sampleWeights is how long each sample stands for: the time until the
// next one; the last stands for the interval asked for (or the mean of
// the others). Samples whose clock does not move (a test's) weigh alike.
func sampleWeights(sm *model.Sampling) []float64 {
	n := len(sm.Samples)
	w := make([]float64, n)
	total := 0.0
	for i := 0; i+1 < n; i++ {
		w[i] = max(sm.Samples[i+1].At.Sub(sm.Samples[i].At).Seconds(), 0)
		total += w[i]
	}
	switch {
	case n == 1 || total == 0:
		for i := range w {
			w[i] = 1
		}
	case sm.IntervalMS > 0:
		w[n-1] = min(sm.IntervalMS/1000, total/float64(n-1))
	default:
		w[n-1] = total / float64(n-1)
	}
	return w
}

// readRunQueue folds the samples of every database: the cores are shared.
func readRunQueue(s *model.Snapshot, cores int) runQueue {
	var q runQueue
	weights := sampleWeights(s.Sampling)
	type span struct {
		first, last float64
		seen        int
	}
	cpu := map[int]*span{}
	var on, waiting, over, total float64
	for i, smp := range s.Sampling.Samples {
		n, waits := 0, 0
		for _, b := range smp.Backends {
			if b.State == "active" {
				if b.WaitType == "" {
					n++
				} else {
					waits++
				}
			}
			if b.CPUMS > 0 {
				sp := cpu[b.PID]
				if sp == nil {
					sp = &span{first: b.CPUMS}
					cpu[b.PID] = sp
				}
				sp.last, sp.seen = b.CPUMS, sp.seen+1
			}
		}
		w := weights[i]
		on += w * float64(n)
		waiting += w * float64(waits)
		total += w
		q.peak = max(q.peak, n)
		if n > cores {
			q.ticksOver++
			over += w
		}
	}
	q.onCPU, q.waiting, q.overShare = on/total, waiting/total, over/total
	ticks := len(s.Sampling.Samples)
	window := s.Sampling.Samples[ticks-1].At.Sub(s.Sampling.Samples[0].At).Seconds()
	if window > 0 && len(cpu) > 0 {
		used := 0.0
		for _, sp := range cpu {
			if sp.seen >= 2 && sp.last >= sp.first {
				used += sp.last - sp.first
			}
		}
		q.coresGot = used / 1000 / window
	}
	return q
}

// Thresholds of the run queue: more sessions on CPU than cores in at
// least half the samples, and statements stretched to at least twice
// their CPU time (as long in the queue as at work; 4 times: critical).
const (
	stretchWarn     = 2.0
	stretchCritical = 4.0
)

// poolBasis says where a proposed pool size comes from.
func poolBasis(pool, cores int) string {
	if pool == cores {
		return fmt.Sprintf("one per core: no more than 2 x %d clients ran and they still queued for the cores, so the statements are CPU-bound", cores)
	}
	return fmt.Sprintf("2 x %d cores", cores)
}

// connectionPressure finds a real run queue (more sessions on CPU than
// the server has cores, and each getting measurably less than a core),
// connections near max_connections, and connection churn.
func connectionPressure(s *model.Snapshot) (found []model.Finding, skipped []model.Skip) {
	if ok, skip := sampled(s, ConnectionPressureID); !ok {
		return nil, skip
	}
	if why := s.Sampling.NoSessionCounts; why != "" {
		// The rest of the rule holds; only the churn is not judged.
		defer func() {
			skipped = append(skipped, model.Skip{Rule: ConnectionPressureID, Reason: why})
		}()
	}
	ticks := len(s.Sampling.Samples)
	avgTotal, churn := openAndChurn(s)
	cores := s.ServerCores
	if cores <= 0 {
		cores = 4
	}
	q := readRunQueue(s, cores)
	maxConn := s.Activity.MaxConnections
	j := judgeRunQueue(s, q, cores)
	why, sev := j.why, j.severity
	// Connections refused are seen only in the server's log; connections
	// held idle near the limit are why they are refused.
	h := heldConnections(s)
	refused := loggedRefusals(s)
	heldWhy, heldSev := h.why(maxConn, avgTotal, refused)
	why, sev = append(why, heldWhy...), max(sev, heldSev)
	if churn >= churnPerSecond {
		why = append(why, fmt.Sprintf("%.0f new sessions per second", churn))
		sev = max(sev, model.Warning)
	}
	if len(why) == 0 {
		return nil, nil
	}
	// Two server connections per core keep the cores busy while some
	// sessions wait on I/O. When no more clients than that ran and they
	// still queued for CPU, the sessions are CPU-bound: one per core.
	clients := max(workingSessions(q), int(math.Round(avgTotal)))
	pool := 2 * cores
	if clients <= pool && clients > cores && q.coresGot > 0 {
		pool = cores
	}
	f := model.Finding{
		Rule: ConnectionPressureID, Severity: sev,
		Title:  "connection pressure: " + strings.Join(why, "; "),
		Object: model.Object{Kind: "server", Name: s.Database, Database: s.Database},
		Evidence: []model.Evidence{
			ev("sessions on CPU (active, no wait event), average over the sampled time", q.onCPU, ""),
			ev("sessions on CPU at the peak", float64(q.peak), ""),
			ev("samples with more sessions on CPU than cores", float64(q.ticksOver), ""),
			ev("share of the sampled time with more sessions on CPU than cores", 100*q.overShare, "%"),
			ev("active sessions waiting (lock, I/O, LWLock, client), average: not counted", q.waiting, ""),
			ev("server cores", float64(cores), ""),
			ev("open connections, average", avgTotal, ""),
			ev("max_connections", float64(maxConn), ""),
			ev("new sessions per second", churn, ""),
		},
		Impact:       model.Impact{Summary: fmt.Sprintf("past about %d working sessions a %d-core server only queues them: each statement takes longer, clients time out and retry, and the retries add load (the cascade the UK dashboard went through)", pool, cores)},
		Fix:          model.Fix{Summary: fmt.Sprintf("put a pool in front (PgBouncer in transaction mode, or the application's pool) sized to about %d server connections (%s) with clients queueing in the pool; reuse connections instead of opening one per request; make the statements cheaper (see the other findings) before adding servers", pool, poolBasis(pool, cores))},
		Verification: j.verification,
		Docs:         docsPath(ConnectionPressureID),
	}
	if h.isHeld(maxConn) || refused > 0 {
		pool = h.shape(&f, s, refused, pool, cores, ticks)
	}
	// The replay on a twin: the clients as they ran, directly (or a new
	// session per request when they churned), against the same clients
	// through a pool of the proposed size (held sessions have their own,
	// above).
	if !h.isHeld(maxConn) && clients > pool {
		if f.Experiment = concurrencyExperiment(s, s.Database, clients, 0, pool, cores, churn >= churnPerSecond); f.Experiment == nil && f.Verification.Status == model.NotRun {
			f.Verification.Reason += "; none of the sampled statements can be replayed on a twin"
		}
	}
	if q.coresGot > 0 {
		f.Evidence = append(f.Evidence, ev("cores the sessions got (CPU time of their processes)", q.coresGot, ""),
			ev("wall time per unit of CPU time of the sessions on CPU", j.stretch, "x"))
	}
	behindPool(s, &f, q, pool, cores)
	return []model.Finding{f}, nil
}

// behindPool makes a connection-pressure finding pool-saturation's when
// the clients already go through PgBouncer and queue in its pool: the
// sessions the server runs are the pool's server connections, and what to
// change is the pool (its size, the statements that hold it). One
// problem, pool-saturation's, which measures the pool itself. When more
// sessions worked than the pool holds server connections, others connect
// directly (or through another pool) and the run queue is the server's
// own problem, so the finding stands.
func behindPool(s *model.Snapshot, f *model.Finding, q runQueue, pool, cores int) {
	k, a := saturatedPool(s)
	if a == nil {
		return
	}
	size := a.pool.SvActive + a.pool.SvUsed + a.pool.SvIdle
	if q.onCPU > float64(size)+0.5 {
		return
	}
	f.Severity = model.Info
	f.Title += fmt.Sprintf(" (the clients queue in PgBouncer's pool %s: see pool-saturation)", k)
	f.Fix = model.Fix{Summary: fmt.Sprintf("the clients already go through PgBouncer: its pool (%d server connections) is what the server runs; size it to about %d (%s) and make the statements that hold it cheaper (pool-saturation)", size, pool, poolBasis(pool, cores))}
	f.Experiment = nil
	f.Verification = model.NotRunBecause("the server's sessions are PgBouncer's server connections, whose queue pool-saturation's finding measures")
}

// saturatedPool is a PgBouncer pool of the checked database whose clients
// waited while every server connection was busy, as pool-saturation
// judges it; nil when none was sampled.
func saturatedPool(s *model.Snapshot) (string, *poolWindow) {
	if s.Sampling == nil || s.Sampling.PgBouncer == "" {
		return "", nil
	}
	pools, order := poolsOverWindow(s.Sampling.Pools)
	for _, k := range order {
		if a := pools[k]; a.full >= stallMinSamples && a.pool.Database == s.Database {
			return k, a
		}
	}
	return "", nil
}

// openAndChurn are the connections open on average over the samples and
// the new sessions per second over the window (0 without session
// counters).
func openAndChurn(s *model.Snapshot) (avgTotal, churn float64) {
	total := 0
	for _, smp := range s.Sampling.Samples {
		total += len(smp.Backends)
	}
	if s.Sampling.Seconds > 0 {
		churn = float64(s.Sampling.Delta.Sessions) / s.Sampling.Seconds
	}
	return float64(total) / float64(len(s.Sampling.Samples)), churn
}

// queueVerdict is what the run queue says: why it is a finding (nothing
// when it is not), how severe, how it was measured, and the stretch.
type queueVerdict struct {
	why          []string
	severity     model.Severity
	verification model.Verification
	stretch      float64
}

// judgeRunQueue decides whether the sessions on CPU form a real queue
// that slows each statement: measured from their processes' CPU time, or
// bounded by the known cores; with guessed cores it only informs.
func judgeRunQueue(s *model.Snapshot, q runQueue, cores int) queueVerdict {
	v := queueVerdict{verification: model.NotRunBecause("observed while sampling; a lab scenario measures goodput at both client counts")}
	if q.onCPU <= float64(cores) || q.overShare < 0.5 {
		return v
	}
	queue := fmt.Sprintf("%.1f sessions were on CPU on average (%d at the peak) on %d cores", q.onCPU, q.peak, cores)
	var why, how string
	switch {
	case q.coresGot > 0:
		v.stretch = q.onCPU / q.coresGot
		why = fmt.Sprintf("%s and got %.1f cores between them: each statement took %.1fx its CPU time", queue, q.coresGot, v.stretch)
		how = fmt.Sprintf("measured while sampling: %.1f sessions wanted a core and their processes got %.1f cores (CPU time in /proc)", q.onCPU, q.coresGot)
	case !s.CoresGuessed:
		// The backends' CPU time could not be read (a server in a
		// container, on another host), but the cores are known: N
		// sessions runnable on C cores get at most C/N of a core each.
		v.stretch = q.onCPU / float64(cores)
		why = fmt.Sprintf("%s: each got at most %.2f of a core, so each statement took at least %.1fx its CPU time (the backends' CPU time was not readable from here)", queue, 1/v.stretch, v.stretch)
		how = fmt.Sprintf("counted while sampling: %.1f sessions on CPU on %d cores", q.onCPU, cores)
	case q.onCPU > activePerCore*float64(cores):
		// A remote server whose cores are a guess: the queue is counted,
		// the slowdown is not known, so it is not a warning.
		v.why = []string{queue + "; the server's cores are a guess (pass --server-cores) and how much each session got was not measured"}
		return v
	default:
		return v
	}
	if v.stretch < stretchWarn {
		return v
	}
	v.why, v.severity = []string{why}, model.Warning
	if v.stretch >= stretchCritical {
		v.severity = model.Critical
	}
	v.verification = model.NotRunBecause(how + "; a lab scenario measures goodput at both client counts")
	return v
}

// connectionPressureLog: connection storms and "too many clients".
func connectionPressureLog(in LogInput) []model.Finding {
	le := in.Events
	if le.TooManyClients == 0 && float64(le.PeakPerMinute)/60 < churnPerSecond {
		return nil
	}
	sev := model.Warning
	title := fmt.Sprintf("connection storm: %d connections in the busiest minute (%.0f per second)", le.PeakPerMinute, float64(le.PeakPerMinute)/60)
	if le.TooManyClients > 0 {
		sev = model.Critical
		title = fmt.Sprintf("the server refused %d connections (too many clients already); %d in the busiest minute", le.TooManyClients, le.PeakPerMinute)
	}
	return []model.Finding{{Rule: ConnectionPressureID, Severity: sev, Title: title, Object: logObject(in),
		Evidence:     []model.Evidence{ev2("connections", le.Connections), ev2("connections in the busiest minute", le.PeakPerMinute), ev2("refused: too many clients", le.TooManyClients)},
		Impact:       model.Impact{Summary: "each new connection costs the server a process; a storm of them queues work and exhausts max_connections"},
		Fix:          model.Fix{Summary: "put a pool in front (PgBouncer in transaction mode, or the application's pool) and reuse connections; find what opens them (a retry loop, an autoscaler)"},
		Verification: model.NotRunBecause("counted in the server log; a log that also holds the sessions' statements (log_min_duration_statement = 0, log_connections) measures the pool: pgmedic replay LOG --dsn DSN --pool N replays them on a copy as they connected and through a pool of N"),
		Docs:         docsPath(ConnectionPressureID)}}
}
