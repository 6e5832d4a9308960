// Package verify runs the experiments that prove (or refute) findings, one
// row of Kinds per model.Exp* id (JIT toggled, an index on a temporary
// copy or through HypoPG, a cast removed, statistics refreshed,
// pgstattuple and pgstatindex, a CPU hot spot's statement re-run under
// perf, reproductions on a twin, an index rebuilt on a copy, VACUUM behind a
// held snapshot), inside pgmedic's safety envelope: only
// SELECTs are executed on a target, each run inside a transaction that is rolled back, under
// statement_timeout; temporary copies only in the lab or with
// --verify-indexes; nothing while the server is busy (LoadRule). Every kind
// replays without a server from what it sent and was answered, recorded
// from the lab scenarios (testdata/tapes, testdata/transcripts): those that
// open worker sessions (claim-race, lock-queue, held-lock, ddl-hold,
// checkpoint-wal, concurrency, vacuum-horizon) keep each worker's calls on
// a tape of its own (Session), and the lab tests run them for real.
package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Engine runs experiments.
type Engine struct {
	Conn envelope.Conn
	// Runs per side (jit on, jit off); at least 5.
	Runs int
	// Cores is the server's CPU count used by the load check.
	Cores int
	// MaxExperiments bounds how many statements are re-run in one check.
	MaxExperiments int
	// StatementTimeoutText is shown in messages ("5s").
	StatementTimeoutText string
	// JIT is the server's jit setting, which re-runs of the application's
	// statements use (Remeasure); "" is on, PostgreSQL's default.
	JIT string
	Log func(format string, args ...any)
	// Lab says the target is a lab database pgmedic created: experiments
	// may write there (ANALYZE, data-changing statements on copies).
	Lab bool
	// VerifyIndexes allows index experiments on temporary copies of tables
	// on a target (--verify-indexes).
	VerifyIndexes bool
	// MaxCopyBytes bounds the tables copied and the relations read by
	// pgstattuple; DefaultMaxCopyBytes when zero.
	MaxCopyBytes int64
	// CopyTimeout is the statement_timeout while copying; 120s when zero.
	CopyTimeout time.Duration
	// AllowFunctions are VOLATILE functions the user vouched for
	// (--allow-function): statements calling them may be executed.
	AllowFunctions []string
	// Workers opens more sessions on the same database, for experiments
	// that need concurrency (a claim race). Set only for a twin or a lab
	// database: on a target such experiments do not run.
	Workers func(ctx context.Context) (Session, error)
	// Pool starts a transaction-mode pool of size server connections in
	// front of the same database (a twin's) and returns a connector
	// through it and its stop; nil when none can be started.
	Pool func(ctx context.Context, size int) (connect func(context.Context) (Session, error), stop func(), err error)
	// Admit makes, on a twin of pgmedic's own, a role the server admits
	// only limit sessions of (past them it refuses the connection as
	// max_connections does, SQLSTATE 53300), and returns its connectors,
	// directly and through a pool, with their cleanup; nil when no such
	// role can be made.
	Admit func(ctx context.Context, limit int) (*Admitted, error)
	// InPlace says the connection is a twin's: its tables are throwaway
	// copies already, and an index is tried on them directly.
	InPlace bool
	// Copies, when set, is where copies are made and measured (the twin);
	// the target is then only read.
	Copies *Copies
	// CPU samples pgmedic's own backend while a CPU hot spot's statement
	// is re-run (perf on the database server); nil when there is none.
	CPU profile.CPU
	// ShowValues shows, in the report, the values a re-run took from the
	// user's data (--show-values); by default their source and type only.
	ShowValues bool
	// Now is the clock of the experiments timed from pgmedic's side (a
	// loop of round trips); nil is the wall clock. A transcript's replay
	// gives one that counts the calls sent.
	Now func() time.Time
	// Sleep waits for what a reproduction gives the server's time to do (a
	// head holding its lock, a change queueing behind it); nil waits on
	// the wall clock (wait.For). A transcript's replay, whose sessions
	// answer from their recordings, does not wait.
	Sleep func(ctx context.Context, d time.Duration)

	// columnType types the parameters PostgreSQL cannot infer (the
	// snapshot's ColumnType).
	columnType func(sqlparse.Column) string
	// literals are statements with their values as pg_stat_activity
	// or the server log showed them (the snapshot's Literals).
	literals map[int64]string
	// standIns are the parameters of the experiment running now that got
	// a value of pgmedic's (its type's, a word a function takes) for a
	// constant nobody saw: see settleStandIns.
	standIns []string
}

// A fix counts as helping when the measured figure after it is at most
// helpedRatio of the one before (20% better): JIT off, an index on a copy,
// a compact or analysed copy, a cast moved to the value.
const helpedRatio = 0.8

// standInSpread is how far (a factor either way) a re-run with a
// stand-in may be from the application's mean time and still be taken for
// the same work: a busy moment on either side stays inside it, a plan for
// other values (a range of a day where the application asks for a week, a
// generic plan where its calls get custom ones) is orders of magnitude
// off.
const standInSpread = 10.0

// settleStandIns judges a confirmation whose statement ran with values of
// pgmedic's for constants pg_stat_statements normalised and nobody saw
// written (not in pg_stat_activity, not in the server log): '1 day' for
// the application's interval '7 days' is another plan, and its gain is
// not the application's. The side measured as the application runs it is
// compared with the application's own mean time: within standInSpread it
// did the same work, and the method says which values stood in;
// otherwise the finding is estimated, not confirmed, with both numbers.
func settleStandIns(f *model.Finding, standIns []string, mean float64) {
	v := &f.Verification
	// One statement's experiment only: a sum over the top statements (a
	// planner setting) is no call of the application's to compare with.
	if len(standIns) == 0 || v.Status != model.Confirmed || v.Before == nil || f.Experiment == nil || f.Experiment.Query == "" {
		return
	}
	note := "; measured with a stand-in for " + strings.Join(slices.Compact(slices.Sorted(slices.Values(standIns))), ", ") + ": the application's value was seen neither in pg_stat_activity nor in the server log"
	if v.Before.Unit != "ms" {
		// Not a time (duplicate claims, refused connections, a size): the
		// count does not hang on which rows the value picks.
		v.Method += note
		return
	}
	if mean > 0 && v.Before.Value <= standInSpread*mean && v.Before.Value >= mean/standInSpread {
		v.Method += note + fmt.Sprintf(", and the re-run as the application runs it (%.2f ms) took about what its calls take (%.2f ms on average), the same work", v.Before.Value, mean)
		return
	}
	v.Method += note
	v.Status = model.Estimated
	if mean > 0 {
		v.Reason = fmt.Sprintf("the re-run with the stand-in took %.2f ms as the application runs it, where its calls take %.2f ms on average: another plan for other values, so the gain measured is not the application's (check again while it runs, so that pg_stat_activity shows its values, or with the server log and auto_explain)", v.Before.Value, mean)
		return
	}
	v.Reason = "the re-run used a stand-in for a constant and could not be compared with the application's own time, so the gain measured may not be the application's (check again while it runs, so that pg_stat_activity shows its values, or with the server log)"
}

// appMeanMS is the mean time of the application's calls of the finding's
// statement: the experiment's, else pg_stat_statements' entry of its
// queryid (the experiment's, or the finding's object's); 0 when unknown.
func appMeanMS(snap *model.Snapshot, f *model.Finding) float64 {
	exp := f.Experiment
	if exp == nil {
		return 0
	}
	if exp.MeanMS > 0 {
		return exp.MeanMS
	}
	id := exp.QueryID
	if id == 0 {
		id, _ = strconv.ParseInt(f.Object.QueryID, 10, 64)
	}
	if st := snap.Statement(id); id != 0 && st != nil {
		return st.MeanExecMS()
	}
	return 0
}

// judge sets the verdict of a before/after measurement: confirmed when the
// fix made it at least helpedRatio better, else refuted and dropped to info.
func judge(f *model.Finding, before, after float64) bool {
	if after <= before*helpedRatio {
		f.Verification.Status = model.Confirmed
		return true
	}
	f.Verification.Status = model.Refuted
	f.Severity = model.Info
	return false
}

// judgeRuns judges a fix from timed runs of both sides, alternating. The
// medians decide when they confirm. On a machine busy with other work a
// run's CPU time stretches while its waits on I/O do not, so a fix that
// takes I/O away (a spill to temporary files, pages read) can look
// smaller in the medians than it is: a sort that spilled measured 37 ms
// against 12 ms alone and 161 against 148 beside the test suite. The
// fastest run of each side is the one the machine disturbed least; when
// the medians fall short, the fastest runs are judged too, and when
// they confirm, they are the verdict's two numbers and the method says
// so. A fix that is not faster in either is refuted as before.
func judgeRuns(f *model.Finding, before, after []float64) bool {
	mb, ma := median(before), median(after)
	sev := f.Severity
	if judge(f, mb, ma) {
		return true
	}
	fb, fa := slices.Min(before), slices.Min(after)
	if len(before) < 3 || len(after) < 3 || fa > fb*helpedRatio {
		return false
	}
	f.Verification.Status, f.Severity = model.Confirmed, sev
	f.Verification.Before = &model.Measure{Value: model.Round(fb, 2), Unit: "ms"}
	f.Verification.After = &model.Measure{Value: model.Round(fa, 2), Unit: "ms"}
	f.Verification.Method += fmt.Sprintf("; the medians (%.1f -> %.1f ms) were squeezed by other work on the machine, so the fastest run of each side is the verdict's", mb, ma)
	return true
}

// Run verifies the findings that carry an experiment. It returns the
// findings (updated, re-sorted by the caller) and skipped entries.
func (e *Engine) Run(ctx context.Context, snap *model.Snapshot, findings []model.Finding) ([]model.Finding, []model.Skip) {
	// The defaults and the snapshot's lookups go into a copy: the caller's
	// Engine is left as it was.
	c := *e
	e = &c
	if e.Runs < 5 {
		e.Runs = 5
	}
	if e.MaxExperiments <= 0 {
		e.MaxExperiments = 20
	}
	if e.Log == nil {
		e.Log = func(string, ...any) {}
	}
	e.columnType, e.literals = snap.ColumnType, snap.Literals
	var skipped []model.Skip
	if busy := e.busy(snap); busy != "" {
		for i := range findings {
			if findings[i].Experiment != nil {
				findings[i].Verification = model.NotRunBecause(busy)
			}
		}
		return findings, append(skipped, model.Skip{Rule: "verify", Reason: busy, Fix: "re-run pgmedic check when the server is quieter"})
	}
	results := map[int64]*toggle{}
	ran := 0
	for i := range findings {
		f := &findings[i]
		if f.Experiment == nil || f.Experiment.Kind != model.ExpJITToggle {
			continue
		}
		r, ok := results[f.Experiment.QueryID]
		if !ok {
			if ran >= e.MaxExperiments {
				f.Verification = model.NotRunBecause(fmt.Sprintf("experiment budget of %d statements used up by statements with more impact", e.MaxExperiments))
				continue
			}
			ran++
			e.Log("verifying %s: %s", f.Rule, f.Object.Name)
			e.standIns = nil
			r = e.jitToggle(ctx, snap, f.Experiment)
			r.standIns = e.standIns
			results[f.Experiment.QueryID] = r
		}
		applyToggle(f, r, e.Runs)
		settleStandIns(f, r.standIns, appMeanMS(snap, f))
	}
	for i := range findings {
		f := &findings[i]
		if f.Experiment != nil && f.Experiment.Kind == model.ExpAggregate {
			aggregate(f, findings, results)
		}
	}
	for _, x := range Kinds {
		if x.run == nil {
			continue
		}
		for i := range findings {
			f := &findings[i]
			if f.Experiment == nil || f.Experiment.Kind != x.ID || ctx.Err() != nil {
				continue
			}
			if ran >= e.MaxExperiments {
				f.Verification = model.NotRunBecause(fmt.Sprintf("experiment budget of %d used up by findings with more impact", e.MaxExperiments))
				continue
			}
			if x.Rows != OwnTable {
				if why := e.behindALock(ctx, f.Experiment); why != "" {
					f.Verification = model.NotRunBecause(why)
					continue
				}
			}
			ran++
			e.Log("verifying %s: %s", f.Rule, f.Object.Name)
			e.standIns = nil
			x.run(e, ctx, snap, f)
			settleStandIns(f, e.standIns, appMeanMS(snap, f))
		}
	}
	return findings, skipped
}

// behindALock says why an experiment is not run on the target now: a
// table it reads has an ACCESS EXCLUSIVE lock held or queued on it (a
// schema change), so its first read would wait in that queue until
// pgmedic's lock_timeout cancelled it, an ERROR line in the target's log,
// and a wait the application's sessions share. On a twin (InPlace) the
// tables are pgmedic's own.
func (e *Engine) behindALock(ctx context.Context, exp *model.Experiment) string {
	if e.InPlace {
		return ""
	}
	var names []string
	if exp.Table.Name != "" {
		names = append(names, sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name))
	}
	if st, err := statement(exp); err == nil && exp.Query != "" {
		for _, r := range st.Relations() {
			names = append(names, sqlparse.QuoteQualified(r.Schema, r.Name))
		}
	}
	if len(names) == 0 {
		return ""
	}
	var locked string
	err := e.Conn.QueryRow(ctx, envelope.Tag+`SELECT coalesce(string_agg(DISTINCT l.relation::regclass::text, ', '), '') FROM pg_locks l
		WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.relation = ANY (SELECT to_regclass(n)::oid FROM unnest($1::text[]) n)`, names).Scan(&locked)
	if err != nil || locked == "" {
		return ""
	}
	return "not run now: " + locked + " has an ACCESS EXCLUSIVE lock held or queued on it (a schema change), and reading it would queue behind that lock; run check again once the change is through"
}

// Place is where an experiment kind runs when check has a twin.
type Place int

const (
	// OnTarget: read-only re-runs on the target, rolled back; a twin
	// changes nothing for them.
	OnTarget Place = iota
	// CopiesOnTwin: reads the target as it is, and makes its copy (a
	// compact table, a freshly analysed one) on the twin.
	CopiesOnTwin
	// OnTwin: writes or runs concurrent sessions, so with a twin it runs
	// there, never on the target (and without one only in the lab or
	// with --verify-indexes where the kind allows).
	OnTwin
)

// Rows says whether a kind needs the rows of its tables on the twin.
type Rows int

const (
	WithRows Rows = iota
	// DefinitionsOnly: a lock-queue reproduction needs the tables'
	// definitions, not their rows.
	DefinitionsOnly
	// RowsWhenTables: a load replay needs rows only when its statements
	// read a table of the snapshot.
	RowsWhenTables
	// RowsForRowLocks: a held-lock reproduction needs rows when the head's
	// locks are taken on rows (its statement, the waiters'); a head that
	// held a table lock (LOCK TABLE in its mode) needs the definition only.
	RowsForRowLocks
	// OwnTable: the experiment makes a table of its own and reads none of
	// the target's (the finding's table only names what it is about): the
	// twin copies none, and no lock on the target's tables holds it up.
	OwnTable
)

// Kind is one row of the experiment kinds table: the kind's id (the
// model.Exp* constant the rules name it by), where it runs, what the twin
// copies for it, the transcript that replays it without a server (a
// name under testdata/transcripts; the CPU hot spot's re-run, which
// needs perf's samples of the workload to be found, is replayed with the
// whole profile pipeline, so its transcript is diagnose's, a path from
// this package), and its function (nil for the JIT toggle and its aggregate, which run first:
// several findings share one statement's measurement).
type Kind struct {
	ID         string
	Place      Place
	Rows       Rows
	Transcript string
	run        func(e *Engine, ctx context.Context, snap *model.Snapshot, f *model.Finding)
}

// Kinds are every experiment kind, in the order they run: the
// measurements that only read first, the ones on copies after them. A new
// kind is its model.Exp* id, its row here and its function, and a
// transcript under testdata/transcripts.
var Kinds = []Kind{
	{model.ExpJITToggle, OnTarget, WithRows, "jit-toggle", nil},
	{model.ExpAggregate, OnTarget, WithRows, "jit-toggle", nil},
	{model.ExpCast, OnTarget, WithRows, "cast", func(e *Engine, ctx context.Context, _ *model.Snapshot, f *model.Finding) { e.castExperiment(ctx, f) }},
	{model.ExpIndex, OnTwin, WithRows, "index", (*Engine).indexExperiment},
	{model.ExpIndexStats, CopiesOnTwin, WithRows, "pgstatindex", (*Engine).indexStats},
	{model.ExpTableStats, CopiesOnTwin, WithRows, "pgstattuple", (*Engine).tableStats},
	{model.ExpMisestimate, CopiesOnTwin, WithRows, "misestimate", (*Engine).misestimate},
	{model.ExpHotspot, OnTarget, WithRows, "../diagnose/testdata/transcripts/profile-tz.txt", (*Engine).hotspot},
	{model.ExpClaimRace, OnTwin, WithRows, "claim-race", (*Engine).claimRace},
	{model.ExpLockQueue, OnTwin, DefinitionsOnly, "lock-queue", (*Engine).lockQueue},
	{model.ExpHeldLock, OnTwin, RowsForRowLocks, "held-lock", (*Engine).heldLock},
	{model.ExpDDLHold, OnTwin, DefinitionsOnly, "ddl-hold", (*Engine).ddlHold},
	{model.ExpCheckpointWAL, OnTwin, WithRows, "checkpoint-wal", (*Engine).checkpointWAL},
	{model.ExpIndexWrites, OnTwin, WithRows, "index-writes", (*Engine).indexWrites},
	{model.ExpConcurrency, OnTwin, RowsWhenTables, "concurrency", (*Engine).concurrency},
	// The held sessions' statements are cheap by what they show (idle
	// between them): refusals and goodput at the clients' idle time need
	// the tables' definitions, and a target whose slots are full is not
	// read for rows.
	{model.ExpHeldSessions, OnTwin, DefinitionsOnly, "held-sessions", (*Engine).heldSessions},
	{model.ExpHOTUpdate, OnTwin, WithRows, "hot-update", (*Engine).hotUpdate},
	{model.ExpHorizon, OnTwin, WithRows, "vacuum-horizon", (*Engine).vacuumHorizon},
	{model.ExpIndexRebuild, CopiesOnTwin, WithRows, "index-rebuild", (*Engine).indexRebuild},
	{model.ExpVacuumThrottle, OnTwin, WithRows, "vacuum-throttle", (*Engine).vacuumThrottle},
	{model.ExpWorkMem, OnTarget, WithRows, "work-mem", (*Engine).workMem},
	{model.ExpGenericPlan, OnTarget, WithRows, "generic-plan", (*Engine).genericPlan},
	{model.ExpPartitionPruning, OnTarget, WithRows, "partition-pruning", (*Engine).partitionPruning},
	{model.ExpExtendedStats, CopiesOnTwin, WithRows, "extended-statistics", (*Engine).extendedStats},
	{model.ExpBatch, OnTarget, WithRows, "batch", (*Engine).batch},
	{model.ExpPlannerSetting, OnTarget, WithRows, "planner-setting", (*Engine).plannerSetting},
	{model.ExpKeyWiden, CopiesOnTwin, WithRows, "key-widen", (*Engine).keyWiden},
	// Its own scratch table: the twin needs none of the target's.
	{model.ExpNotifyCommits, OnTwin, OwnTable, "notify-commits", (*Engine).notifyCommits},
	// Its own scratch table too: the waits are the truncation's lock's.
	{model.ExpTruncateWaits, OnTwin, OwnTable, "truncate-waits", (*Engine).truncateWaits},
	// Its own scratch table too: the lookups are the snapshots'.
	{model.ExpSubtransReads, OnTwin, OwnTable, "subtrans-reads", (*Engine).subtransReads},
	// Last: VACUUM leaves the twin's table frozen for the experiments
	// after it, and cannot be rolled back.
	{model.ExpFreeze, OnTwin, WithRows, "freeze", (*Engine).freeze},
}

// Session is a worker's connection (Engine.Workers): the statements it
// sends, and its end. A *pgx.Conn is one; a transcript's replay stands a
// recorded one in for each worker, in the order they were opened.
type Session interface {
	envelope.Conn
	Close(ctx context.Context) error
}

// Replayed is a Session that answers from a recording. The reproductions
// whose sessions race each other on the wall clock run a replayed
// session's loop to the end of its recording, not until the reproduction
// stops it, and take each statement's time from it (LastMS), so that a
// replay makes the calls and the measurements that were recorded.
type Replayed interface {
	// Ended says whether every recorded call was replayed.
	Ended() bool
	// LastMS is how long the server took for the last call replayed,
	// as recorded.
	LastMS() float64
	// Elapsed is what the calls replayed so far took, as recorded: a
	// load client's clock (runClients).
	Elapsed() time.Duration
}

// Pooled makes a pool starter whose connector gives *pgx.Conn one whose
// connector gives Sessions (Engine.Pool, Admitted.Pool).
func Pooled(start func(context.Context, int) (func(context.Context) (*pgx.Conn, error), func(), error)) func(context.Context, int) (func(context.Context) (Session, error), func(), error) {
	return func(ctx context.Context, size int) (func(context.Context) (Session, error), func(), error) {
		connect, stop, err := start(ctx, size)
		if err != nil {
			return nil, nil, err
		}
		return Sessions(connect), stop, nil
	}
}

// Sessions makes a connector of *pgx.Conn one of Sessions (Workers).
func Sessions(dial func(context.Context) (*pgx.Conn, error)) func(context.Context) (Session, error) {
	return func(ctx context.Context) (Session, error) {
		c, err := dial(ctx)
		if err != nil {
			return nil, err // never a typed nil inside the interface
		}
		return c, nil
	}
}

// KindOf is the row of a kind; ok is false for a kind not in the table.
func KindOf(id string) (Kind, bool) {
	for _, k := range Kinds {
		if k.ID == id {
			return k, true
		}
	}
	return Kind{}, false
}

// busy applies the envelope's load rule: no experiments when active
// backends exceed twice the cores or connections are near max_connections.
func (e *Engine) busy(snap *model.Snapshot) string {
	if why := LoadRule(snap.Activity, e.Cores); why != "" {
		return "experiments skipped: " + why
	}
	return ""
}

// LoadRule is the envelope's load rule for every experiment and for the
// twin's copy: it says why the server is too busy for one (active
// backends more than twice the cores, connections at 90% of
// max_connections), or "".
func LoadRule(a model.Activity, cores int) string {
	if cores > 0 && a.Active > 2*cores {
		return fmt.Sprintf("the server is busy (%d active backends, more than 2x its %d cores)", a.Active, cores)
	}
	if a.MaxConnections > 0 && float64(a.Total) >= 0.9*float64(a.MaxConnections) {
		return fmt.Sprintf("%d of max_connections=%d connections are in use", a.Total, a.MaxConnections)
	}
	return ""
}

// toggle is the outcome of one jit on/off experiment.
type toggle struct {
	reason    string // not empty = not run
	on, off   []float64
	jitFired  bool
	functions int
	optimized bool
	params    []string
	// plan is the plan cache mode the sides were measured under; the
	// generic plan's one run with JIT as the application has it, its cost
	// and the custom plan's, for statements with parameters.
	plan                               string
	lastCost                           float64
	genericMS, genericCost, customCost float64
	genericFunctions                   int
	// onBound is pgmedic's statement_timeout (ms) when the side with JIT
	// ran past it: the side's time is at least that.
	onBound float64
	// standIns are the parameters given values of pgmedic's.
	standIns []string
}

const stmtName = "pgmedic_verify"

// jitToggle re-runs a statement Runs times with JIT as the application's
// role has it and Runs times with jit = off, alternating the order, after
// one untimed run that warms the cache for both sides.
func (e *Engine) jitToggle(ctx context.Context, snap *model.Snapshot, exp *model.Experiment) *toggle {
	t := &toggle{}
	b, why := e.runnable(ctx, exp)
	if why != "" {
		t.reason = why
		return t
	}
	defer b.cleanup()
	t.params = b.desc
	explain := b.target
	appJIT := exp.AppSettings["jit"]
	if appJIT == "" {
		appJIT = snap.Settings["jit"].Value
	}
	t.plan = customPlan
	if len(b.types) > 0 {
		// A prepared statement runs custom plans for its first five
		// executions, then the generic plan if that is not costlier than
		// their average. Both are measured; JIT's thresholds can be passed
		// on one side only.
		if err := e.toggleSides(ctx, t, explain, appJIT, exp.AppSettings, customPlan); err != nil {
			t.reason = err.Error()
			return t
		}
		custom := *t
		gen, err := e.once(ctx, explain, appJIT, exp.AppSettings, genericPlan)
		if bound, ok := bounded(err); ok && !t.jitFired {
			// The generic plan ran past the timeout with JIT as the
			// application has it: measure it both ways.
			*t = toggle{plan: genericPlan, params: custom.params, genericMS: bound}
			if err := e.toggleSides(ctx, t, explain, appJIT, exp.AppSettings, genericPlan); err != nil {
				t.reason = err.Error()
			}
			return t
		}
		if err != nil {
			t.reason = err.Error()
			return t
		}
		t.genericMS, t.genericCost, t.customCost = gen.PlanningMS+gen.ExecutionMS, gen.Plan.TotalCost, t.lastCost
		if gen.JIT != nil {
			t.genericFunctions = gen.JIT.Functions
		}
		if t.jitFired || t.genericFunctions == 0 {
			return t
		}
		// JIT fires only on the generic plan: that is the one to measure.
		*t = toggle{plan: genericPlan, params: custom.params, genericMS: t.genericMS, genericCost: t.genericCost,
			customCost: t.customCost, genericFunctions: t.genericFunctions}
		if err := e.toggleSides(ctx, t, explain, appJIT, exp.AppSettings, genericPlan); err != nil {
			t.reason = err.Error()
		}
		return t
	}
	if err := e.toggleSides(ctx, t, explain, appJIT, exp.AppSettings, customPlan); err != nil {
		t.reason = err.Error()
	}
	return t
}

// Plan cache modes the JIT experiment measures.
const (
	customPlan  = "force_custom_plan"
	genericPlan = "force_generic_plan"
)

// toggleSides runs one untimed warm-up, then Runs times each side (JIT as
// the application has it, JIT off), alternating, under plan cache mode.
func (e *Engine) toggleSides(ctx context.Context, t *toggle, explain, appJIT string, settings map[string]string, mode string) error {
	// One untimed run first, so caches are warm for both sides.
	if _, err := e.once(ctx, explain, "off", nil, mode); err != nil {
		return err
	}
	for i := 0; i < e.Runs; i++ {
		order := []string{"app", "off"}
		if i%2 == 1 {
			order = []string{"off", "app"}
		}
		for _, side := range order {
			if side == "app" && t.onBound > 0 {
				// Compiled past the timeout once: not run again.
				t.on = append(t.on, t.onBound)
				continue
			}
			var ex *plan.Explain
			var err error
			if side == "app" {
				ex, err = e.once(ctx, explain, appJIT, settings, mode)
				if bound, ok := bounded(err); ok {
					// With JIT it ran past the timeout while without it
					// the warm-up finished: JIT's compile is the time.
					t.onBound, t.jitFired = bound, true
					t.on = append(t.on, bound)
					continue
				}
			} else {
				ex, err = e.once(ctx, explain, "off", nil, mode)
			}
			if err != nil {
				return err
			}
			ms := ex.PlanningMS + ex.ExecutionMS
			t.lastCost = ex.Plan.TotalCost
			if side == "app" {
				t.on = append(t.on, ms)
				if ex.JIT != nil && ex.JIT.Functions > 0 {
					t.jitFired, t.functions, t.optimized = true, ex.JIT.Functions, ex.JIT.Optimization
				}
			} else {
				t.off = append(t.off, ms)
			}
		}
	}
	return nil
}

// bound is a statement ready to be EXPLAINed: its own text, or EXECUTE of
// a prepared statement with representative parameter values.
type bound struct {
	target  string
	types   []string
	values  []string
	desc    []string
	cleanup func()
}

// statement is the experiment's parsed statement: the one collect parsed,
// or, for a statement given on the command line, parsed here once.
func statement(exp *model.Experiment) (*sqlparse.Statement, error) {
	if exp.Stmt == nil {
		st, err := sqlparse.Parse(exp.Query)
		if err != nil {
			return nil, err
		}
		exp.Stmt = st
	}
	return exp.Stmt, nil
}

// runnable is an application's statement ready to re-run: parsed, safe
// to execute (a SELECT that acts on nothing outside its transaction), and
// bound to values; or why it is not re-run.
func (e *Engine) runnable(ctx context.Context, exp *model.Experiment) (*bound, string) {
	stmt, err := statement(exp)
	if err != nil {
		return nil, "pgmedic cannot parse this statement, so it will not run it (" + err.Error() + ")"
	}
	if why := e.refusal(ctx, stmt); why != "" {
		return nil, "not re-run: " + why + "; pgmedic only executes SELECTs that act on nothing outside their transaction"
	}
	return e.bind(ctx, stmt, exp)
}

// rerunnable is runnable for a finding's experiment: the bound statement,
// or nil with the finding's verification saying why it is not re-run.
func (e *Engine) rerunnable(ctx context.Context, f *model.Finding) *bound {
	b, why := e.runnable(ctx, f.Experiment)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return nil
	}
	return b
}

// bind prepares a statement with $n parameters and picks their values
// (see parameterValues); a statement without parameters is used as is.
func (e *Engine) bind(ctx context.Context, stmt *sqlparse.Statement, exp *model.Experiment) (*bound, string) {
	return e.bindAs(ctx, stmt, exp, nil)
}

// bindAs is bind with the parameter types given (as a client binds them)
// instead of inferred; nil infers.
func (e *Engine) bindAs(ctx context.Context, stmt *sqlparse.Statement, exp *model.Experiment, types []string) (*bound, string) {
	query, err := stmt.Runnable()
	if err != nil {
		return nil, "not re-run: " + err.Error()
	}
	b := &bound{target: query, cleanup: func() {}}
	n := stmt.ParamCount()
	if n == 0 {
		return b, ""
	}
	if types != nil {
		err = envelope.PrepareAs(ctx, e.Conn, stmtName, types, query)
	} else {
		err = envelope.Prepare(ctx, e.Conn, stmtName, query, stmt.FallbackCandidates(n, e.columnType))
	}
	if err != nil {
		return nil, "cannot prepare the statement to re-run it: " + envelope.Message(err)
	}
	b.cleanup = func() { e.Conn.Exec(context.Background(), envelope.Tag+"DEALLOCATE "+stmtName) }
	if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1", stmtName).Scan(&b.types); err != nil {
		b.cleanup()
		return nil, "cannot read the statement's parameter types: " + envelope.Message(err)
	}
	limits := map[int]int64{}
	if exp != nil && exp.Calls > 0 {
		// What the statement returned per call is what its LIMIT let
		// through: the application's value, or a lower bound of it.
		perCall := max(1, (exp.Rows+exp.Calls/2)/exp.Calls)
		for _, p := range stmt.LimitParams() {
			limits[p] = perCall
		}
	}
	var seen map[int]string
	if exp != nil && e.literals[exp.QueryID] != "" {
		seen, _ = sqlparse.Literals(stmt.Text(), e.literals[exp.QueryID])
	}
	patterns := map[int]bool{}
	for _, l := range stmt.LikePrefixes() {
		patterns[l.Param] = l.Param > 0
	}
	values, desc, why := e.parameterValues(ctx, stmt.ParamColumns(), seen, limits, patterns, stmt.ArgumentParams(), b.types)
	if why != "" {
		b.cleanup()
		return nil, why
	}
	b.values, b.desc = values, desc
	b.target = "EXECUTE " + stmtName + "(" + strings.Join(values, ", ") + ")"
	return b, ""
}

// once runs EXPLAIN ANALYZE of target in a read-only transaction that is
// rolled back, with jit and the other settings applied.
func (e *Engine) once(ctx context.Context, target, jit string, settings map[string]string, mode string) (*plan.Explain, error) {
	return e.onceWith(ctx, "ANALYZE, TIMING OFF", target, jit, settings, mode)
}

// onceWith is once with other EXPLAIN options ("ANALYZE, BUFFERS, TIMING
// OFF" to count the blocks each node read).
func (e *Engine) onceWith(ctx context.Context, options, target, jit string, settings map[string]string, mode string) (*plan.Explain, error) {
	var ex *plan.Explain
	err := e.readOnly(ctx, func() error {
		sets := []string{"SET LOCAL plan_cache_mode = " + mode}
		names := make([]string, 0, len(settings))
		for k := range settings {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if k != "jit" {
				sets = append(sets, fmt.Sprintf("SELECT set_config(%s, %s, true)", sqlparse.QuoteLiteral(k), sqlparse.QuoteLiteral(settings[k])))
			}
		}
		sets = append(sets, "SET LOCAL jit = "+onOff(jit))
		for _, s := range sets {
			if _, err := e.Conn.Exec(ctx, envelope.Tag+s); err != nil {
				return fmt.Errorf("cannot apply %q for the experiment: %s", s, envelope.Message(err))
			}
		}
		var err error
		ex, err = envelope.Explain(ctx, e.Conn, options, target)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "57014":
			return &TimedOut{Limit: e.StatementTimeoutText}
		case err != nil:
			return fmt.Errorf("%w: %s", errRerun, envelope.Message(err))
		}
		return nil
	})
	return ex, err
}

// errRerun is a statement the server refused to run again with the
// values pgmedic bound to it (or that failed as it ran).
var errRerun = errors.New("re-running the statement failed")

// TimedOut is a run cancelled by pgmedic's statement_timeout. It is a
// measurement too: the statement takes at least that long with these
// values and settings. A side of an experiment that times out is not run
// again (each try would cost the whole timeout); its time is the bound,
// and a verdict that rests on the bound says so.
type TimedOut struct{ Limit string }

func (t *TimedOut) Error() string {
	return fmt.Sprintf("the statement ran past pgmedic's statement_timeout (%s): raise --statement-timeout to measure it", t.Limit)
}

// MS is the bound in milliseconds; 0 when the limit does not parse.
func (t *TimedOut) MS() float64 {
	d, err := time.ParseDuration(t.Limit)
	if err != nil {
		return 0
	}
	return float64(d.Milliseconds())
}

// bounded splits a run's error: a timeout with a known limit is a lower
// bound of the time (ms), anything else an error.
func bounded(err error) (float64, bool) {
	var to *TimedOut
	if errors.As(err, &to) && to.MS() > 0 {
		return to.MS(), true
	}
	return 0, false
}

func onOff(v string) string {
	switch strings.ToLower(v) {
	case "on", "true", "yes", "1":
		return "on"
	}
	return "off"
}

// applyToggle turns a JIT on/off measurement into the finding's verdict:
// medians of each side; not run when JIT did not fire on the re-run.
func applyToggle(f *model.Finding, t *toggle, runs int) {
	if t.reason != "" {
		f.Verification = model.NotRunBecause(t.reason)
		return
	}
	before, after := median(t.on), median(t.off)
	method := fmt.Sprintf("EXPLAIN ANALYZE x%d with jit as the role runs it and x%d with SET LOCAL jit = off, alternating, in rolled-back read-only transactions; medians of planning + execution time", runs, runs)
	method += planChoice(t)
	if t.onBound > 0 {
		method += fmt.Sprintf("; with JIT the statement ran past pgmedic's statement_timeout (%.0f ms) and was not run again: its time is at least that, a lower bound", t.onBound)
	}
	if t.genericCost > 0 {
		f.Evidence = append(f.Evidence,
			model.Evidence{Label: "generic plan with JIT as the role runs it (one run)", Value: model.Round(t.genericMS, 2), Unit: "ms"},
			model.Evidence{Label: "JIT functions in the generic plan", Value: float64(t.genericFunctions)})
	}

	if !t.jitFired {
		f.Verification = model.Verification{Status: model.NotRun, Method: method, Parameters: t.params,
			Reason: fmt.Sprintf("JIT did not fire when re-run (%.1f ms vs %.1f ms): the representative parameter values give a plan below jit_above_cost, while the recorded calls did not", before, after)}
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "measured with JIT (median)", Value: model.Round(before, 2), Unit: "ms"},
		model.Evidence{Label: "measured without JIT (median)", Value: model.Round(after, 2), Unit: "ms"},
		model.Evidence{Label: "JIT functions compiled per run (measured)", Value: float64(t.functions)})
	f.Verification = model.Verification{Method: method, Parameters: t.params,
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "ms"}}
	if judge(f, before, after) {
		return
	}
	// JIT helps or does not matter here (long analytic queries): never tell
	// users to switch it off on that evidence.
	f.Title = fmt.Sprintf("JIT re-measured: turning it off does not make this statement faster (%.1f ms with, %.1f ms without)", before, after)
	f.Fix = model.Fix{Summary: "keep JIT for this statement"}
}

// planChoice says which plan the measurement is about, and which one a
// prepared statement ends up with: from its sixth execution PostgreSQL
// keeps the generic plan when it is not costlier than the custom plans.
func planChoice(t *toggle) string {
	if t.genericCost == 0 {
		return ""
	}
	measured := "measured on custom plans for these values"
	if t.plan == genericPlan {
		measured = "measured on the generic plan, since JIT fires only there"
	}
	settles := fmt.Sprintf("a prepared statement settles on the generic plan (cost %.0f, custom %.0f)", t.genericCost, t.customCost)
	if t.genericCost > t.customCost*1.1 {
		settles = fmt.Sprintf("a prepared statement keeps custom plans (generic cost %.0f, custom %.0f)", t.genericCost, t.customCost)
	}
	return "; " + measured + "; " + settles
}

// aggregate turns the statement experiments into the setting-level result:
// the workload time of the re-measured statements with and without JIT.
func aggregate(f *model.Finding, findings []model.Finding, results map[int64]*toggle) {
	var before, after float64
	n := 0
	seen := map[int64]bool{}
	for _, g := range findings {
		if g.Experiment == nil || g.Experiment.Kind != model.ExpJITToggle || seen[g.Experiment.QueryID] {
			continue
		}
		r := results[g.Experiment.QueryID]
		if r == nil || r.reason != "" || !r.jitFired {
			continue
		}
		seen[g.Experiment.QueryID] = true
		calls := float64(g.Experiment.Calls)
		before += calls * median(r.on)
		after += calls * median(r.off)
		n++
	}
	if n == 0 {
		f.Verification = model.NotRunBecause("no statement could be re-measured (see the statement findings)")
		return
	}
	f.Verification = model.Verification{
		Method: fmt.Sprintf("sum over %d re-measured statement(s) of calls x measured median, jit as configured vs jit = off", n),
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "ms"},
	}
	judge(f, before, after)
}

// median of the runs of one side; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
