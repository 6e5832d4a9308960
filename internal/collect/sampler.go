package collect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// sampleSQL reads every client backend in one statement: its state and
// wait, how long its transaction, its state and its last statement took,
// who blocks it, the lock it waits for (relation and mode) and the
// autovacuum worker among its blockers (with its VACUUM's phase), and for
// a session idle in a transaction or blocking another the relations it
// holds locks on. It runs outside any transaction and takes no lock.
//
// It must stay cheap when the server is busiest, which is when it is
// needed: reading pg_stat_activity copies the backends' status without a
// lock, but pg_blocking_pids() and pg_locks take every partition of the
// shared lock table, and under a burst of sessions fighting for that very
// table (LWLock:LockManager) one call per backend per tick is what slowed
// the sampler from 100 ms to seconds a tick. So blockers are asked only
// for sessions that wait for a lock, and pg_locks is read once, and only
// when a session waits for a lock or sits idle in a transaction (a
// pseudo-constant condition: the planner puts it above the scan, which
// then does not run at all); the autovacuum workers likewise, once, and
// only when a session waits for a lock.
//
// Sessions of other roles, for a role without pg_read_all_stats, show
// every column NULL but their pid, database and role (backend_type too),
// and the query as "<insufficient privilege>": they are kept, and counted
// as hidden. A background process (an autovacuum worker) shows no role
// either, and is left out: it is no client's session.
func sampleSQL(h pgversion.Has) string {
	queryID := "coalesce(a.query_id, 0)"
	if !h.QueryIDInActivity {
		queryID = "0::bigint" // statements are told apart by their text
	}
	// From 16 a backend says whether its subtransactions overflowed its
	// cache: read once a tick for every backend, kept for the overflowed.
	overflowedCTE, overflowed := "", "false"
	if h.BackendSubxact {
		overflowedCTE = `,
	x AS MATERIALIZED (SELECT pg_stat_get_backend_pid(b.id) AS pid FROM pg_stat_get_backend_idset() AS b(id),
	LATERAL pg_stat_get_backend_subxact(b.id) AS s WHERE s.subxact_overflowed)`
		overflowed = "a.pid IN (SELECT pid FROM x)"
	}
	return strings.NewReplacer("$query_id", queryID, "$overflowed_cte", overflowedCTE, "$overflowed", overflowed).Replace(sampleColumns)
}

const sampleColumns = `WITH a AS MATERIALIZED (SELECT a.pid, coalesce(a.datname, '') AS datname, coalesce(a.usename, '') AS usename,
	coalesce(a.application_name, '') AS app, coalesce(host(a.client_addr), '') AS client, coalesce(a.state, '') AS state,
	coalesce(a.wait_event_type, '') AS wait_type, coalesce(a.wait_event, '') AS wait,
	$query_id AS query_id, left(coalesce(a.query, ''), 2000) AS query,
	coalesce(extract(epoch FROM now() - a.xact_start) * 1000, 0)::float8 AS xact_ms,
	coalesce(extract(epoch FROM now() - a.state_change) * 1000, 0)::float8 AS state_ms,
	CASE WHEN a.state <> 'active' THEN coalesce(extract(epoch FROM a.state_change - a.query_start) * 1000, 0) ELSE 0 END::float8 AS last_ms,
	CASE WHEN a.wait_event_type = 'Lock' THEN pg_blocking_pids(a.pid) ELSE '{}'::int[] END AS blocked_by,
	a.xact_start IS NOT NULL AS in_xact
	FROM pg_stat_activity a
	WHERE (a.backend_type = 'client backend' OR (a.backend_type IS NULL AND a.usesysid IS NOT NULL)) AND a.pid <> pg_backend_pid()),
	l AS MATERIALIZED (SELECT l.pid, l.relation, l.locktype, l.mode, l.granted, l.classid, l.objid, l.database FROM pg_locks l
	WHERE EXISTS (SELECT FROM a WHERE a.wait_type = 'Lock' OR a.state LIKE 'idle in transaction%') AND l.pid IS NOT NULL
	AND (NOT l.granted OR (l.locktype = 'relation' AND l.relation >= 16384))),
	w AS MATERIALIZED (SELECT w.pid, w.pid || ' ' || w.query || coalesce(' [' || p.phase || ']', '') AS what
	FROM pg_stat_activity w LEFT JOIN pg_stat_progress_vacuum p ON p.pid = w.pid
	WHERE w.backend_type = 'autovacuum worker' AND EXISTS (SELECT FROM a WHERE a.wait_type = 'Lock'))$overflowed_cte
	SELECT a.pid, a.datname, a.usename, a.app, a.client, a.state, a.wait_type, a.wait, a.query_id, a.query,
	a.xact_ms, a.state_ms, a.last_ms, a.blocked_by, $overflowed,
	CASE WHEN a.in_xact AND (a.state LIKE 'idle in transaction%' OR a.pid IN (SELECT unnest(b.blocked_by) FROM a b)) THEN ARRAY(
		SELECT DISTINCT l.relation::regclass::text || ' (' || l.mode || ')' FROM l
		WHERE l.pid = a.pid AND l.granted AND l.locktype = 'relation' ORDER BY 1) ELSE '{}'::text[] END,
	CASE WHEN a.wait_type = 'Lock' THEN coalesce((SELECT CASE WHEN l.locktype = 'object' THEN 'object ' || l.classid || '/' || l.objid || ' of database ' || l.database
		ELSE coalesce(l.relation::regclass::text, l.locktype) END || ' (' || l.mode || ')'
		FROM l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1), '') ELSE '' END,
	CASE WHEN a.wait_type = 'Lock' THEN coalesce((SELECT w.what FROM w WHERE w.pid = ANY (a.blocked_by) LIMIT 1), '') ELSE '' END
	FROM a`

// deltaSQL reads the counters whose change over the window the rules
// judge; a server without session counters reads them as 0.
func deltaSQL(h pgversion.Has) string {
	sessions := "sessions, sessions_abandoned, sessions_fatal, sessions_killed"
	if !h.SessionStats {
		sessions = "0::bigint, 0::bigint, 0::bigint, 0::bigint"
	}
	// The WAL position is the server's (a standby replays, it writes
	// none): its change over the window is the write rate now, which a
	// burst of writes makes far higher than the average since a reset.
	return `SELECT ` + sessions + `, xact_commit, xact_rollback,
	deadlocks, temp_files, conflicts,
	CASE WHEN pg_is_in_recovery() THEN 0 ELSE (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8 END
	FROM pg_stat_database WHERE datname = current_database()`
}

// Clock is the time the sampler reads and waits on: the wall clock, or a
// test's own.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// maxInterval is the slowest the sampler ticks.
const maxInterval = 2 * time.Second

// slowTick is how long a tick may take before the sampler slows down.
const slowTick = 500 * time.Millisecond

// pace is the interval after a tick that took took, when the interval
// was interval and base is the one asked for. Ticks never overlap: one
// that takes longer than the interval already delays the next, so a
// server answering slowly is sampled as often as it answers, with a query
// that stays cheap under load (see sampleSQL); slowing down further would
// miss most of a burst (a sampler at one tick in 2 s saw 7 of its 55
// ticks in a 9 s burst of 150 sessions). Only a tick slower than slowTick
// (a server barely answering) doubles the interval, up to maxInterval;
// one that takes less than an eighth of it halves it again (down to
// base), so one slow moment does not slow the rest of the window.
func pace(base, interval, took time.Duration) time.Duration {
	switch {
	case took > slowTick && interval < maxInterval:
		return min(2*interval, maxInterval)
	case took < interval/8 && interval > base:
		return max(interval/2, base)
	}
	return interval
}

// Pace is pace for a sampler of its own (watch): the next interval after a
// tick that took took.
func Pace(base, interval, took time.Duration) time.Duration { return pace(base, interval, took) }

// schedule calls tick every interval from the clock's now until duration
// has passed, pacing the interval by how long each tick took (pace). It
// stops early when tick fails or ctx ends, and says whether it slowed
// down at any point.
func schedule(ctx context.Context, clk Clock, duration, interval time.Duration, tick func(at time.Time) error) (backedOff bool, err error) {
	base := interval
	deadline := clk.Now().Add(duration)
	for {
		start := clk.Now()
		if err := tick(start); err != nil {
			return backedOff, err
		}
		interval = pace(base, interval, clk.Now().Sub(start))
		backedOff = backedOff || interval > base
		next := start.Add(interval)
		if !next.Before(deadline) || !clk.Now().Before(deadline) {
			return backedOff, nil
		}
		if ctx.Err() != nil {
			return backedOff, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return backedOff, ctx.Err()
		case <-clk.After(max(next.Sub(clk.Now()), 0)):
		}
	}
}

// sample watches the server's sessions for a window: one query per tick,
// every interval, for duration, paced by how long the server takes to
// answer (pace); every query runs under the session's statement_timeout
// and a deadline past the window, so the sampler stops on time even when
// the server does not answer. Lock waits, the literals of running
// statements and the whole sampling go into the snapshot.
func sample(ctx context.Context, q envelope.Conn, s *model.Snapshot, opts Options) {
	duration, interval := opts.SampleFor, opts.SampleEvery
	s.Literals = map[int64]string{}
	if duration <= 0 {
		return
	}
	h := pgversion.Of(s.Server.VersionNum)
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	clk := opts.Clock
	if clk == nil {
		clk = wallClock{}
	}
	sm := &model.Sampling{Start: clk.Now(), IntervalMS: float64(interval.Milliseconds()), PgBouncer: opts.BouncerVersion, BouncerError: opts.BouncerError}
	bouncer := opts.Bouncer
	// A real deadline past the window, whatever the clock says.
	wctx, cancel := context.WithTimeout(ctx, duration+2*time.Second)
	defer cancel()
	before, beforeErr := databaseDelta(wctx, q, h)
	var statsBefore map[string]model.BouncerStat
	if bouncer != nil {
		var err error
		if statsBefore, err = showStats(wctx, bouncer); err != nil {
			sm.BouncerError, bouncer = err.Error(), nil
		}
	}
	hidden := 0
	waits := map[model.LockWait]int{}
	lastCPU := map[int]float64{}
	tick := func(at time.Time) error {
		smp, hid, err := sampleOnce(wctx, q, h, at, s.Database)
		readCPU(smp.Backends, opts.CPU, lastCPU)
		sm.OverheadMS += float64(clk.Now().Sub(at).Microseconds()) / 1000
		if err != nil {
			s.Missing[model.SrcLocks] = skipFor(s, "cannot sample pg_stat_activity", err)
			return err
		}
		hidden = max(hidden, hid)
		sm.Samples = append(sm.Samples, smp)
		if bouncer != nil {
			// A PgBouncer that stops answering costs its pools, not the
			// check: the error is kept and the sessions go on.
			ps, err := showPools(wctx, bouncer, at)
			if err != nil {
				sm.BouncerError, bouncer = err.Error(), nil
			} else {
				sm.Pools = append(sm.Pools, ps)
			}
		}
		noteBackends(s, smp, waits)
		return nil
	}
	sm.BackedOff, _ = schedule(wctx, clk, duration, interval, tick)
	sm.Seconds = clk.Now().Sub(sm.Start).Seconds()
	if bouncer != nil {
		finishBouncer(context.WithoutCancel(ctx), bouncer, sm, statsBefore)
	}
	if after, err := databaseDelta(context.WithoutCancel(ctx), q, h); err == nil && beforeErr == nil {
		sm.Delta = deltaOf(before, after)
	}
	if !h.SessionStats {
		sm.NoSessionCounts = h.Lacks("pg_stat_database.sessions", 14) + ": new connections were not counted"
	}
	if hidden > 0 {
		sm.HiddenSessions = hidden
		sm.Hidden = fmt.Sprintf("%d sessions of other roles showed no state, wait or statement: GRANT pg_read_all_stats TO %s; shows them", hidden, quoteRole(s.User))
	}
	for w, n := range waits {
		w.Samples = n
		s.LockWaits = append(s.LockWaits, w)
	}
	sort.Slice(s.LockWaits, func(i, j int) bool { return s.LockWaits[i].Samples > s.LockWaits[j].Samples })
	s.Sampling = sm
}

// Sampled gives a snapshot sessions sampled elsewhere (a watch incident's
// window): the sampling itself, and what check's own sampler notes of each
// tick (the literals of running statements, the database's lock waits).
func Sampled(s *model.Snapshot, sm *model.Sampling) {
	s.Literals = map[int64]string{}
	waits := map[model.LockWait]int{}
	for _, smp := range sm.Samples {
		noteBackends(s, smp, waits)
	}
	s.LockWaits = nil
	for w, n := range waits {
		w.Samples = n
		s.LockWaits = append(s.LockWaits, w)
	}
	sort.Slice(s.LockWaits, func(i, j int) bool { return s.LockWaits[i].Samples > s.LockWaits[j].Samples })
	s.Sampling = sm
}

// SampleOnce is one tick of the sampler: every client backend but
// pgmedic's, with its state, wait, blockers and locks, and how many of the
// database's sessions the role could not see. For a server on this
// machine, cpu reads each backend's CPU time (last keeps the readings
// between ticks); nil for a remote one.
func SampleOnce(ctx context.Context, q envelope.Conn, versionNum int, at time.Time, db string, cpu func(pid int) (float64, bool), last map[int]float64) (model.ActivitySample, int, error) {
	smp, hidden, err := sampleOnce(ctx, q, pgversion.Of(versionNum), at, db)
	readCPU(smp.Backends, cpu, last)
	return smp, hidden, err
}

// finishBouncer reads PgBouncer's clients and its counters' change over
// the window, once the sessions are sampled.
func finishBouncer(ctx context.Context, bouncer envelope.Conn, sm *model.Sampling, statsBefore map[string]model.BouncerStat) {
	if cl, err := showClients(ctx, bouncer); err == nil {
		sm.BouncerClients = cl
	}
	if after, err := showStats(ctx, bouncer); err == nil {
		sm.BouncerStats = statsDelta(statsBefore, after)
	} else {
		sm.BouncerError = err.Error()
	}
}

// readCPU fills each backend's CPU time so far, when the server runs on
// this machine (cpu is nil otherwise). A backend idle for longer than the
// sampler's slowest interval has used no CPU since the last tick: its last
// reading stands, so a server with a thousand idle connections costs no
// thousand file reads a tick.
func readCPU(backends []model.Backend, cpu func(pid int) (float64, bool), last map[int]float64) {
	if cpu == nil {
		return
	}
	for i := range backends {
		b := &backends[i]
		if ms, seen := last[b.PID]; seen && b.State == "idle" && b.StateMS > float64(maxInterval.Milliseconds()) {
			b.CPUMS = ms
			continue
		}
		if ms, ok := cpu(b.PID); ok {
			b.CPUMS = ms
			last[b.PID] = ms
		}
	}
}

// noteBackends keeps what one tick says beyond the sample itself: the
// first text of each running statement (the literals a simple-protocol
// client sent) and the lock waits of the database, by statement.
func noteBackends(s *model.Snapshot, smp model.ActivitySample, waits map[model.LockWait]int) {
	for _, b := range smp.Backends {
		if b.QueryID != 0 && b.State == "active" {
			if _, seen := s.Literals[b.QueryID]; !seen {
				s.Literals[b.QueryID] = b.Query
			}
		}
		if b.WaitType == "Lock" && b.Database == s.Database && !b.BlockedByPgmedic {
			waits[model.LockWait{QueryID: b.QueryID, Query: b.Query, WaitEvent: "Lock/" + b.Wait}]++
		}
	}
}

// deltaOf is pg_stat_database's change from before to after.
func deltaOf(before, after model.DatabaseDelta) model.DatabaseDelta {
	return model.DatabaseDelta{Sessions: after.Sessions - before.Sessions, SessionsAbandoned: after.SessionsAbandoned - before.SessionsAbandoned,
		SessionsFatal: after.SessionsFatal - before.SessionsFatal, SessionsKilled: after.SessionsKilled - before.SessionsKilled,
		Commits: after.Commits - before.Commits, Rollbacks: after.Rollbacks - before.Rollbacks, Deadlocks: after.Deadlocks - before.Deadlocks,
		TempFiles: after.TempFiles - before.TempFiles, Conflicts: after.Conflicts - before.Conflicts, WALBytes: after.WALBytes - before.WALBytes}
}

// sampleOnce is one tick; it also counts the sessions of database db whose
// details the role may not see (background processes, which belong to no
// database, are hidden from it too but hold nothing of the application's).
func sampleOnce(ctx context.Context, q envelope.Conn, h pgversion.Has, at time.Time, db string) (model.ActivitySample, int, error) {
	smp := model.ActivitySample{At: at.UTC()}
	rows, err := q.Query(ctx, envelope.Tag+sampleSQL(h))
	if err != nil {
		return smp, 0, err
	}
	defer rows.Close()
	hidden := 0
	for rows.Next() {
		var b model.Backend
		var blocked []int32
		if err := rows.Scan(&b.PID, &b.Database, &b.User, &b.App, &b.Client, &b.State, &b.WaitType, &b.Wait, &b.QueryID, &b.Query,
			&b.XactMS, &b.StateMS, &b.LastMS, &blocked, &b.Overflowed, &b.Locks, &b.WaitsFor, &b.Autovacuum); err != nil {
			return smp, 0, err
		}
		for _, p := range blocked {
			b.BlockedBy = append(b.BlockedBy, int(p))
		}
		if b.Query == "<insufficient privilege>" {
			if b.Database == db {
				hidden++
			}
			b.Query = ""
		}
		smp.Backends = append(smp.Backends, b)
	}
	smp.Backends = dropOwn(smp.Backends)
	return smp, hidden, rows.Err()
}

// dropOwn leaves pgmedic's other sessions (a verify connection, a second
// check) out of a tick, and takes them off the blocker lists of the
// others: a session that waits only for pgmedic is marked, so no rule
// counts a wait pgmedic caused as the application's.
func dropOwn(backends []model.Backend) []model.Backend {
	own := map[int]bool{}
	for _, b := range backends {
		if envelope.OwnSession(b.App, b.Query) {
			own[b.PID] = true
		}
	}
	if len(own) == 0 {
		return backends
	}
	out := backends[:0]
	for _, b := range backends {
		if own[b.PID] {
			continue
		}
		if len(b.BlockedBy) > 0 {
			kept := b.BlockedBy[:0]
			for _, p := range b.BlockedBy {
				if !own[p] {
					kept = append(kept, p)
				}
			}
			if len(kept) == 0 {
				b.BlockedByPgmedic = true
				kept = nil
			}
			b.BlockedBy = kept
		}
		out = append(out, b)
	}
	return out
}

func databaseDelta(ctx context.Context, q envelope.Conn, h pgversion.Has) (model.DatabaseDelta, error) {
	var d model.DatabaseDelta
	err := q.QueryRow(ctx, envelope.Tag+deltaSQL(h)).Scan(&d.Sessions, &d.SessionsAbandoned, &d.SessionsFatal, &d.SessionsKilled,
		&d.Commits, &d.Rollbacks, &d.Deadlocks, &d.TempFiles, &d.Conflicts, &d.WALBytes)
	return d, err
}

func quoteRole(r string) string {
	if r == "" {
		return "your_role"
	}
	return sqlparse.QuoteIdent(r)
}
