// Package diagnose holds the pipelines of the commands that find and
// prove, in the order the data flows: collect a snapshot (and the server
// log, a CPU profile), run the rules of the one table on each input,
// verify the findings with experiments, and hand back a report that says
// first what it could not see. Each of those commands in internal/cli
// reads its flags and calls its one function here (Check, FromBundle,
// Explain, ComparePlans, LogsReport, ProfileCommand, Watch); the lab's
// scenarios call Check the same way. The commands that compare two sides
// of a workload (replay, the rehearsals) are internal/trial's.
package diagnose

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/verify"
)

// Options are what check's flags set. The zero value of a field means its
// default; Validate says which values are refused.
type Options struct {
	// Rules are the rule ids to run; nil runs them all.
	Rules            []string
	StatementTimeout time.Duration
	CopyTimeout      time.Duration
	// ServerCores is the server's CPU count for the load check; 0 means
	// this machine's when the server is local, else 4.
	ServerCores    int
	Runs           int
	NoVerify       bool
	VerifyIndexes  bool
	MaxCopyBytes   int64
	AllowFunctions []string
	MaxTables      int
	MaxStatements  int
	// SampleFor and SampleEvery are the sessions' sampling window and
	// tick (check --sample, --sample-interval).
	SampleFor, SampleEvery time.Duration
	// PgBouncer is the DSN of a PgBouncer admin console sampled with the
	// sessions (check --pgbouncer); "" for none.
	PgBouncer string
	// LogFiles are server logs to read with the check (--log), and
	// ServerLogBytes how much of the end of the server's own log to read
	// over the connection when the role may (0: none).
	LogFiles       []string
	ServerLogBytes int64
	// ProfileFor is how long to sample the busiest backends' CPU with
	// perf (check --profile); 0 for no profile.
	ProfileFor time.Duration
	// Lab is set for lab databases, where experiments may write.
	Lab bool
	// Twin runs the experiments that need writes on a throwaway twin of
	// the tables they read (check --twin): a lab cluster of the target's
	// major version, or TwinDSN's database. TwinMaxBytes bounds the copy
	// (0: 1 GB); KeepTwin leaves the lab cluster running.
	Twin         bool
	TwinDSN      string
	TwinMaxBytes int64
	KeepTwin     bool
	// MaxConnections is the most sessions pgmedic opens on the target at
	// once (--max-connections; 1 is its own session alone): the twin's
	// copy reads with that many, less what the load rule keeps back.
	MaxConnections int
	Log            func(format string, args ...any)
	// Baseline is an earlier report to compare the check with (check
	// --baseline): findings NEW, PERSISTING or RESOLVED, statements
	// slower or faster, slowdowns re-measured.
	Baseline *baseline.Old
	// ShowValues shows values taken from the user's data in the report
	// (--show-values): re-runs' parameters from pg_stats or the
	// application's literals.
	ShowValues bool
	// Sampled, when set, is called once the snapshot and its samples are
	// collected, before any experiment: the lab ends a scenario's workload
	// there when the twin shares its machine, as a twin elsewhere would
	// not feel the target's load.
	Sampled func()
}

// InputError is a problem with what pgmedic was pointed at or given (a
// statement it refuses, a catalog it cannot read): the command exits 2.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func InputErr(err error) error { return &InputError{Err: err} }

func InputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// Validate refuses options no run should use.
func (o Options) Validate() error {
	switch {
	case o.Runs < 5:
		return InputErrorf("--runs must be at least 5: a median of fewer runs is noise")
	case o.MaxCopyBytes <= 0:
		return InputErrorf("--verify-max-size must be a positive number of megabytes")
	case o.StatementTimeout < 100*time.Millisecond:
		return InputErrorf("--statement-timeout must be at least 100ms")
	case o.CopyTimeout < 100*time.Millisecond:
		return InputErrorf("--copy-timeout must be at least 100ms")
	case o.MaxTables <= 0 || o.MaxStatements <= 0:
		return InputErrorf("--max-tables and --max-statements must be positive")
	case o.SampleFor < 0 || o.SampleFor > 10*time.Minute:
		return InputErrorf("--sample must be between 0 (off) and 10m")
	case o.SampleFor > 0 && o.SampleEvery < 10*time.Millisecond:
		return InputErrorf("--sample-interval must be at least 10ms")
	case o.ServerLogBytes < 0:
		return InputErrorf("--server-log must be 0 (off) or a number of megabytes")
	}
	if _, err := rules.Select(o.Rules); err != nil {
		return InputErrorf("--rules: %v", err)
	}
	// A log named on the command line must be readable: say so before the
	// check connects, not after it has run.
	for _, f := range o.LogFiles {
		if f == "-" {
			return InputErrorf("--log -: check reads stdin for nothing else; give the log as a file")
		}
		if _, err := os.Stat(f); err != nil {
			return InputErrorf("--log %s: %v", f, err)
		}
	}
	return nil
}

// Check is the whole pipeline on one database: connect, collect, rules,
// verify. The report keeps findings at or above min.
func Check(ctx context.Context, dsn, version string, o Options, min model.Severity) (*report.Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	selected, _ := rules.Select(o.Rules)
	started := time.Now()
	sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: o.StatementTimeout})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	o.logf("connected to %s (PostgreSQL %s)", sess.Target, sess.Target.ServerVersion)
	opts := collect.Defaults()
	opts.MaxTables, opts.MaxStatements = o.MaxTables, o.MaxStatements
	opts.SampleFor, opts.SampleEvery = o.SampleFor, o.SampleEvery
	if local(sess.Target.Host) {
		opts.CPU = profile.ProcCPU
	}
	if o.SampleFor > 0 {
		o.logf("sampling sessions for %s", o.SampleFor)
	}
	if o.PgBouncer != "" {
		// A PgBouncer that cannot be read costs its own rule, not the
		// check: pool-saturation says why.
		b, err := envelope.ConnectBouncer(ctx, o.PgBouncer, envelope.Options{})
		if err != nil {
			opts.BouncerError = err.Error()
		} else {
			defer b.Close()
			opts.Bouncer, opts.BouncerVersion = b.Conn, b.Version
		}
	}
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		return nil, InputErr(err)
	}
	o.logf("collected %d statements", len(snap.Statements))
	if o.Sampled != nil {
		o.Sampled()
	}
	snap.ServerCores = ServerCores(o.ServerCores, sess.Target.Host)
	snap.CoresGuessed = o.ServerCores <= 0 && !local(sess.Target.Host)
	snap.ShowValues = o.ShowValues
	snap.StatsUntracked = sess.StatsUntracked
	// The logs are read before the rules: connection-pressure joins the
	// connections the log says were refused to the sessions sampled.
	fromLogs, events, logSkips, err := o.checkLogs(ctx, sess, snap)
	if err != nil {
		return nil, err
	}
	snap.Logged = events
	findings, skipped := rules.Run(snap, selected)
	if ok, why := pgversion.Supported(sess.Target.ServerVersionNum); !ok {
		skipped = append(skipped, model.Skip{Rule: "version", Reason: why,
			Fix: fmt.Sprintf("pgmedic reads PostgreSQL %d to %d; what it could read is above", pgversion.Oldest, pgversion.Newest)})
	}
	// The logs' findings the check did not make join before the
	// experiments: one whose fix an experiment can measure on this database
	// (a checkpoint's cost to the writes after it) is verified with the
	// others.
	fromLogs = newFindings(fromLogs, findings, o.Rules)
	// So is one from a logged plan whose statement the log wrote with its
	// values (a spill re-run with more work_mem). The others keep what
	// they say (counted in the log).
	var logged []model.Finding
	for _, f := range fromLogs {
		if f.Rule == rules.CheckpointPressureID {
			rules.CheckpointExperiment(snap, &f)
			findings = append(findings, f)
			continue
		}
		// A plan the log says ran in another database of the server is
		// not re-run here: its tables are that database's.
		if f.Experiment != nil && (f.Object.Database == "" || f.Object.Database == snap.Database) {
			findings = append(findings, f)
			continue
		}
		f.Experiment = nil
		logged = append(logged, f)
	}
	skipped = append(skipped, logSkips...)
	if own := ownStatements(snap); own != nil {
		skipped = append(skipped, *own)
	}
	var twinLine string
	if !o.NoVerify {
		var more []model.Skip
		findings, more, twinLine = o.verify(ctx, sess, dsn, snap, findings)
		skipped = append(skipped, more...)
	}
	findings = append(findings, logged...)
	hot, hotSkips, prof := o.checkProfile(ctx, sess)
	findings, skipped = append(findings, hot...), append(skipped, hotSkips...)
	rules.Sort(findings)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep := report.New(version, sess.Target, snap.CollectedAt, findings, skipped, rules.SnapshotRules(selected), min)
	rep.Unseen = unseen(snap, skipped)
	rep.Sessions = snap.Sampling.Summary()
	if sm := snap.Sampling; sm != nil {
		// The rules judged every tick check sampled.
		if rep.Timeline = model.NewTimeline(sm.Samples, sm.Pools); rep.Timeline != nil {
			rep.Timeline.Judged = &model.Span{From: rep.Timeline.From, To: rep.Timeline.To, Note: "the sample check judged"}
		}
	}
	if !o.ShowValues {
		rep.Sessions.HideValues(sqlparse.Normalised)
		rep.Timeline.HideValues(sqlparse.Normalised)
	}
	rep.Statements, rep.Plans = snap.StatementRows()
	rep.ElapsedS, rep.Envelope = model.Round(time.Since(started).Seconds(), 1), sess.Settings()
	rep.Twin = twinLine
	if o.Baseline != nil {
		d := baseline.Compare(o.Baseline, findings, rep.Statements, rep.Plans, min)
		baseline.Settle(d, o.remeasure(ctx, sess, snap))
		rep.Baseline = d
	}
	if prof != nil {
		prof.PGMedic = version
		rep.Profile = prof
	}
	return rep, nil
}

// verify runs the experiments: on the target, and with --twin those that
// need writes on a twin; it returns the twin's line for the report.
func (o Options) verify(ctx context.Context, sess *envelope.Session, dsn string, snap *model.Snapshot, findings []model.Finding) ([]model.Finding, []model.Skip, string) {
	if o.Twin || o.TwinDSN != "" {
		return o.verifyWithTwin(ctx, sess, dsn, snap, findings)
	}
	eng := o.engine(sess)
	if o.Lab {
		// A lab database is throwaway: experiments that need concurrent
		// writers run on it.
		eng.Workers = verify.Sessions(func(ctx context.Context) (*pgx.Conn, error) {
			return envelope.Dial(ctx, dsn, envelope.Work{AppName: envelope.AppName + " worker"})
		})
	}
	out, skipped := eng.Run(ctx, snap, findings)
	return out, skipped, ""
}

func (o Options) engine(sess *envelope.Session) *verify.Engine {
	return &verify.Engine{Conn: sess.Conn, Runs: o.Runs, Cores: ServerCores(o.ServerCores, sess.Target.Host),
		StatementTimeoutText: o.StatementTimeout.String(), Log: o.Log,
		Lab: o.Lab, VerifyIndexes: o.VerifyIndexes, MaxCopyBytes: o.MaxCopyBytes,
		AllowFunctions: o.AllowFunctions, CopyTimeout: o.CopyTimeout, ShowValues: o.ShowValues}
}

// remeasure runs the statements a baseline comparison found slower again
// on the target, inside the envelope, so that only a slowdown that stands
// is called a regression (see baseline.Settle).
func (o Options) remeasure(ctx context.Context, sess *envelope.Session, snap *model.Snapshot) func(baseline.StatementChange) *model.Remeasured {
	eng := o.engine(sess)
	eng.JIT = snap.Settings["jit"].Value
	busy := verify.LoadRule(snap.Activity, eng.Cores)
	return func(c baseline.StatementChange) *model.Remeasured {
		switch {
		case o.NoVerify:
			return &model.Remeasured{Why: "not re-run (--no-verify)"}
		case busy != "":
			return &model.Remeasured{Why: "not re-run: " + busy}
		}
		id, _ := strconv.ParseInt(c.QueryID, 10, 64)
		st := snap.Statement(id)
		if st == nil {
			return &model.Remeasured{Why: "not re-run: check did not read this statement"}
		}
		o.logf("re-running a statement that got slower: %s", printable.Shorten(st.Query, 60))
		r := eng.Remeasure(ctx, *st, c.Before.Plan, plan.Shape)
		return &r
	}
}

// ServerCores is the flag's value, this machine's CPU count for a server
// on this machine, else a guess of 4.
func ServerCores(flag int, host string) int {
	if flag > 0 {
		return flag
	}
	if local(host) {
		return runtime.NumCPU()
	}
	return 4
}

// local says whether the server runs on this machine: a socket
// directory, localhost or a loopback address.
func local(host string) bool {
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PlanOptions are what a plan's pipeline uses: the rules to run, and for
// its experiments (which never copy tables) the runs a side, the
// session's statement_timeout, the functions the user vouched for, and
// where progress goes.
type PlanOptions struct {
	Rules            []string
	Runs             int
	StatementTimeout time.Duration
	AllowFunctions   []string
	Log              func(format string, args ...any)
}

// PlanOptions are the options a plan's pipeline reads of a check's.
func (o Options) PlanOptions() PlanOptions {
	return PlanOptions{Rules: o.Rules, Runs: o.Runs, StatementTimeout: o.StatementTimeout, AllowFunctions: o.AllowFunctions, Log: o.Log}
}

// Plan runs the plan rules on one plan; with a session it reads the
// catalogs for implicit casts and, when the query is known, runs the
// experiments on it.
func Plan(ctx context.Context, sess *envelope.Session, in rules.PlanInput, o PlanOptions) ([]model.Finding, []model.Skip, error) {
	if sess != nil {
		cat, err := collect.CastCatalog(ctx, sess.Conn, in.Explain.Tables())
		if err != nil {
			return nil, nil, InputErr(err)
		}
		in.Catalog = cat
	}
	findings, skipped, err := rules.RunPlan(in, o.Rules)
	if err != nil {
		return nil, nil, InputErrorf("--rules: %v", err)
	}
	if sess == nil || in.Query == "" {
		return findings, skipped, nil
	}
	snap := &model.Snapshot{}
	if err := collect.Activity(ctx, sess.Conn, snap); err != nil {
		return nil, nil, InputErr(err)
	}
	plain := Options{Runs: o.Runs, StatementTimeout: o.StatementTimeout, AllowFunctions: o.AllowFunctions, Log: o.Log}
	var more []model.Skip
	findings, more = plain.engine(sess).Run(ctx, snap, findings)
	rules.RankPlan(findings)
	return findings, append(skipped, more...), nil
}

// Query runs EXPLAIN of a statement the user gave, inside the envelope: a
// read-only transaction that is always rolled back, and ANALYZE only for a
// plain SELECT that calls nothing acting outside the transaction. It
// returns the parsed statement with its plan, so the experiments reuse it.
func Query(ctx context.Context, sess *envelope.Session, query string, analyze bool, allow []string) (*sqlparse.Statement, *plan.Explain, error) {
	stmt, err := sqlparse.Parse(query)
	if err != nil {
		return nil, nil, InputErrorf("--query: %v", err)
	}
	if stmt.ParamCount() > 0 {
		return nil, nil, InputErrorf("--query has $n parameters; put literal values in their place so PostgreSQL can plan it as the application runs it")
	}
	opts := "VERBOSE, SETTINGS, SUMMARY"
	if analyze {
		if ok, why := stmt.SafeToAnalyze(); !ok {
			return nil, nil, InputErrorf("--analyze runs only a plain SELECT on a target (%s); drop --analyze to see its plan", why)
		}
		why, err := verify.UnsafeCallee(ctx, sess.Conn, stmt, allow)
		if err != nil {
			return nil, nil, InputErrorf("--analyze: %w", err)
		}
		if why != "" {
			return nil, nil, InputErrorf("--analyze refused: %s; or drop --analyze to see the plan without executing it", why)
		}
		opts = "ANALYZE, BUFFERS, " + opts
	}
	var e *plan.Explain
	err = envelope.RolledBack(ctx, sess.Conn, envelope.ReadOnly, func() (err error) {
		e, err = envelope.Explain(ctx, sess.Conn, opts, query)
		return err
	})
	if err != nil {
		return nil, nil, InputErrorf("EXPLAIN of --query failed: %s", strings.TrimSpace(err.Error()))
	}
	return stmt, e, nil
}

// analyzesOf counts the log's autoanalyze runs of a table a plan names
// (relation, or schema.relation under VERBOSE); autovacuum names tables
// database.schema.relation.
func analyzesOf(tables []model.TableMaintenance, table string) int64 {
	var n int64
	for _, t := range tables {
		if strings.HasSuffix(t.Table, "."+table) {
			n += t.Analyzes
		}
	}
	return n
}

// Logs reads server logs and runs the plan rules on the executed plans
// auto_explain logged in them: the plans pg_stat_statements cannot show
// (the cast a client's parameter type forced, JIT per execution, the
// generic plan a prepared statement settled on). Findings name the
// statement's fingerprint.
//
// catalog, when the logs are read beside a connection (check --log, the
// server's own log), reads the catalogs of the plans' tables once, so
// that the plans are judged as explain --dsn judges one (a cast on a
// varchar column that an index still serves is no finding); nil reads
// none, and the findings that need them say so.
func Logs(ctx context.Context, sources []logs.Source, opt logs.Options, ruleIDs []string, catalog func(context.Context, []string) (*model.CastCatalog, error)) (*logs.Summary, []model.Finding, []model.Skip, error) {
	s, err := logs.Analyze(ctx, sources, opt)
	if err != nil {
		return nil, nil, nil, err
	}
	var findings []model.Finding
	var skipped []model.Skip
	var misestimates []rules.LogMisestimate
	events := s.LogEvents()
	unreadable := 0
	type parsed struct {
		p  *logs.Plan
		ex *plan.Explain
	}
	var plans []parsed
	var tables []string
	for _, p := range s.Plans() {
		ex, err := plan.Parse([]byte(p.Text))
		if err != nil {
			unreadable++
			continue
		}
		plans = append(plans, parsed{p, ex})
		tables = append(tables, ex.Tables()...)
	}
	var cat *model.CastCatalog
	if catalog != nil && len(tables) > 0 {
		if cat, err = catalog(ctx, tables); err != nil {
			skipped = append(skipped, model.Skip{Rule: rules.ImplicitCastID, Reason: "the catalogs of the logged plans' tables could not be read: " + envelope.Message(err),
				Fix: "GRANT pg_monitor (or SELECT on the tables) to pgmedic's role"})
			cat = nil
		}
	}
	for _, pp := range plans {
		p, ex := pp.p, pp.ex
		if ex.ExecutionMS == 0 {
			// auto_explain prints no Execution Time: the log line's
			// duration is the statement's.
			ex.ExecutionMS = p.DurationMS
		}
		// The query text auto_explain printed, with its values, is what
		// an experiment re-runs (check verifies it beside the others).
		in := rules.PlanInput{Explain: ex, Catalog: cat, Query: p.Literal,
			Object: model.Object{Kind: "statement (log)", Name: printable.Shorten(p.Query, 80), QueryID: p.Fingerprint, Fingerprint: p.Fingerprint, Database: p.Database}}
		fs, _, err := rules.RunPlan(in, ruleIDs)
		if err != nil {
			return nil, nil, nil, InputErrorf("--rules: %v", err)
		}
		findings = append(findings, fs...)
		for _, m := range rules.ScanMisestimates(ex) {
			m.Fingerprint, m.Query, m.LogHours = p.Fingerprint, p.Query, events.Seconds/3600
			m.Analyzes, m.Unlogged = analyzesOf(events.Tables, m.Table), len(events.Tables) == 0
			misestimates = append(misestimates, m)
		}
	}
	fromEvents, err := rules.RunLog(rules.LogInput{Events: events, Misestimates: misestimates, Name: "the server log"}, ruleIDs)
	if err != nil {
		return nil, nil, nil, InputErrorf("--rules: %v", err)
	}
	findings = append(findings, fromEvents...)
	if unreadable > 0 {
		skipped = append(skipped, model.Skip{Rule: "auto_explain", Reason: fmt.Sprintf("%d auto_explain plans in the log could not be read as plans", unreadable),
			Fix: "auto_explain.log_format = 'json' gives plans pgmedic reads whole"})
	}
	rules.RankPlan(findings)
	// The slowest plans of a statement usually say the same thing: one
	// finding each.
	seen := map[string]bool{}
	kept := findings[:0]
	for _, f := range findings {
		k := f.Rule + "|" + f.Object.QueryID + "|" + f.Title
		if !seen[k] {
			seen[k] = true
			kept = append(kept, f)
		}
	}
	return s, kept, skipped, nil
}
