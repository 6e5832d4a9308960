// Package rehearse runs a migration on a copy of the database while the
// captured workload replays at its captured pace, and measures what each
// statement did to the application: how long it ran and waited for its
// lock, the lock it held and for how long, whether it rewrote its table,
// the sessions that queued behind it, and the application's latency
// during it against before it.
//
// A schema change hurts in two ways that a migration linter cannot tell
// apart from a harmless one without traffic: it holds a strong lock for
// as long as it rewrites or scans a table, or it waits for a lock behind
// a long transaction, and every later statement on the table queues
// behind the waiting change (PostgreSQL grants locks in order). Both show
// as sessions in pg_locks whose blocking pids name the migration.
package rehearse

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// Plan is one way of running the migration: as written, or its safe
// form with the lock_timeout and retries chosen for it.
type Plan struct {
	Name  string           `json:"name"`
	Steps []migration.Step `json:"steps"`
	// LockTimeout bounds each attempt of a step marked Retry; Pause is
	// the first pause between attempts (doubled each time, up to 2 s),
	// Budget how long a step keeps trying before it gives up.
	LockTimeout time.Duration `json:"-"`
	Pause       time.Duration `json:"-"`
	Budget      time.Duration `json:"-"`
	// Why says how those were chosen.
	Why string `json:"why,omitempty"`
}

// Options are a rehearsal's.
type Options struct {
	// Workload is the captured traffic (nil: the migration runs alone,
	// and only its own duration, locks and rewrites are measured).
	Workload *capture.Workload
	// Side gives each run a fresh copy of the twin's database.
	Side replay.Side
	// MaxWait: a session of the application that waited behind a
	// statement longer than this was queued by it.
	MaxWait time.Duration
	// Before is the traffic replayed before the first statement, After
	// the traffic kept after the last.
	Before, After time.Duration
	// StepTimeout bounds each statement (statement_timeout).
	StepTimeout time.Duration
	Log         func(string, ...any)
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// Window is the application's statements over a span of the run, their
// latency counted from when each was due on the capture's schedule
// (replay.Call.Seen).
type Window struct {
	Calls  int `json:"calls"`
	Errors int `json:"errors"`
	// States counts the errors by SQLSTATE.
	States map[string]int `json:"states,omitempty"`
	P50    float64        `json:"p50_ms"`
	P99    float64        `json:"p99_ms"`
	Max    float64        `json:"max_ms"`
}

// StepResult is one statement of a plan, run.
type StepResult struct {
	migration.Step
	// StartMS and EndMS are on the run's clock (the replay's start).
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
	MS      float64 `json:"ms"`
	// Attempts counts tries under lock_timeout; Rows the rows a batched
	// step changed over Rounds batches.
	Attempts int   `json:"attempts,omitempty"`
	Rounds   int   `json:"rounds,omitempty"`
	Rows     int64 `json:"rows,omitempty"`
	// WaitedMS is how long it waited for its own lock.
	WaitedMS float64 `json:"waited_ms"`
	// Lock is the strongest lock it was granted on its table and HeldMS
	// how long that lock was held (to its transaction's end).
	Lock   string  `json:"lock,omitempty"`
	HeldMS float64 `json:"held_ms"`
	// AlsoHeld are the locks it held on other tables that stop the
	// application's reads or writes (a foreign key locks the table it
	// references as the one it alters): "ShareRowExclusiveLock on
	// customers for 480 ms".
	AlsoHeld []string `json:"also_held,omitempty"`
	// Rewrote says its table got a new relfilenode: every row written
	// again.
	Rewrote bool `json:"rewrote"`
	// table is the step's table, quoted ("" for none), read once from its
	// statement with lock, the lock its kind takes ("" when it is no
	// schema change).
	table, lock string
	// Queued counts the application's sessions that waited behind it,
	// QueuedMaxMS the longest such wait.
	Queued      int     `json:"queued"`
	QueuedMaxMS float64 `json:"queued_max_ms"`
	// Met is the lock a session of the application held on the table
	// when the statement started, if one did: the moment a deploy meets
	// a long reader.
	Met   string `json:"met,omitempty"`
	Error string `json:"error,omitempty"`
	// Broke says the application's statements began to fail after it
	// that did not before (a prepared statement whose result type the
	// change altered: "cached plan must not change result type"): the
	// migration failed the application, whatever the step itself did.
	Broke string `json:"broke,omitempty"`
	// During is the application's statements that ran while it did.
	During Window `json:"during"`
	// Verdict: ok, queued (the application waited behind it past
	// MaxWait), failed.
	Verdict string `json:"verdict"`
}

// Verdicts of a step.
const (
	OK     = "ok"
	Queued = "queued"
	Failed = "failed"
)

// ShapeWindows are one statement shape's latency before and during the
// migration.
type ShapeWindows struct {
	Query  string `json:"query"`
	Before Window `json:"before"`
	During Window `json:"during"`
}

// Run is one plan, rehearsed.
type Run struct {
	Plan  Plan          `json:"plan"`
	Where string        `json:"where"`
	Steps []*StepResult `json:"steps"`
	// Before, During and After are the application's statements before
	// the first step, from its start to the last step's end, and after.
	Before Window         `json:"before"`
	During Window         `json:"during"`
	After  Window         `json:"after"`
	Shapes []ShapeWindows `json:"shapes,omitempty"`
	// MigrationMS is the first step's start to the last one's end.
	MigrationMS float64 `json:"migration_ms"`
	// Calls are the application's statements for the timeline: when each
	// was sent (ms), its latency, whether it failed.
	Calls []replay.Call `json:"-"`
	// TrafficEnded says the captured traffic ran out before the
	// migration ended (the rest ran alone).
	TrafficEnded bool `json:"traffic_ended,omitempty"`
}

// Busiest is the statement shape the application sent most during the
// migration (its readers, most often), with its windows.
func (r *Run) Busiest() ShapeWindows {
	var best ShapeWindows
	for _, s := range r.Shapes {
		if s.During.Calls > best.During.Calls {
			best = s
		}
	}
	return best
}

// QueuedMaxMS is the longest an application session waited behind a
// lock of the run's steps.
func (r *Run) QueuedMaxMS() float64 {
	var m float64
	for _, s := range r.Steps {
		m = max(m, s.QueuedMaxMS)
	}
	return m
}

// Worst is the run's worst step verdict.
func (r *Run) Worst() string {
	worst := OK
	for _, s := range r.Steps {
		if s.Verdict == Failed || (s.Verdict == Queued && worst == OK) {
			worst = s.Verdict
		}
	}
	return worst
}

// Execute rehearses one plan on a fresh copy of the database, with the
// workload replaying around it.
func Execute(ctx context.Context, p Plan, run int, o Options) (*Run, error) {
	open := o.Side.OpenCopy
	if open == nil {
		open = o.Side.Open
	}
	t, err := open(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("readying a copy of the twin's database: %w", err)
	}
	defer t.Close()
	mig, err := t.ConnectAdmin(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to run the migration: %s", envelope.Message(err))
	}
	defer mig.Close(context.Background())
	mon, err := t.ConnectAdmin(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to watch the locks: %s", envelope.Message(err))
	}
	defer mon.Close(context.Background())
	r := &Run{Plan: p, Where: t.Where}
	pid := int(mig.PID())
	if _, err := mig.Exec(ctx, fmt.Sprintf("SET application_name = 'pgmedic rehearse migration'; SET statement_timeout = %d", o.StepTimeout.Milliseconds())).ReadAll(); err != nil {
		return nil, fmt.Errorf("setting up the migration's session: %s", envelope.Message(err))
	}

	// The traffic: the capture repeated so that it outlasts the
	// migration, stopped After the migration's end.
	started := make(chan time.Time, 1)
	replayCtx, stopReplay := context.WithCancel(ctx)
	defer stopReplay()
	var res *replay.Result
	var replayErr error
	var wg sync.WaitGroup
	scheduled := time.Duration(0) // when the traffic's last statement is due
	if o.Workload != nil && len(o.Workload.Sessions) > 0 {
		w := o.Workload.Repeated(repeats(o.Workload))
		_, scheduled, _ = w.StatementSpan()
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, replayErr = replay.Run(replayCtx, w, replay.Options{Speed: 1, Connect: t.Connect, NoPrepare: t.NoPrepare,
				Timeline: true, Started: func(at time.Time) { started <- at }, Timeout: w.Duration + time.Minute})
		}()
	} else {
		started <- time.Now()
	}
	var start time.Time
	select {
	case start = <-started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Before counts from the application's first statement, not from the
	// capture's first line: a log that starts seconds before the
	// application would leave the change no traffic before it.
	if !wait.For(ctx, firstDue(o.Workload)+o.Before) {
		return nil, ctx.Err()
	}
	since := func() float64 { return float64(time.Since(start).Microseconds()) / 1000 }
	m := &monitor{conn: mon, pid: pid, long: longHolders(o.Workload)}
	for _, st := range p.Steps {
		sr := &StepResult{Step: st}
		sr.table, sr.lock = target(st.SQL)
		r.Steps = append(r.Steps, sr)
		table := sr.table
		if o.Workload != nil && table != "" && sr.lock != "" {
			sr.Met = m.meet(ctx, table, sr.lock, meetFor)
		}
		before := m.relfilenode(ctx, table)
		m.begin(ctx, table, sr)
		sr.StartMS = since()
		runStep(ctx, mig, sr, p, o)
		sr.EndMS = since()
		sr.MS = sr.EndMS - sr.StartMS
		m.end(sr, mig.TxStatus() == 'I')
		if after := m.relfilenode(ctx, table); before != "" && after != "" && after != before {
			sr.Rewrote = true
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if mig.TxStatus() != 'I' {
		// A block the migration left open (no COMMIT) holds its locks
		// until the session ends: rolled back here, as a dropped
		// connection would.
		mig.Exec(ctx, "ROLLBACK").ReadAll()
		m.end(nil, true)
	}
	end := since()
	wait.For(ctx, o.After)
	stopReplay()
	wg.Wait()
	if replayErr != nil {
		return nil, fmt.Errorf("replaying the workload: %w", replayErr)
	}
	if len(r.Steps) > 0 {
		r.MigrationMS = end - r.Steps[0].StartMS
	}
	if res != nil {
		r.Calls = res.Timeline
		// Ran out by its schedule: sparse traffic with no call in the
		// last seconds has not ended.
		r.TrafficEnded = float64(scheduled.Microseconds())/1000 < end
		judge(r, o, res, end)
	} else {
		for _, s := range r.Steps {
			s.Verdict = verdictOf(s, o.MaxWait)
		}
	}
	return r, nil
}

// firstDue is when the workload's first statement is due, from the
// replay's start (0 without one).
func firstDue(w *capture.Workload) time.Duration {
	if w == nil {
		return 0
	}
	first := time.Duration(-1)
	for _, s := range w.Sessions {
		if len(s.Statements) > 0 && (first < 0 || s.Statements[0].At < first) {
			first = s.Statements[0].At
		}
	}
	return max(first, 0)
}

// repeats is how many times the capture is played so the traffic
// outlasts any migration worth rehearsing (it is stopped once the
// migration is over): about two minutes, at most a million statements.
func repeats(w *capture.Workload) int {
	n := int(math.Ceil(float64(2*time.Minute) / float64(max(w.Duration, time.Second))))
	if w.Statements > 0 {
		n = min(n, max(1, 1_000_000/w.Statements))
	}
	return max(n, 1)
}

// target is the table a step changes, quoted ("" for none), and the
// lock a schema change of its kind takes ("" when it is none).
func target(sql string) (table, lock string) {
	// A step of several statements (a switch in one transaction) is
	// named by its first, which takes its lock.
	if parts, err := sqlparse.Split(sql); err == nil && len(parts) > 1 {
		sql = parts[0]
	}
	st, err := sqlparse.Parse(sql)
	if err != nil {
		return "", ""
	}
	if d := st.DDL(); d != nil {
		if d.Table.Name == "" {
			return "", migration.Lock(d)
		}
		return sqlparse.QuoteQualified(d.Table.Schema, d.Table.Name), migration.Lock(d)
	}
	if rels := st.Relations(); len(rels) > 0 {
		return sqlparse.QuoteQualified(rels[0].Schema, rels[0].Name), ""
	}
	return "", ""
}

// runStep runs one step: once, under lock_timeout with retries, or in
// batches until it changes no row.
func runStep(ctx context.Context, conn *pgconn.PgConn, sr *StepResult, p Plan, o Options) {
	exec := func(sql string) (int64, error) {
		res, err := conn.Exec(ctx, sql).ReadAll()
		if err != nil {
			return 0, err
		}
		var n int64
		for _, r := range res {
			n += r.CommandTag.RowsAffected()
		}
		return n, nil
	}
	if sr.Retry && p.LockTimeout > 0 {
		exec(fmt.Sprintf("SET lock_timeout = %d", p.LockTimeout.Milliseconds()))
		defer exec("SET lock_timeout = 0")
		pause, deadline := p.Pause, time.Now().Add(p.Budget)
		for {
			sr.Attempts++
			_, err := exec(sr.SQL)
			if err == nil {
				return
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "55P03" || time.Now().Add(pause).After(deadline) {
				sr.Error = envelope.Message(err)
				if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
					sr.Error = fmt.Sprintf("gave up after %d attempts over %s: %s", sr.Attempts, p.Budget, sr.Error)
				}
				return
			}
			if !wait.For(ctx, pause) {
				return
			}
			pause = min(2*pause, 2*time.Second)
		}
	}
	if sr.Batches {
		for sr.Rounds < 100_000 {
			n, err := exec(sr.SQL)
			if err != nil {
				sr.Error = envelope.Message(err)
				return
			}
			sr.Rounds++
			sr.Rows += n
			if n == 0 {
				return
			}
		}
		return
	}
	if _, err := exec(sr.SQL); err != nil {
		sr.Error = envelope.Message(err)
	}
}

// verdictOf judges one step from what was measured.
func verdictOf(s *StepResult, maxWait time.Duration) string {
	switch {
	case s.Error != "", s.Broke != "":
		return Failed
	case s.QueuedMaxMS >= float64(maxWait.Milliseconds()):
		return Queued
	}
	return OK
}

// judge splits the application's calls into before, during and after,
// and gives each step its window and verdict.
func judge(r *Run, o Options, res *replay.Result, end float64) {
	if len(r.Steps) == 0 {
		return
	}
	first := r.Steps[0].StartMS
	var before, during, after []replay.Call
	for _, c := range res.Timeline {
		at, done := c.Due(), c.Due()+c.Seen()
		switch {
		case done < first:
			before = append(before, c)
		case at <= end:
			during = append(during, c)
		default:
			after = append(after, c)
		}
	}
	r.Before, r.During, r.After = window(before), window(during), window(after)
	for _, s := range r.Steps {
		var in []replay.Call
		for _, c := range res.Timeline {
			// A call overlaps the step: sent before it ended, back after
			// it started.
			if c.Due() <= s.EndMS && c.Due()+c.Seen() >= s.StartMS {
				in = append(in, c)
			}
		}
		s.During = window(in)
	}
	broken(r, res, o.Workload)
	for _, s := range r.Steps {
		s.Verdict = verdictOf(s, o.MaxWait)
	}
	byShape := map[int32][2][]replay.Call{}
	for k, cs := range [][]replay.Call{before, during} {
		for _, c := range cs {
			v := byShape[c.Shape]
			v[k] = append(v[k], c)
			byShape[c.Shape] = v
		}
	}
	for shape, v := range byShape {
		if len(v[1]) == 0 {
			continue
		}
		r.Shapes = append(r.Shapes, ShapeWindows{Query: shapeText(o.Workload.Shapes[shape].Query), Before: window(v[0]), During: window(v[1])})
	}
	sort.Slice(r.Shapes, func(i, j int) bool {
		if r.Shapes[i].During.P99 != r.Shapes[j].During.P99 {
			return r.Shapes[i].During.P99 > r.Shapes[j].During.P99
		}
		return r.Shapes[i].Query < r.Shapes[j].Query
	})
}

// broken finds the application's statements that failed after a step
// with an error none of them had before the migration: the first such
// failure names the step that started last before it, which is said to
// have broken them. A rate that rises by a few calls in a hundred, or one
// failure, is not enough: a busy twin times out a statement now and then.
func broken(r *Run, res *replay.Result, w *capture.Workload) {
	if len(r.Steps) == 0 {
		return
	}
	before := map[string]bool{}
	for state := range r.Before.States {
		before[state] = true
	}
	first := r.Steps[0].StartMS
	isNew := func(c replay.Call) bool {
		return c.Failed && !before[c.State] && c.State != "57014" && c.State != "client"
	}
	firstAt := -1.0
	for _, c := range res.Timeline {
		if c.Due()+c.Seen() >= first && isNew(c) && (firstAt < 0 || c.Due() < firstAt) {
			firstAt = c.Due()
		}
	}
	if firstAt < 0 {
		return
	}
	// The rate counts from the first new failure: a long step before
	// the one that broke the statements (a backfill's minutes of calls)
	// would otherwise dilute it below any bar.
	var newFails, calls int
	states := map[string]int{}
	for _, c := range res.Timeline {
		if c.Due() < firstAt {
			continue
		}
		calls++
		if isNew(c) {
			newFails++
			states[c.State]++
		}
	}
	rateBefore := 0.0
	if r.Before.Calls > 0 {
		rateBefore = float64(r.Before.Errors) / float64(r.Before.Calls)
	}
	if newFails < 2 || calls == 0 || float64(newFails)/float64(calls) < rateBefore+0.02 {
		return
	}
	var step *StepResult
	for _, s := range r.Steps {
		if s.StartMS <= firstAt+1 {
			step = s
		}
	}
	if step == nil {
		step = r.Steps[0]
	}
	var parts []string
	for _, state := range slices.Sorted(maps.Keys(states)) {
		part := fmt.Sprintf("%d with SQLSTATE %s", states[state], state)
		if msg := res.ErrorMessages[state]; msg != "" {
			part += " (" + printable.Clip(msg, 100) + ")"
		}
		parts = append(parts, part)
	}
	step.Broke = fmt.Sprintf("%d of the application's %d calls from the first such error on failed with errors none had before the migration: %s", newFails, calls, strings.Join(parts, ", "))
	if states["0A000"] > 0 {
		// A prepared statement's plan keeps the result columns it was
		// prepared with; a change of a column's type, or a column added
		// under SELECT *, fails each later EXECUTE in every session that
		// prepared it, however the change is made.
		step.Broke += "; the sessions' prepared statements return other columns than they were prepared with: whatever form the change takes, the application must prepare them again after it (recycle its pool's connections, or DEALLOCATE ALL in each), and name its columns rather than SELECT *"
	}
}

// window summarises calls.
func window(cs []replay.Call) Window {
	w := Window{Calls: len(cs)}
	var ms []float64
	for _, c := range cs {
		if c.Failed {
			w.Errors++
			if w.States == nil {
				w.States = map[string]int{}
			}
			w.States[c.State]++
		}
		ms = append(ms, c.Seen())
	}
	sort.Float64s(ms)
	w.P50, w.P99, w.Max = model.Percentile(ms, 0.5), model.Percentile(ms, 0.99), model.Percentile(ms, 1)
	return w
}

// monitor watches the migration's session from another: the locks it
// holds or waits for, and the sessions that wait behind it.
type monitor struct {
	conn *pgconn.PgConn
	pid  int
	// long are the lock modes the workload's long statements (50 ms or
	// more at capture) take, by the table's name.
	long map[string][]string
	// One step's watch: a poller goroutine, and what it saw.
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	table   string
	step    *StepResult
	held    map[string]*heldLock // by relation and mode, carried while the block stays open
	waiters map[string][2]time.Time
	waited  time.Duration
}

type heldLock struct {
	step     *StepResult
	relation string
	mode     string
	from     time.Time
	last     time.Time
}

// meetFor bounds the wait for a long conflicting holder to meet (one the
// capture says exists): long enough for an application's periodic long
// statement to come round.
const meetFor = 3 * time.Second

// PollEvery is how often the monitor looks: a wait or a hold shorter
// than it may be missed, a longer one is measured to within it.
const PollEvery = 20 * time.Millisecond

// relfilenode is the table's file: a rewrite gives it a new one.
func (m *monitor) relfilenode(ctx context.Context, table string) string {
	if table == "" {
		return ""
	}
	res, err := m.conn.Exec(ctx, "SELECT relfilenode FROM pg_class WHERE oid = to_regclass("+sqlparse.QuoteLiteral(table)+")").ReadAll()
	if err != nil || len(res) == 0 || len(res[0].Rows) == 0 {
		return ""
	}
	return string(res[0].Rows[0][0])
}

// meet waits, up to limit, for a session of the application to hold a
// lock on the table that the step's lock conflicts with, in a
// transaction open for more than 50 ms: the moment a deploy most often
// meets (a long reader or writer is in pg_locks for most of the time it
// runs; the application's short statements come and go between two
// looks, and a deploy that meets one waits a millisecond). It goes at
// once when such a transaction began less than 300 ms ago (it has most
// of its time ahead of it), else when the limit is reached. It says
// which lock it met, or "" when none showed up.
func (m *monitor) meet(ctx context.Context, table, lock string, limit time.Duration) string {
	if !slices.ContainsFunc(m.long[bareName(table)], func(mode string) bool { return migration.Conflicts(lock, mode) }) {
		// No statement of the capture holds a lock on the table long
		// enough, in a mode this one waits for, to be met.
		return ""
	}
	modes := migration.ConflictsWith(lock)
	var quoted []string
	for _, mode := range modes {
		quoted = append(quoted, sqlparse.QuoteLiteral(mode))
	}
	q := fmt.Sprintf(`SELECT l.mode, round(extract(epoch FROM clock_timestamp() - a.xact_start) * 1000) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.relation = to_regclass(%s) AND l.granted AND a.application_name = %s AND l.mode IN (%s)
		  AND clock_timestamp() - a.xact_start > interval '50 ms' ORDER BY a.xact_start DESC LIMIT 1`,
		sqlparse.QuoteLiteral(table), sqlparse.QuoteLiteral(replay.AppName), strings.Join(quoted, ", "))
	said := func(mode, age string) string {
		return fmt.Sprintf("%s held by a session of the application (its transaction %s ms old)", mode, age)
	}
	deadline := time.Now().Add(limit)
	for {
		res, err := m.conn.Exec(ctx, q).ReadAll()
		if err != nil {
			return ""
		}

		if len(res) > 0 && len(res[0].Rows) > 0 {
			row := res[0].Rows[0]
			if age, _ := strconv.Atoi(string(row[1])); age <= 300 || !time.Now().Before(deadline) {
				return said(string(row[0]), string(row[1]))
			}
		}
		if !time.Now().Before(deadline) || !wait.For(ctx, 10*time.Millisecond) {
			return ""
		}
	}
}

// longHolders are the lock modes the workload holds for 50 ms or more on
// each table (by its bare name): a SELECT's AccessShareLock, a write's
// RowExclusiveLock, held by a statement that long, or by a transaction
// that long (an export that reads, then ships the rows before COMMIT,
// holds its locks idle in its transaction).
func longHolders(w *capture.Workload) map[string][]string {
	out := map[string][]string{}
	if w == nil {
		return out
	}
	const long = 50 * time.Millisecond
	held := map[int32]bool{}
	for _, s := range w.Sessions {
		var began time.Duration
		var inTx []int32
		open := false
		for _, st := range s.Statements {
			switch c := capture.Control(st.SQL); {
			case c == capture.Begins:
				began, inTx, open = st.At, nil, true
				continue
			case open && c == capture.Ends:
				if st.At+st.Took-began >= long {
					for _, sh := range inTx {
						held[sh] = true
					}
				}
				open = false
				continue
			}
			if open {
				inTx = append(inTx, st.Shape)
			}
			if st.Took >= long {
				held[st.Shape] = true
			}
		}
	}
	for shape := range held {
		st, err := sqlparse.Parse(w.Shapes[shape].Query)
		if err != nil {
			continue
		}
		mode := migration.AccessShare
		if k := st.Kind(); k == "InsertStmt" || k == "UpdateStmt" || k == "DeleteStmt" || k == "MergeStmt" {
			mode = migration.RowExclusive
		}
		for _, r := range st.Relations() {
			if !slices.Contains(out[r.Name], mode) {
				out[r.Name] = append(out[r.Name], mode)
			}
		}
	}
	return out
}

// bareName is a quoted, maybe qualified name's relation name.
func bareName(quoted string) string {
	s := strings.ReplaceAll(quoted, `"`, "")
	return s[strings.LastIndexByte(s, '.')+1:]
}

// begin starts watching a step.
func (m *monitor) begin(ctx context.Context, table string, sr *StepResult) {
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	m.mu.Lock()
	m.table, m.step, m.waiters, m.waited = table, sr, map[string][2]time.Time{}, 0
	if m.held == nil {
		m.held = map[string]*heldLock{}
	}
	m.mu.Unlock()
	go func() {
		defer close(m.done)
		tick := time.NewTicker(PollEvery)
		defer tick.Stop()
		for {
			m.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// poll reads the migration's relation locks and the sessions whose
// blocking pids name it.
func (m *monitor) poll(ctx context.Context) {
	q := fmt.Sprintf(`SELECT 'l', l.relation::regclass::text, l.mode, l.granted::text FROM pg_locks l JOIN pg_class c ON c.oid = l.relation AND c.relkind IN ('r', 'p')
		WHERE l.pid = %d AND l.locktype = 'relation' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		UNION ALL
		SELECT 'w', a.pid::text, coalesce(a.query_start::text, ''), '' FROM pg_stat_activity a WHERE %d = ANY (pg_blocking_pids(a.pid))`, m.pid, m.pid)
	res, err := m.conn.Exec(ctx, q).ReadAll()
	if err != nil || len(res) == 0 {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, row := range res[0].Rows {
		a, b, c, d := string(row[0]), string(row[1]), string(row[2]), string(row[3])
		switch a {
		case "l":
			if d != "true" {
				m.waited += PollEvery
				continue
			}
			k := b + " " + c
			if h, ok := m.held[k]; ok {
				h.last = now
			} else {
				m.held[k] = &heldLock{step: m.step, relation: b, mode: c, from: now, last: now}
			}
		case "w":
			k := b + " " + c // a session's statement: its pid and when it began
			v, ok := m.waiters[k]
			if !ok {
				v[0] = now
			}
			v[1] = now
			m.waiters[k] = v
		}
	}
}

// end stops watching a step and writes what was seen into it; released
// says the migration's session holds no more locks (it is outside a
// transaction block), so every lock seen is over.
func (m *monitor) end(sr *StepResult, released bool) {
	if m.cancel != nil {
		m.cancel()
		<-m.done
		m.cancel = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if sr != nil {
		sr.WaitedMS = float64(m.waited.Milliseconds())
		for _, v := range m.waiters {
			sr.Queued++
			sr.QueuedMaxMS = max(sr.QueuedMaxMS, float64((v[1].Sub(v[0]) + PollEvery).Milliseconds()))
		}
		for _, h := range m.held {
			if h.step == nil {
				h.step = sr
			}
		}
	}
	m.step = nil
	if !released {
		return
	}
	// Each lock is charged to the step that took it: the strongest on
	// the step's own table, held from its first sighting to its last.
	for _, h := range m.held {
		s := h.step
		if s == nil {
			continue
		}
		held := float64((h.last.Sub(h.from) + PollEvery).Milliseconds())
		if !sameRelation(h.relation, s.table) {
			if migration.BlocksWrites(h.mode) {
				s.AlsoHeld = append(s.AlsoHeld, fmt.Sprintf("%s on %s for %s", h.mode, h.relation, printable.MS(held)))
				slices.Sort(s.AlsoHeld)
			}
			continue
		}
		if s.Lock == "" || migration.Stronger(h.mode, s.Lock) {
			s.Lock, s.HeldMS = h.mode, held
		}
	}
	m.held = map[string]*heldLock{}
}

// sameRelation compares regclass's text for a relation (schema-qualified
// only when it is not on the search path) with a step's quoted name, by
// the relation's own name.
func sameRelation(regclass, quoted string) bool {
	return quoted != "" && bareName(regclass) == bareName(quoted)
}

// shapeText is a shape's normalised text on one line, clipped.
func shapeText(q string) string { return printable.Clip(strings.Join(strings.Fields(q), " "), 160) }
