// Package watch is pgmedic's flight recorder: one connection per server,
// a tick of the sampler every interval and a reading of
// pg_stat_statements every minute (never reset), written to a bounded
// ring on disk. Triggers judge each tick; an incident's window, before
// and after, becomes a bundle that check --from turns into a report. It
// reconnects with back-off, stops cleanly when its context ends, and
// measures what it costs.
package watch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Target is one server to watch.
type Target struct {
	Name      string            `yaml:"name"`
	DSN       string            `yaml:"dsn"`
	PgBouncer string            `yaml:"pgbouncer"`
	Labels    map[string]string `yaml:"labels"`
	// ServerCores is the server's CPU count (0: this machine's for a
	// local server, else a guess of 4, said as such).
	ServerCores int `yaml:"server_cores"`
}

// Config is how watch runs; zero values take the defaults.
type Config struct {
	// Dir holds the ring (ring/) and the bundles (incidents/).
	Dir              string
	Interval         time.Duration // a tick: 1s
	StatementsEvery  time.Duration // a pg_stat_statements reading: 1m
	Keep             time.Duration // the ring's span: 2h
	MaxBytes         int64         // the ring's size: 256 MB
	Before, After    time.Duration // an incident's window: 2m before, 1m after
	MaxIncident      time.Duration // a bundle is written at most this long after an incident opened: 30m
	MaxBundles       int           // bundles kept: 200
	StatementTimeout time.Duration // each of watch's queries: 2s
	// Duration stops watch after it (0: until its context ends).
	Duration time.Duration
	// FailFast returns the first connection's error instead of retrying
	// (a single target: a wrong DSN is said at once).
	FailFast bool
	Version  string
	Log      func(format string, args ...any)
	// Thresholds adjusts the triggers (nil: Defaults).
	Thresholds func(*Thresholds)
	// Opened is called when an incident opens, Bundled with each bundle
	// written (check --from turns it into a report there).
	Opened  func(t Target, inc *Incident)
	Bundled func(t Target, dir string, inc *Incident)
	Metrics *Metrics
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Interval, time.Second)
	set(&c.StatementsEvery, time.Minute)
	set(&c.Keep, 2*time.Hour)
	set(&c.Before, 2*time.Minute)
	set(&c.After, time.Minute)
	set(&c.MaxIncident, 30*time.Minute)
	set(&c.StatementTimeout, 2*time.Second)
	if c.MaxBytes <= 0 {
		c.MaxBytes = 256 << 20
	}
	if c.MaxBundles <= 0 {
		c.MaxBundles = 200
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// watcher is one target's recorder.
type watcher struct {
	own     ownCounter
	t       Target
	cfg     Config
	ring    *Ring
	det     *Detector
	inc     *Incidents
	sess    *envelope.Session
	target  model.Target // the server, as last connected to
	bouncer *envelope.Bouncer
	server  Server
	// pg_stat_statements: where it is, and the last reading by key.
	pgss     string
	pgssNote string
	hasJIT   bool
	last     map[stmtKey]Statement
	texts    map[int64]string
	lastRead time.Time
	// cpu reads a backend's CPU time for a server on this machine (nil
	// for a remote one); lastCPU keeps the last readings.
	cpu     func(pid int) (float64, bool)
	lastCPU map[int]float64
	stats   Stats
}

// Stats is what a watcher did and what it cost.
type Stats struct {
	Started    time.Time
	Ticks      int64
	Incidents  int64
	Reconnects int64
	// QueryMS is the time watch's queries took on the server's side of
	// the connection (round trips included).
	QueryMS float64
	// Ring skips: lines of the ring that did not read back.
	RingSkipped int
}

// Watch records one target until ctx ends (or cfg.Duration passes),
// writing the bundle of an incident still open before it returns.
func Watch(ctx context.Context, t Target, cfg Config) (Stats, error) {
	cfg.defaults()
	w := &watcher{t: t, cfg: cfg, ring: &Ring{Dir: filepath.Join(cfg.Dir, "ring"), Keep: cfg.Keep, MaxBytes: cfg.MaxBytes},
		inc: &Incidents{Before: cfg.Before, After: cfg.After, MaxLength: cfg.MaxIncident}, texts: map[int64]string{}}
	w.stats.Started = time.Now()
	defer w.ring.Close()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	if err := w.connect(ctx); err != nil {
		if cfg.FailFast || ctx.Err() != nil {
			return w.stats, err
		}
		cfg.Log("%s: %v; retrying", t.Name, err)
		if err := w.reconnect(ctx, time.Now(), err.Error()); err != nil {
			return w.stats, nil // stopped while waiting
		}
	}
	defer w.close()
	next, interval := time.Now(), cfg.Interval
	failures := 0
	for {
		select {
		case <-ctx.Done():
			w.stop()
			return w.stats, nil
		case <-time.After(time.Until(next)):
		}
		at := time.Now()
		err := w.tick(ctx, at)
		// A server slow to answer is sampled less often, as check's
		// sampler does: a tick that took half its interval doubles it.
		interval = collect.Pace(cfg.Interval, interval, time.Since(at))
		next = at.Add(interval)
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			w.stop()
			return w.stats, nil
		}
		// One failed tick (a statement timeout on a saturated server) is
		// a tick lost, not the recording: it is said once, and only a
		// run of them is taken for a connection gone bad.
		if failures++; !w.lost(err) && failures < 5 {
			if failures == 1 {
				cfg.Log("%s: a tick failed (%s); going on", t.Name, envelope.Message(err))
			}
			continue
		}
		failures = 0
		cfg.Log("%s: connection lost (%v); reconnecting", t.Name, err)
		if err := w.reconnect(ctx, at, envelope.Message(err)); err != nil {
			w.stop()
			return w.stats, nil
		}
		next = time.Now()
	}
}

var errNotConnected = errors.New("not connected")

// lost says an error means the connection is gone (a restart, a
// failover, a network cut) rather than one query failing.
func (w *watcher) lost(err error) bool {
	return w.sess == nil || w.sess.Conn.IsClosed() || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "conn closed")
}

// connect opens the target's one connection (and its PgBouncer console)
// and writes the start record.
func (w *watcher) connect(ctx context.Context) error {
	sess, err := envelope.Connect(ctx, w.t.DSN, envelope.Options{StatementTimeout: w.cfg.StatementTimeout})
	if err != nil {
		return err
	}
	w.own.sessions.Add(1)
	w.sess, w.target = sess, sess.Target
	if w.t.PgBouncer != "" && w.bouncer == nil {
		b, err := envelope.ConnectBouncer(ctx, w.t.PgBouncer, envelope.Options{})
		if err != nil {
			w.cfg.Log("%s: PgBouncer console: %v (pools are not sampled)", w.t.Name, err)
		} else {
			w.bouncer = b
		}
	}
	cores, guessed := w.t.ServerCores, false
	if cores <= 0 {
		cores, guessed = localCores(sess.Target.Host)
	}
	if _, remote := localCores(sess.Target.Host); !remote {
		// The backends' processes are on this machine: their CPU time
		// says whether a working session gets a core.
		w.cpu, w.lastCPU = profile.ProcCPU, map[int]float64{}
	}
	w.server = Server{Version: sess.Target.ServerVersion, VersionNum: sess.Target.ServerVersionNum, Database: sess.Target.Database, Cores: cores, CoresGuessed: guessed}
	if w.det == nil {
		th := Defaults(cores)
		if w.cfg.Thresholds != nil {
			w.cfg.Thresholds(&th)
		}
		w.det = &Detector{T: th}
	}
	w.findPgss(ctx)
	if w.pgssNote != "" {
		w.cfg.Log("%s: %s", w.t.Name, w.pgssNote)
	}
	w.cfg.Metrics.connected(w.t.Name, true)
	return w.ring.Append(Record{Kind: "start", At: time.Now(), Server: &w.server, Note: w.pgssNote})
}

// reconnect waits with back-off (1 s doubling to 30 s, with jitter, so a
// fleet does not reconnect to a restarted server all at once) until the
// target answers again, and records the gap.
func (w *watcher) reconnect(ctx context.Context, since time.Time, why string) error {
	w.close()
	w.cfg.Metrics.connected(w.t.Name, false)
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait/4)+1))):
		}
		if err := w.connect(ctx); err == nil {
			w.stats.Reconnects++
			w.cfg.Metrics.add(w.t.Name, "reconnects", 1)
			w.last = nil // counters may have been reset by a restart
			return w.ring.Append(Record{Kind: "gap", At: since, Until: time.Now(), Note: why})
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (w *watcher) close() {
	if w.sess != nil {
		w.sess.Close()
		w.sess = nil
	}
}

// stop writes the bundle of an incident still open, with a context of its
// own: the one watch ran under has ended.
func (w *watcher) stop() {
	if inc := w.inc.Stop(time.Now()); inc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w.bundle(ctx, inc)
	}
	if w.bouncer != nil {
		w.bouncer.Close()
	}
}

// tick samples once, writes the record, judges it, and opens or closes
// incidents.
func (w *watcher) tick(ctx context.Context, at time.Time) error {
	if w.sess == nil {
		return errNotConnected
	}
	q := w.own.counted(w.sess.Conn)
	smp, hidden, err := collect.SampleOnce(ctx, q, w.server.VersionNum, at, w.server.Database, w.cpu, w.lastCPU)
	if err != nil {
		return err
	}
	dbs, err := databaseCounters(ctx, q, w.server.VersionNum)
	if err != nil {
		return err
	}
	for i := range smp.Backends {
		// An idle session's text is its last statement, long finished:
		// no rule reads it, and on a server with hundreds of idle
		// connections it would be most of the ring.
		if smp.Backends[i].State == "idle" {
			smp.Backends[i].Query = ""
		}
	}
	rec := Record{Kind: "tick", At: at.UTC(), Sample: &smp, Databases: dbs, Hidden: hidden, Own: w.own.work()}
	if w.bouncer != nil {
		if ps, err := collect.ShowPools(ctx, w.bouncer.Conn, at); err == nil {
			rec.Pools = &ps
		}
	}
	rec.TickMS = model.Round(float64(time.Since(at).Microseconds())/1000, 3)
	w.stats.QueryMS += rec.TickMS
	w.stats.Ticks++
	if err := w.ring.Append(rec); err != nil {
		return err
	}
	fired := w.det.Tick(rec)
	if at.Sub(w.lastRead) >= w.cfg.StatementsEvery {
		stmts, err := w.readStatements(ctx, at)
		if err != nil {
			return err
		}
		fired = append(fired, w.det.Statements(at, stmts)...)
	}
	w.cfg.Metrics.tick(w.t.Name, rec, fired, w.stats, w.server.Cores)
	opened, done := w.inc.Observe(at, fired)
	if opened != nil {
		w.cfg.Log("%s: incident opened: %s", w.t.Name, describe(opened.Triggers))
		if w.cfg.Opened != nil {
			w.cfg.Opened(w.t, opened)
		}
	}
	if done != nil {
		w.bundle(ctx, done)
	}
	return nil
}

func describe(fs []Firing) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.Kind+": "+f.Detail)
	}
	return strings.Join(parts, "; ")
}

// localCores is this machine's CPU count for a server on it, else a guess
// of 4 (said as such in every bundle).
func localCores(host string) (int, bool) {
	if strings.HasPrefix(host, "/") || host == "localhost" || host == "127.0.0.1" || host == "::1" {
		return runtime.NumCPU(), false
	}
	return 4, true
}

// databaseCounters reads pg_stat_database's counters of every database;
// beyond 64 databases they are summed under "*" (a tick stays small).
func databaseCounters(ctx context.Context, q envelope.Conn, versionNum int) (map[string]model.DatabaseDelta, error) {
	sessions := "sessions, sessions_abandoned, sessions_fatal, sessions_killed"
	if !pgversion.Of(versionNum).SessionStats {
		sessions = "0::bigint, 0::bigint, 0::bigint, 0::bigint"
	}
	rows, err := q.Query(ctx, envelope.Tag+`SELECT datname, `+sessions+`, xact_commit, xact_rollback, deadlocks, temp_files, conflicts
		FROM pg_stat_database WHERE datname IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]model.DatabaseDelta{}
	for rows.Next() {
		var name string
		var d model.DatabaseDelta
		if err := rows.Scan(&name, &d.Sessions, &d.SessionsAbandoned, &d.SessionsFatal, &d.SessionsKilled, &d.Commits, &d.Rollbacks, &d.Deadlocks, &d.TempFiles, &d.Conflicts); err != nil {
			return nil, err
		}
		out[name] = d
	}
	if len(out) > 64 {
		var sum model.DatabaseDelta
		for _, d := range out {
			sum = addDelta(sum, d, 1)
		}
		out = map[string]model.DatabaseDelta{"*": sum}
	}
	return out, rows.Err()
}

// addDelta is a + sign*b, counter by counter.
func addDelta(a, b model.DatabaseDelta, sign int64) model.DatabaseDelta {
	return model.DatabaseDelta{Sessions: a.Sessions + sign*b.Sessions, SessionsAbandoned: a.SessionsAbandoned + sign*b.SessionsAbandoned,
		SessionsFatal: a.SessionsFatal + sign*b.SessionsFatal, SessionsKilled: a.SessionsKilled + sign*b.SessionsKilled,
		Commits: a.Commits + sign*b.Commits, Rollbacks: a.Rollbacks + sign*b.Rollbacks, Deadlocks: a.Deadlocks + sign*b.Deadlocks,
		TempFiles: a.TempFiles + sign*b.TempFiles, Conflicts: a.Conflicts + sign*b.Conflicts}
}

type stmtKey struct {
	db      string
	userid  uint32
	queryid int64
}

// findPgss looks for pg_stat_statements in the connected database: watch
// reads every database's statements through it.
func (w *watcher) findPgss(ctx context.Context) {
	w.pgss, w.pgssNote = "", ""
	var schema string
	err := w.own.counted(w.sess.Conn).QueryRow(ctx, envelope.Tag+`SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_stat_statements'`).Scan(&schema)
	if err != nil {
		w.pgssNote = fmt.Sprintf("pg_stat_statements is not installed in database %s: statements are not recorded (CREATE EXTENSION pg_stat_statements there)", w.server.Database)
		return
	}
	w.pgss = sqlparse.QuoteIdent(schema)
	var jit bool
	w.own.counted(w.sess.Conn).QueryRow(ctx, envelope.Tag+`SELECT count(*) > 0 FROM pg_attribute WHERE attrelid = format('%I.pg_stat_statements', $1::text)::regclass AND attname = 'jit_functions'`, schema).Scan(&jit)
	w.hasJIT = jit
}

// readStatements reads pg_stat_statements (without texts: a text is read
// once, when its statement is first seen), writes what moved since the
// last reading, and returns it.
func (w *watcher) readStatements(ctx context.Context, at time.Time) ([]Statement, error) {
	since := w.lastRead
	w.lastRead = at
	if w.pgss == "" {
		return nil, nil
	}
	jit := "0::bigint, 0::float8, 0::bigint, 0::float8, 0::bigint, 0::float8, 0::bigint, 0::float8"
	if w.hasJIT {
		jit = "jit_functions, jit_generation_time, jit_inlining_count, jit_inlining_time, jit_optimization_count, jit_optimization_time, jit_emission_count, jit_emission_time"
	}
	rows, err := w.sess.Conn.Query(ctx, envelope.Tag+`SELECT d.datname, s.userid, coalesce(s.queryid, 0), s.calls, s.total_exec_time, s.total_plan_time,
		s.rows, s.shared_blks_hit, s.shared_blks_read, s.wal_fpi, s.temp_blks_written, s.stddev_exec_time, s.mean_exec_time, `+jit+`
		FROM `+w.pgss+`.pg_stat_statements(false) s JOIN pg_database d ON d.oid = s.dbid`)
	if err != nil {
		if w.lost(err) {
			return nil, err
		}
		w.pgssNote = "pg_stat_statements could not be read: " + envelope.Message(err)
		w.pgss = ""
		return nil, nil
	}
	now := map[stmtKey]Statement{}
	for rows.Next() {
		var st Statement
		var calls, nrows, hit, read, fpi, temp, sd, mean float64
		var jf, ic, oc, ec float64
		if err := rows.Scan(&st.Database, &st.UserID, &st.QueryID, &calls, &st.TotalExecMS, &st.TotalPlanMS, &nrows, &hit, &read, &fpi, &temp, &sd, &mean,
			&jf, &st.JIT.GenerationMS, &ic, &st.JIT.InliningMS, &oc, &st.JIT.OptimizationMS, &ec, &st.JIT.EmissionMS); err != nil {
			rows.Close()
			return nil, err
		}
		st.Calls, st.Rows, st.SharedBlksHit, st.SharedBlksRead, st.WALFPI = int64(calls), int64(nrows), int64(hit), int64(read), int64(fpi)
		st.JIT.Functions, st.JIT.InliningCount, st.JIT.OptimizationCount, st.JIT.EmissionCount = int64(jf), int64(ic), int64(oc), int64(ec)
		st.JIT.Available = w.hasJIT
		st.TempBlksWritten, st.GenericPlans, st.CustomPlans = int64(temp), -1, -1
		st.SumSqMS = calls * (sd*sd + mean*mean)
		k := stmtKey{st.Database, st.UserID, st.QueryID}
		if prev, ok := now[k]; ok { // top-level and nested entries of one statement
			st = sumStatements(prev, st, 1)
		}
		now[k] = st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var moved []Statement
	first := w.last == nil
	for k, st := range now {
		prev, seen := w.last[k]
		d := st
		if seen && st.Calls >= prev.Calls {
			d = sumStatements(st, prev, -1)
		}
		if first || d.Calls <= 0 {
			continue
		}
		moved = append(moved, d)
	}
	w.last = now
	if err := w.fillTexts(ctx, moved); err != nil {
		return nil, err
	}
	kept := moved[:0]
	for _, st := range moved {
		if st.Query = w.texts[st.QueryID]; !envelope.Own(st.Query) {
			kept = append(kept, st)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].TotalExecMS > kept[j].TotalExecMS })
	rec := Record{Kind: "statements", At: at.UTC(), Since: since.UTC(), Statements: kept}
	return kept, w.ring.Append(rec)
}

// fillTexts reads the texts of statements not seen before.
func (w *watcher) fillTexts(ctx context.Context, stmts []Statement) error {
	var ids []int64
	for _, st := range stmts {
		if _, ok := w.texts[st.QueryID]; !ok {
			ids = append(ids, st.QueryID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := w.sess.Conn.Query(ctx, envelope.Tag+`SELECT DISTINCT ON (queryid) queryid, query FROM `+w.pgss+`.pg_stat_statements(true) WHERE queryid = ANY($1)`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			return err
		}
		w.texts[id] = text
	}
	if len(w.texts) > 20000 {
		w.texts = map[int64]string{} // pg_stat_statements evicted many: read them again
	}
	return rows.Err()
}

// sumStatements is a + sign*b, counter by counter.
func sumStatements(a, b Statement, sign float64) Statement {
	s := int64(sign)
	a.Calls += s * b.Calls
	a.TotalExecMS += sign * b.TotalExecMS
	a.TotalPlanMS += sign * b.TotalPlanMS
	a.Rows += s * b.Rows
	a.SharedBlksHit += s * b.SharedBlksHit
	a.SharedBlksRead += s * b.SharedBlksRead
	a.WALFPI += s * b.WALFPI
	a.TempBlksWritten += s * b.TempBlksWritten
	a.SumSqMS += sign * b.SumSqMS
	a.JIT.Functions += s * b.JIT.Functions
	a.JIT.GenerationMS += sign * b.JIT.GenerationMS
	a.JIT.InliningCount += s * b.JIT.InliningCount
	a.JIT.InliningMS += sign * b.JIT.InliningMS
	a.JIT.OptimizationCount += s * b.JIT.OptimizationCount
	a.JIT.OptimizationMS += sign * b.JIT.OptimizationMS
	a.JIT.EmissionCount += s * b.JIT.EmissionCount
	a.JIT.EmissionMS += sign * b.JIT.EmissionMS
	return a
}

// CPUSeconds is the CPU time this process has used, user and system.
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
