package watch

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Trigger kinds: what opens an incident. Each is a row of Triggers.
const (
	LockQueue   = "lock-queue"
	Saturation  = "working-sessions"
	PoolWaits   = "pool-waits"
	ClientStall = "client-stall"
	ErrorBurst  = "error-burst"
	ConnBurst   = "connection-burst"
	Slowdown    = "statement-slowdown"
)

// Trigger is one row of the triggers table: its id, what it means (the
// help and /metrics say it), whether it reads the sampled sessions (an
// incident's rules judge the stretch in which those fired), and, for a
// trigger judged on one tick's sessions, the function that judges it.
type Trigger struct {
	ID       string
	Says     string
	Sessions bool
	// tick says why the trigger fires at this tick ("" when it does not);
	// nil for the triggers judged from counters (bursts) or readings of
	// pg_stat_statements (slowdowns).
	tick func(d *Detector, v *tickView) string
}

// Triggers is every trigger, in the order /metrics lists them: the one
// table a trigger is added to (its row, its function, its test).
var Triggers = []Trigger{
	{LockQueue, "sessions queued on a lock; names the head, the blocker that waits for nothing", true, lockQueue},
	{Saturation, "more sessions working (on CPU or I/O) than the server has cores", true, saturation},
	{ClientStall, "a transaction left idle by its client", true, clientStall},
	{PoolWaits, "PgBouncer clients waiting for a server connection", true, poolWaits},
	{ErrorBurst, "rollbacks, failed and killed sessions and deadlocks at a multiple of their usual rate", false, nil},
	{ConnBurst, "new connections at a multiple of their usual rate", false, nil},
	{Slowdown, "a statement's p95 estimate jumped to a multiple of its usual", false, nil},
}

// TriggerIDs are the triggers' ids, in the table's order.
func TriggerIDs() []string {
	ids := make([]string, len(Triggers))
	for i, t := range Triggers {
		ids[i] = t.ID
	}
	return ids
}

// sessionTrigger says whether a kind is judged from the sampled sessions.
func sessionTrigger(kind string) bool {
	for _, t := range Triggers {
		if t.ID == kind {
			return t.Sessions
		}
	}
	return false
}

// Firing is one trigger that fired at a tick, with what it saw.
type Firing struct {
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
}

// Thresholds set when each trigger fires; Defaults are what watch uses.
type Thresholds struct {
	// LockWaiters sessions waiting for a lock in LockTicks ticks running.
	LockWaiters, LockTicks int
	// More working sessions than Cores in SaturationTicks ticks running.
	Cores, SaturationTicks int
	// A pool with clients waiting at least PoolWaitMS, in PoolTicks ticks
	// running.
	PoolWaitMS float64
	PoolTicks  int
	// A transaction idle for at least IdleMS seen in StallTicks of the
	// last StallWindow ticks.
	IdleMS                  float64
	StallTicks, StallWindow int
	// Over BurstWindow, at least BurstErrors errors (BurstConnections new
	// connections) and BurstFactor times the rate of the BurstHistory
	// before it.
	BurstWindow, BurstHistory     time.Duration
	BurstErrors, BurstConnections int64
	BurstFactor                   float64
	// A statement with at least SlowCalls calls in a reading whose p95
	// estimate is SlowFactor times its usual and SlowMinMS above it.
	SlowCalls             int64
	SlowFactor, SlowMinMS float64
}

// Defaults are watch's thresholds for a server of cores cores.
func Defaults(cores int) Thresholds {
	return Thresholds{LockWaiters: 2, LockTicks: 2, Cores: cores, SaturationTicks: 3,
		PoolWaitMS: 500, PoolTicks: 2, IdleMS: 1000, StallTicks: 3, StallWindow: 10,
		BurstWindow: 10 * time.Second, BurstHistory: 5 * time.Minute, BurstErrors: 10, BurstConnections: 20, BurstFactor: 5,
		SlowCalls: 20, SlowFactor: 4, SlowMinMS: 100}
}

// Detector judges each tick against the thresholds. It keeps only what
// the triggers need of the recent past (counts of ticks in a row, the
// counters of the last minutes), so it is a pure function of the ticks it
// is given, in order: tests feed it ticks with their own times.
type Detector struct {
	T Thresholds

	lockRun, satRun, poolRun int
	stalls                   []bool
	counters                 []counterAt
	usual                    map[string]float64 // a statement's usual p95 estimate, by key
	seenReadings             map[string]int
}

type counterAt struct {
	at time.Time
	// errors and new are the counters less watch's own work, never
	// going down; raw are the server's, which a restart or a reset sends
	// back.
	errors, new       int64
	rawErrors, rawNew int64
	hasSessions       bool
}

// tickView is what one tick's sessions and pools show, read once for
// every trigger that judges a tick.
type tickView struct {
	rec                       Record
	backends                  []model.Backend
	waiters, working, stalled int
	heads                     map[int]int
	longestIdle               model.Backend
	poolWaiting               string
}

// Tick judges one tick; it returns the triggers that fire.
func (d *Detector) Tick(rec Record) []Firing {
	v := d.view(rec)
	var out []Firing
	for _, t := range Triggers {
		if t.tick == nil {
			continue
		}
		if detail := t.tick(d, v); detail != "" {
			out = append(out, Firing{Kind: t.ID, At: rec.At, Detail: detail})
		}
	}
	return append(out, d.bursts(rec)...)
}

// view reads a tick once for the triggers.
func (d *Detector) view(rec Record) *tickView {
	v := &tickView{rec: rec, heads: map[int]int{}}
	if rec.Sample != nil {
		v.backends = rec.Sample.Backends
	}
	for _, b := range v.backends {
		if b.WaitType == "Lock" && !b.BlockedByPgmedic {
			v.waiters++
			for _, p := range b.BlockedBy {
				v.heads[p]++
			}
		}
		if b.State == "active" && isWorking(b) {
			v.working++
		}
		if strings.HasPrefix(b.State, "idle in transaction") && b.StateMS >= d.T.IdleMS {
			v.stalled++
			if b.StateMS > v.longestIdle.StateMS {
				v.longestIdle = b
			}
		}
	}
	if rec.Pools != nil {
		for _, p := range rec.Pools.Pools {
			if p.ClWaiting > 0 && p.MaxWaitMS >= d.T.PoolWaitMS {
				v.poolWaiting = fmt.Sprintf("%d clients of pool %s/%s waiting, the longest %s", p.ClWaiting, p.Database, p.User, printable.MS(p.MaxWaitMS))
				break
			}
		}
	}
	return v
}

// The triggers' details show sampled statements normalised: they go to
// watch's log, to /metrics' consumers and into the bundle's report, read
// by people the data is not for (the ring keeps the text as sampled).

// lockQueue: LockWaiters sessions waiting for a lock, LockTicks ticks
// running.
func lockQueue(d *Detector, v *tickView) string {
	d.lockRun = run(d.lockRun, v.waiters >= d.T.LockWaiters)
	if d.lockRun < d.T.LockTicks {
		return ""
	}
	return fmt.Sprintf("%d sessions waiting for a lock%s", v.waiters, headText(v.heads, v.backends))
}

// saturation: more working sessions than cores, SaturationTicks ticks
// running.
func saturation(d *Detector, v *tickView) string {
	d.satRun = run(d.satRun, d.T.Cores > 0 && v.working > d.T.Cores)
	if d.satRun < d.T.SaturationTicks {
		return ""
	}
	return fmt.Sprintf("%d sessions working on %d cores", v.working, d.T.Cores)
}

// clientStall: a transaction idle IdleMS in StallTicks of the last
// StallWindow ticks.
func clientStall(d *Detector, v *tickView) string {
	d.stalls = append(d.stalls, v.stalled > 0)
	if len(d.stalls) > d.T.StallWindow {
		d.stalls = d.stalls[len(d.stalls)-d.T.StallWindow:]
	}
	n := count(d.stalls)
	if v.stalled == 0 || n < d.T.StallTicks {
		return ""
	}
	return fmt.Sprintf("a transaction idle %s in its client (pid %d, %s); %d of the last %d ticks",
		printable.MS(v.longestIdle.StateMS), v.longestIdle.PID, printable.Clip(sqlparse.Normalised(v.longestIdle.Query), 60), n, len(d.stalls))
}

// poolWaits: a pool's clients waiting PoolWaitMS, PoolTicks ticks running.
func poolWaits(d *Detector, v *tickView) string {
	d.poolRun = run(d.poolRun, v.poolWaiting != "")
	if d.poolRun < d.T.PoolTicks {
		return ""
	}
	return v.poolWaiting
}

// isWorking says a session is doing work on the server: on CPU, or reading
// and writing, or on a lightweight lock; not waiting for a lock, its
// client or a timer.
func isWorking(b model.Backend) bool {
	switch b.WaitType {
	case "", "IO", "LWLock", "BufferPin":
		return true
	}
	return false
}

func run(n int, holds bool) int {
	if holds {
		return n + 1
	}
	return 0
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// headText names the head of the queue: of the sessions others wait for,
// the one that is not itself waiting for a lock (pg_blocking_pids also
// names the waiters ahead in the queue), with the most behind it.
func headText(heads map[int]int, backends []model.Backend) string {
	byPID := map[int]model.Backend{}
	for _, b := range backends {
		byPID[b.PID] = b
	}
	best, n := 0, 0
	for pid, c := range heads {
		b, known := byPID[pid]
		if known && b.WaitType == "Lock" {
			continue
		}
		if c > n || (c == n && pid < best) {
			best, n = pid, c
		}
	}
	if n == 0 {
		return ""
	}
	if b, ok := byPID[best]; ok {
		return fmt.Sprintf(", %d behind pid %d (%s: %s)", n, best, b.State, printable.Clip(sqlparse.Normalised(b.Query), 60))
	}
	return fmt.Sprintf(", %d behind pid %d", n, best)
}

// bursts compares the last BurstWindow's errors and new connections with
// the rate of the BurstHistory before it. Without session counters
// (PostgreSQL 13) no connection burst is judged.
func (d *Detector) bursts(rec Record) []Firing {
	if rec.Databases == nil {
		return nil
	}
	var c counterAt
	c.at = rec.At
	for _, db := range rec.Databases {
		c.rawErrors += db.Rollbacks + db.SessionsFatal + db.SessionsKilled + db.Deadlocks
		c.rawNew += db.Sessions
		c.hasSessions = c.hasSessions || db.Sessions > 0
	}
	if n := len(d.counters); n > 0 && (c.rawErrors < d.counters[n-1].rawErrors || c.rawNew < d.counters[n-1].rawNew) {
		// The counters went back: the server restarted or its statistics
		// were reset. The history before is of another count.
		d.counters = d.counters[:0]
	}
	// Watch's own rollbacks and sessions are taken off. The server
	// reports a backend's counters up to 10 s after the fact, so watch
	// may count its work before the server does: the counters less it
	// are held where they were until the server's catch up, rather than
	// going back (which would read as a reset).
	c.errors, c.new = c.rawErrors, c.rawNew
	if rec.Own != nil {
		c.errors, c.new = c.rawErrors-rec.Own.Rollbacks, c.rawNew-rec.Own.Sessions
	}
	if n := len(d.counters); n > 0 {
		c.errors, c.new = max(c.errors, d.counters[n-1].errors), max(c.new, d.counters[n-1].new)
	}
	d.counters = append(d.counters, c)
	// Keep the history and one window.
	for len(d.counters) > 2 && d.counters[1].at.Before(rec.At.Add(-d.T.BurstHistory-d.T.BurstWindow)) {
		d.counters = d.counters[1:]
	}
	var start, end *counterAt // the window's start, the history's start
	end = &d.counters[0]
	for i := len(d.counters) - 1; i >= 0; i-- {
		if !d.counters[i].at.After(rec.At.Add(-d.T.BurstWindow)) {
			start = &d.counters[i]
			break
		}
	}
	if start == nil || start == end || start.at.Sub(end.at) < d.T.BurstWindow {
		return nil // not enough history for a rate to compare with
	}
	var out []Firing
	window := rec.At.Sub(start.at).Seconds()
	history := start.at.Sub(end.at).Seconds()
	judge := func(kind string, now, before, min int64, what string) {
		// A counter that went backwards was reset: no burst from it.
		if now < 0 || before < 0 || now < min {
			return
		}
		rate := float64(now) / window
		usual := float64(before) / history
		if rate >= d.T.BurstFactor*math.Max(usual, 0.1) {
			out = append(out, Firing{Kind: kind, At: rec.At, Detail: fmt.Sprintf("%d %s in %.0f s (%.1f/s; usually %.2f/s)", now, what, window, rate, usual)})
		}
	}
	judge(ErrorBurst, c.errors-start.errors, start.errors-end.errors, d.T.BurstErrors, "rollbacks, failed or killed sessions and deadlocks")
	if c.hasSessions {
		judge(ConnBurst, c.new-start.new, start.new-end.new, d.T.BurstConnections, "new connections")
	}
	return out
}

// Statements judges a reading of pg_stat_statements: a statement whose
// p95 estimate (mean + 1.645 standard deviations over the reading's
// calls) is SlowFactor times its usual one and SlowMinMS above it, after
// at least three readings of it. pg_stat_statements keeps no percentiles;
// the estimate assumes a bell-shaped spread and says so.
func (d *Detector) Statements(at time.Time, stmts []Statement) []Firing {
	if d.usual == nil {
		d.usual, d.seenReadings = map[string]float64{}, map[string]int{}
	}
	var out []Firing
	sort.SliceStable(stmts, func(i, j int) bool { return stmts[i].TotalExecMS > stmts[j].TotalExecMS })
	for _, st := range stmts {
		if st.Calls < d.T.SlowCalls {
			continue
		}
		k := fmt.Sprintf("%s/%d/%d", st.Database, st.UserID, st.QueryID)
		p95 := P95(st)
		usual, n := d.usual[k], d.seenReadings[k]
		if n >= 3 && p95 >= d.T.SlowFactor*usual && p95-usual >= d.T.SlowMinMS && len(out) < 3 {
			out = append(out, Firing{Kind: Slowdown, At: at, Detail: fmt.Sprintf("p95 estimate %s, usually %s (%d calls): %s",
				printable.MS(p95), printable.MS(usual), st.Calls, printable.Clip(st.Query, 60))})
			continue // a jump does not become the usual at once
		}
		if n == 0 {
			d.usual[k] = p95
		} else {
			d.usual[k] = 0.7*usual + 0.3*p95
		}
		d.seenReadings[k] = n + 1
	}
	return out
}

// P95 estimates a statement's 95th percentile over a reading from its
// mean and the spread of its calls.
func P95(st Statement) float64 {
	if st.Calls == 0 {
		return 0
	}
	n := float64(st.Calls)
	mean := st.TotalExecMS / n
	variance := math.Max(0, st.SumSqMS/n-mean*mean)
	return mean + 1.645*math.Sqrt(variance)
}
