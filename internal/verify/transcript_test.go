package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/scenario"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/testkit"
	"github.com/pgmedic/pgmedic/internal/twin"
	"github.com/pgmedic/pgmedic/internal/verify"
)

var record = flag.Bool("record", false, "record the tapes again from lab scenarios on a throwaway PostgreSQL cluster, then replay them (add -rewrite to accept new transcripts)")

// TestTranscripts replays every experiment kind from tapes recorded on
// PostgreSQL 15 and compares the statements sent, in order, and the
// verdict with testdata/transcripts. It needs no server. The directive:
//
//	verify scenario=NAME tape=NAME kind=K[,K] [lab] [verify-indexes] [busy] [workers] [pool] [admit] [twin]
//
// takes the findings of kind K the rules produce on the lab scenario
// (with workers, the engine may open more sessions on the lab database,
// each recorded on a tape of its own and replayed in the order opened;
// with pool, it may also start a transaction-mode PgBouncer in front of
// it, whose sessions are recorded among the workers; with admit, it may
// make a role the server admits only so many sessions of, each load
// client's connection attempts recorded and replayed as its own;
// with twin, the connection stands for a twin's, where the reproductions of
// lock queues run, and a replay's reproduction does not wait); its
// input may hold "setup: SQL" lines (run before collecting, when
// recording) and a "query: SQL" line that replaces the experiment's
// statement.
func TestTranscripts(t *testing.T) {
	rec := &recording{}
	t.Cleanup(rec.close)
	datadriven.Walk(t, "testdata/transcripts", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "verify" {
				t.Fatalf("%s: unknown directive %q", d.Pos, d.Cmd)
			}
			c := parseCase(t, d)
			tapePath := filepath.Join("testdata", "tapes", c.tape+".json")
			if *record && !c.busy { // a busy server is simulated on the recorded tape
				tp := rec.record(t, c)
				if err := writeTape(tapePath, tp); err != nil {
					t.Fatal(err)
				}
			}
			tp, err := readTape(tapePath)
			if err != nil {
				t.Fatalf("%v (record it: go test ./internal/verify -run Transcripts -record)", err)
			}
			return replay(t, c, tp)
		})
	})
}

type tcase struct {
	scenario, tape             string
	kinds                      map[string]bool
	lab, copies, busy, workers bool
	// pool: the engine may start a pool (Engine.Pool), whose sessions
	// are workers.
	pool bool
	// admit: the engine may make a role of limited connections
	// (Engine.Admit), its sessions workers.
	admit bool
	// twin: the connection is a twin's (Engine.InPlace), where the
	// reproductions of lock queues run.
	twin  bool
	setup []string
	query string
}

func parseCase(t *testing.T, d *datadriven.TestData) tcase {
	c := tcase{kinds: map[string]bool{}}
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "scenario":
			c.scenario = a.Vals[0]
		case "tape":
			c.tape = a.Vals[0]
		case "kind":
			for _, v := range a.Vals {
				c.kinds[v] = true
			}
		case "lab":
			c.lab = true
		case "verify-indexes":
			c.copies = true
		case "busy":
			c.busy = true
		case "workers":
			c.workers = true
		case "pool":
			c.pool = true
		case "admit":
			c.admit = true
		case "twin":
			c.twin = true
		default:
			t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
		}
	}
	for _, line := range strings.Split(d.Input, "\n") {
		switch {
		case strings.HasPrefix(line, "setup: "):
			c.setup = append(c.setup, strings.TrimPrefix(line, "setup: "))
		case strings.HasPrefix(line, "query: "):
			c.query = strings.TrimPrefix(line, "query: ")
		case strings.TrimSpace(line) == "":
		default:
			t.Fatalf("%s: input lines start with setup: or query:, not %q", d.Pos, line)
		}
	}
	if c.scenario == "" || c.tape == "" || len(c.kinds) == 0 {
		t.Fatalf("%s: verify needs scenario=, tape= and kind=", d.Pos)
	}
	return c
}

// engine is the engine as check configures it, for a case.
func engine(c tcase, conn envelope.Conn) *verify.Engine {
	return &verify.Engine{Conn: conn, Runs: 5, Cores: 2, StatementTimeoutText: "5s", Lab: c.lab, VerifyIndexes: c.copies, InPlace: c.twin}
}

func replay(t *testing.T, c tcase, tp *tape) string {
	rp := newReplayer(t, c.tape, tp.Calls)
	snap := tp.Snapshot
	if c.busy {
		snap.Activity.Active = 100
	}
	var findings []model.Finding
	for _, tf := range tp.Findings {
		f := tf.Finding
		f.Experiment = tf.experiment()
		findings = append(findings, f)
	}
	eng := engine(c, rp)
	var workers []*testkit.Replayer
	var mu sync.Mutex
	if c.workers {
		eng.Workers = func(context.Context) (verify.Session, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(workers) == len(tp.Workers) {
				t.Fatalf("%s: the engine opened more than the %d worker sessions recorded (re-record with -record)", c.tape, len(tp.Workers))
			}
			w := newReplayer(t, fmt.Sprintf("%s worker %d", c.tape, len(workers)+1), tp.Workers[len(workers)])
			workers = append(workers, w)
			return replayedSession{w}, nil
		}
		if c.pool {
			eng.Pool = func(context.Context, int) (func(context.Context) (verify.Session, error), func(), error) {
				return eng.Workers, func() {}, nil
			}
		}
	}
	if c.admit {
		for i, calls := range tp.Workers {
			workers = append(workers, newReplayer(t, fmt.Sprintf("%s worker %d", c.tape, i+1), calls))
		}
		connector := func(list [][]attempt) func(context.Context) (verify.Session, error) {
			next := make([]int, len(list))
			return func(ctx context.Context) (verify.Session, error) {
				i, _ := verify.ClientOf(ctx)
				mu.Lock()
				defer mu.Unlock()
				if i >= len(list) || next[i] >= len(list[i]) {
					return nil, verify.ErrRecordingEnded
				}
				a := list[i][next[i]]
				next[i]++
				switch {
				case a.Cut:
					return nil, verify.ErrRecordingEnded
				case a.Err != nil:
					return nil, a.Err.Err()
				}
				return replayedSession{workers[a.Worker]}, nil
			}
		}
		eng.Admit = func(context.Context, int) (*verify.Admitted, error) {
			return &verify.Admitted{Connect: connector(tp.Admitted), Close: func() {},
				Pool: func(context.Context, int) (func(context.Context) (verify.Session, error), func(), error) {
					return connector(tp.Pooled), func() {}, nil
				}}, nil
		}
	}
	// The clock of the kinds timed from pgmedic's side: a millisecond
	// per call sent, so a replayed loop of round trips takes what it sent,
	// and the server time each call took when it was recorded (tapes
	// recorded since calls carry it), so a statement timed alone (a
	// VACUUM) takes what it took.
	eng.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n, took := rp.Sent(), rp.Elapsed()
		for _, w := range workers {
			n += w.Sent()
			took += w.Elapsed()
		}
		return time.Unix(0, 0).Add(time.Duration(n)*time.Millisecond + took)
	}
	eng.Sleep = func(context.Context, time.Duration) {} // the recordings answer at once
	out, skipped := eng.Run(context.Background(), snap, findings)
	switch {
	case c.busy && rp.Sent() != 0:
		t.Fatalf("%s: the engine sent %d statements to a busy server", c.tape, rp.Sent())
	case !c.busy && !rp.Done():
		t.Fatalf("%s: the engine sent fewer than the %d recorded statements (re-record with -record)", c.tape, len(rp.Calls))
	case len(workers) != len(tp.Workers):
		t.Fatalf("%s: the engine opened %d worker sessions, the tape holds %d (re-record with -record)", c.tape, len(workers), len(tp.Workers))
	}
	var b strings.Builder
	b.WriteString(rp.Transcript())
	// Each worker's statements in the order it sent them; between
	// workers the order is the scheduler's, so it is not compared.
	for i, w := range workers {
		if !w.Done() {
			t.Fatalf("%s: worker %d sent fewer than its %d recorded statements (re-record with -record)", c.tape, i+1, len(tp.Workers[i]))
		}
		fmt.Fprintf(&b, "worker %d:\n", i+1)
		for _, line := range strings.Split(strings.TrimRight(w.Transcript(), "\n"), "\n") {
			b.WriteString("  " + line + "\n")
		}
	}
	for _, f := range out {
		v := f.Verification
		fmt.Fprintf(&b, "finding %s (%s): %s\n", f.Rule, f.Severity, oneLine(f.Title))
		fmt.Fprintf(&b, "  verification: %s", v.Status)
		if v.Before != nil && v.After != nil {
			fmt.Fprintf(&b, ", %v %s -> %v %s", v.Before.Value, v.Before.Unit, v.After.Value, v.After.Unit)
		}
		b.WriteString("\n")
		if v.Method != "" {
			fmt.Fprintf(&b, "  method: %s\n", oneLine(v.Method))
		}
		if v.Reason != "" {
			fmt.Fprintf(&b, "  reason: %s\n", oneLine(v.Reason))
		}
		if len(v.Parameters) > 0 {
			fmt.Fprintf(&b, "  parameters: %s\n", strings.Join(v.Parameters, ", "))
		}
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "  evidence: %s = %v %s\n", e.Label, e.Value, e.Unit)
		}
		if f.Fix.SQL != "" {
			fmt.Fprintf(&b, "  fix: %s\n", oneLine(f.Fix.SQL))
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(&b, "skipped %s: %s\n", s.Rule, s.Reason)
	}
	return b.String()
}

// recording holds the throwaway cluster -record uses, and the scenarios
// already prepared on it.
type recording struct {
	once    sync.Once
	cluster *lab.Cluster
	err     error
	envs    map[string]*scenario.Env
}

func (r *recording) close() {
	if r.cluster != nil {
		r.cluster.Destroy(context.Background())
	}
}

func (r *recording) record(t *testing.T, c tcase) *tape {
	ctx := context.Background()
	r.once.Do(func() {
		r.cluster, r.err = lab.Create(ctx, lab.Options{})
		r.envs = map[string]*scenario.Env{}
	})
	if r.err != nil {
		t.Fatalf("recording needs a PostgreSQL 15 cluster: %v", r.err)
	}
	s, err := scenario.Find(c.scenario)
	if err != nil {
		t.Fatal(err)
	}
	env := r.envs[c.scenario]
	cluster := r.cluster
	if s.OwnCluster {
		// A scenario that sets what is the whole server's (autovacuum's
		// throttle) gets a cluster of its own, as the lab gives it.
		own, err := lab.Create(ctx, lab.Options{Config: strings.Join(s.ServerConfig, "\n")})
		if err != nil {
			t.Fatalf("scenario %s needs a cluster of its own: %v", s.Name, err)
		}
		defer own.Destroy(context.Background())
		cluster, env = own, nil
	}
	// A workload that runs while check samples (an N+1 loop) runs while
	// the snapshot is collected, and stops before the experiment.
	stopWorkload := func() {}
	switch {
	case s.DuringCheck:
		if env, err = scenario.Setup(ctx, cluster, s, t.Logf); err != nil {
			t.Fatal(err)
		}
		if s.PgBouncer != nil {
			b, err := env.StartBouncer(ctx, cluster, s)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Stop()
		}
		// Collected once the workload is under way, as check is in the
		// lab: the import's checkpoints counted, every autovacuum worker
		// on a table.
		cancel, done, err := env.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		stopWorkload = func() {
			cancel()
			<-done
		}
		defer func() { stopWorkload() }()
	case env == nil:
		if env, err = scenario.Prepare(ctx, cluster, s, t.Logf); err != nil {
			t.Fatal(err)
		}
		if !s.OwnCluster {
			r.envs[c.scenario] = env
		}
	}
	if len(c.setup) > 0 {
		admin, err := env.Admin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range c.setup {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("setup: %s: %v", q, err)
			}
		}
		admin.Close(ctx)
	}
	sess, err := envelope.Connect(ctx, cluster.DSN(env.DB), envelope.Options{StatementTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	opts := collect.Defaults()
	opts.SampleFor = time.Second
	if d, err := time.ParseDuration(s.Sample); err == nil && s.Sample != "" {
		opts.SampleFor = d // the lock queues are seen across the scenario's sample
	}
	if env.Bouncer != nil {
		// Its pools are sampled with the sessions, as check --pgbouncer
		// samples them (pool-saturation reads them).
		b, err := envelope.ConnectBouncer(ctx, env.Bouncer.AdminDSN(), envelope.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		opts.Bouncer, opts.BouncerVersion = b.Conn, b.Version
	}
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.LogsThroughCollector() {
		// check reads such a cluster's log before the rules run.
		snap.Logged = serverLogEvents(ctx, t, sess.Conn)
	}
	stopWorkload()
	stopWorkload = func() {}
	selected, _ := rules.Select(nil)
	all, _ := rules.Run(snap, selected)
	tp := &tape{Scenario: c.scenario, Snapshot: trim(snap, c.kinds), Twin: c.twin}
	if c.twin {
		// The engine on a twin sees the twin's sessions, not the
		// target's (as diagnose's twinSnapshot gives it): none busy.
		tp.Snapshot.Activity = model.Activity{MaxConnections: snap.Activity.MaxConnections}
	}
	for _, f := range all {
		if f.Experiment == nil || !c.kinds[f.Experiment.Kind] {
			continue
		}
		exp := *f.Experiment
		if c.query != "" && exp.Query != "" {
			exp.Query, exp.Stmt = c.query, nil
		}
		f.Experiment = nil
		tp.Findings = append(tp.Findings, taped(f, &exp))
	}
	if len(tp.Findings) == 0 {
		t.Fatalf("the rules produced no finding with an experiment of kind %v on %s", c.kinds, c.scenario)
	}
	// The engine gets what the replay will get: the findings and
	// snapshot as the tape holds them.
	b, _ := json.Marshal(tp)
	var in tape
	json.Unmarshal(b, &in)
	var findings []model.Finding
	for _, tf := range in.Findings {
		f := tf.Finding
		f.Experiment = tf.experiment()
		findings = append(findings, f)
	}
	rec := &testkit.Recorder{Conn: sess.Conn}
	eng := engine(c, rec)
	var workers []*recordedSession
	var mu sync.Mutex
	// keep makes a session a recorded worker; it returns its index.
	keep := func(conn *pgx.Conn) (*recordedSession, int) {
		w := &recordedSession{Recorder: &testkit.Recorder{Conn: conn}, conn: conn}
		mu.Lock()
		defer mu.Unlock()
		workers = append(workers, w)
		return w, len(workers) - 1
	}
	if c.workers {
		eng.Workers = func(ctx context.Context) (verify.Session, error) {
			conn, err := pgx.Connect(ctx, cluster.DSN(env.DB))
			if err != nil {
				return nil, err
			}
			w, _ := keep(conn)
			return w, nil
		}
		if c.pool {
			if env.Bouncer != nil {
				env.Bouncer.Stop() // the workload's, in the directory a new one takes
			}
			eng.Pool = func(ctx context.Context, size int) (func(context.Context) (verify.Session, error), func(), error) {
				b, err := cluster.StartPgBouncer(ctx, lab.BouncerOptions{PoolSize: size, Mode: "transaction"})
				if err != nil {
					return nil, nil, err
				}
				cfg, err := pgx.ParseConfig(b.DSN(cluster.Superuser, env.DB))
				if err != nil {
					b.Stop()
					return nil, nil, err
				}
				cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
				return func(ctx context.Context) (verify.Session, error) {
					conn, err := pgx.ConnectConfig(ctx, cfg)
					if err != nil {
						return nil, err
					}
					w, _ := keep(conn)
					return w, nil
				}, b.Stop, nil
			}
		}
	}
	if c.admit {
		var attempts sync.Mutex
		// recorded wraps a connector of the role: each attempt kept as
		// its client's, each session a worker.
		recorded := func(list *[][]attempt, dial func(context.Context) (*pgx.Conn, error)) func(context.Context) (verify.Session, error) {
			return func(ctx context.Context) (verify.Session, error) {
				i, _ := verify.ClientOf(ctx)
				conn, err := dial(ctx)
				attempts.Lock()
				defer attempts.Unlock()
				for len(*list) <= i {
					*list = append(*list, nil)
				}
				switch {
				case err != nil && ctx.Err() != nil:
					(*list)[i] = append((*list)[i], attempt{Cut: true})
					return nil, err
				case err != nil:
					(*list)[i] = append((*list)[i], attempt{Err: testkit.ErrOf(err)})
					return nil, err
				}
				w, n := keep(conn)
				(*list)[i] = append((*list)[i], attempt{Worker: n})
				return w, nil
			}
		}
		eng.Admit = func(ctx context.Context, limit int) (*verify.Admitted, error) {
			admin, err := pgx.Connect(ctx, cluster.DSN(env.DB))
			if err != nil {
				return nil, err
			}
			connect, pool, drop, err := twin.AdmitOn(ctx, cluster, admin, env.DB, limit)
			if err != nil {
				admin.Close(ctx)
				return nil, err
			}
			return &verify.Admitted{Connect: recorded(&tp.Admitted, connect),
				Pool: func(ctx context.Context, size int) (func(context.Context) (verify.Session, error), func(), error) {
					dial, stop, err := pool(ctx, size)
					if err != nil {
						return nil, nil, err
					}
					return recorded(&tp.Pooled, dial), stop, nil
				},
				Close: func() { drop(); admin.Close(context.Background()) }}, nil
		}
	}
	if !c.busy {
		eng.Run(ctx, in.Snapshot, findings)
	}
	tp.Calls = rec.Calls
	for _, w := range workers {
		tp.Workers = append(tp.Workers, w.Calls)
	}
	return tp
}

// recordedSession is a worker session while recording: its calls kept,
// its connection closed at its end.
type recordedSession struct {
	*testkit.Recorder
	conn *pgx.Conn
}

func (s *recordedSession) Close(ctx context.Context) error { return s.conn.Close(ctx) }

// replayedSession is a worker session replayed from its tape: a
// verify.Replayed, so a reproduction's loop runs to the end of its recording
// and its statements take the time they took.
type replayedSession struct{ *testkit.Replayer }

func (replayedSession) Close(context.Context) error { return nil }
func (s replayedSession) Ended() bool               { return s.Done() }

// trim keeps what the engine reads of a snapshot: tables, indexes,
// columns, extensions, activity, statements, the jit and work_mem
// settings.
func trim(s *model.Snapshot, kinds map[string]bool) *model.Snapshot {
	out := &model.Snapshot{CollectedAt: s.CollectedAt, Server: s.Server, Database: s.Database, User: s.User,
		Tables: s.Tables, Indexes: s.Indexes, Columns: s.Columns, Extensions: s.Extensions, Activity: s.Activity,
		Settings: map[string]model.Setting{}}
	// The statements: a planner setting is tried on the top ones, and a
	// re-run with a stand-in is compared with its statement's mean.
	out.Statements = s.Statements
	for k, v := range s.Settings {
		// JIT's and work_mem for the re-runs; the page costs and block
		// size a vacuum throttle is timed with; max_wal_size, which
		// bounds a checkpoint experiment's batch.
		if strings.HasPrefix(k, "jit") || k == "work_mem" || strings.HasPrefix(k, "vacuum_cost_page_") || k == "block_size" || k == "max_wal_size" {
			out.Settings[k] = v
		}
	}
	return out
}

// TestTapesStayInTheEnvelope walks every recorded tape and checks the
// safety envelope on what the engine really sent on pgmedic's own
// connection (worker sessions exist on a twin or a lab database only,
// where the kinds that open them commit their claims and vacuum copies): each statement carries
// pgmedic's tag; every transaction is rolled back, none committed; and
// nothing is written except temporary objects pgmedic created (the copy
// of a table, the ordered keys) or the prepared statements it deallocates.
func TestTapesStayInTheEnvelope(t *testing.T) {
	paths, _ := filepath.Glob("testdata/tapes/*.json")
	if len(paths) == 0 {
		t.Fatal("no tapes in testdata/tapes")
	}
	kinds := map[string]bool{}
	for _, p := range paths {
		tp, err := readTape(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tp.Findings {
			kinds[f.Experiment.Kind] = true
		}
		for _, problem := range envelopeProblems(tp.Calls, tp.Twin) {
			t.Errorf("%s: %s", filepath.Base(p), problem)
		}
	}
	// Every kind has a tape (the kinds table names its transcript).
	for _, k := range verify.Kinds {
		// A transcript of another package's pipeline keeps its tape there
		// (diagnose's profile test checks its envelope).
		if !strings.HasPrefix(k.Transcript, "../") && !kinds[k.ID] {
			t.Errorf("no tape covers the %s experiment", k.ID)
		}
	}
}

var (
	explainRe = regexp.MustCompile(`^EXPLAIN \(([^)]*)\) (.*)$`)
	prepareRe = regexp.MustCompile(`^PREPARE (\w+)(?:\(.*?\))? AS (.*)$`)
	executeRe = regexp.MustCompile(`^EXECUTE (\w+)\(`)
	// quietPrepareRe is envelope's PREPARE inside a PL/pgSQL block that
	// traps its failure: the name and the query of its first attempt.
	quietPrepareRe = regexp.MustCompile(`^DO \$pgmedic\d+outer\$BEGIN BEGIN EXECUTE '/\* pgmedic \*/ PREPARE (\w+)(?:\(.*?\))? AS ' \|\| \$(pgmedic\d+)\$(.*?)\$pgmedic\d+\$`)
	// quietExplainRe is envelope's EXPLAIN inside a PL/pgSQL block that
	// traps its failure: the EXPLAIN it runs.
	quietExplainRe = regexp.MustCompile(`^DO \$pgmedic\d+outer\$DECLARE .*? BEGIN EXECUTE \$(pgmedic\d+)\$/\* pgmedic \*/ (EXPLAIN .*?)\$pgmedic\d+\$ INTO`)
	// quietRunRe is envelope's Run: an application's statement inside a
	// PL/pgSQL block that traps its failure.
	quietRunRe = regexp.MustCompile(`^DO \$pgmedic\d+outer\$DECLARE .*? EXECUTE \$(pgmedic\d+)\$/\* pgmedic \*/ (.*?)\$pgmedic\d+\$;`)
	// quietValueRe is envelope's Value: a query whose first value a
	// PL/pgSQL block that traps its failure reads.
	quietValueRe = regexp.MustCompile(`^DO \$pgmedic\d+outer\$DECLARE .*? EXECUTE \$(pgmedic\d+)\$/\* pgmedic \*/ (.*?)\$pgmedic\d+\$ INTO out;`)
	// relations pgmedic creates inside its rolled-back transactions: the
	// temporary copies, and pgmedic_hot, a plain table because a temporary
	// one writes no WAL, which the hot-update experiment measures (it runs
	// on a twin or a lab database only)
	temporary = map[string]bool{"pgmedic_copy": true, "pgmedic_keys": true, "pgmedic_hot": true}
)

// envelopeProblems lists what in a sequence of calls breaks the envelope;
// onTwin allows VACUUM, on the twin's own tables only.
func envelopeProblems(calls []call, onTwin bool) []string {
	var problems []string
	inTx := false
	prepared := map[string]*sqlparse.Statement{}
	for i, c := range calls {
		n := i + 1
		if !strings.HasPrefix(c.SQL, envelope.Tag) {
			problems = append(problems, fmt.Sprintf("call %d is not tagged: %s", n, c.SQL))
			continue
		}
		sql := oneLine(strings.TrimPrefix(c.SQL, envelope.Tag))
		switch {
		case strings.HasPrefix(sql, "BEGIN"):
			if inTx {
				problems = append(problems, fmt.Sprintf("call %d: BEGIN inside a transaction", n))
			}
			inTx = true
			continue
		case sql == "ROLLBACK":
			inTx = false
			continue
		case strings.HasPrefix(sql, "COMMIT") || strings.HasPrefix(sql, "END"):
			problems = append(problems, fmt.Sprintf("call %d commits: %s", n, sql))
			continue
		}
		if m := quietPrepareRe.FindStringSubmatch(sql); m != nil {
			st, err := sqlparse.Parse(m[3])
			if err != nil {
				problems = append(problems, fmt.Sprintf("call %d prepares what does not parse: %v", n, err))
				continue
			}
			prepared[m[1]] = st
			continue
		}
		if m := prepareRe.FindStringSubmatch(sql); m != nil {
			st, err := sqlparse.Parse(m[2])
			if err != nil {
				problems = append(problems, fmt.Sprintf("call %d prepares what does not parse: %v", n, err))
				continue
			}
			prepared[m[1]] = st
			continue
		}
		if m := quietExplainRe.FindStringSubmatch(sql); m != nil {
			sql = m[2]
		} else if m := quietRunRe.FindStringSubmatch(sql); m != nil {
			sql = m[2]
		} else if m := quietValueRe.FindStringSubmatch(sql); m != nil {
			sql = m[2]
		}
		if onTwin && !inTx && strings.HasPrefix(sql, "VACUUM ") {
			continue
		}
		if why := writes(sql, prepared); why != "" {
			problems = append(problems, fmt.Sprintf("call %d %s: %s", n, why, sql))
		} else if !inTx && writesTemporary(sql) {
			problems = append(problems, fmt.Sprintf("call %d writes a temporary object outside a transaction that is rolled back: %s", n, sql))
		}
	}
	if inTx {
		problems = append(problems, "a transaction is left open at the end")
	}
	return problems
}

// writesTemporary says whether a statement creates or fills one of
// pgmedic's temporary objects.
func writesTemporary(sql string) bool {
	for _, p := range []string{"CREATE ", "INSERT ", "ANALYZE "} {
		if strings.HasPrefix(sql, p) {
			return true
		}
	}
	return false
}

// writes says what a statement writes outside pgmedic's temporary
// objects, or "" when it writes nothing else. Writes to the temporary
// objects must happen inside a transaction (so they are rolled back).
func writes(sql string, prepared map[string]*sqlparse.Statement) string {
	onlyTemp := func(st *sqlparse.Statement) bool {
		sh := st.Shape()
		return sh.Command == "SELECT" || temporary[sh.Target.Name]
	}
	switch {
	case strings.HasPrefix(sql, "SET LOCAL "), strings.HasPrefix(sql, "SAVEPOINT "), strings.HasPrefix(sql, "ROLLBACK TO SAVEPOINT "),
		strings.HasPrefix(sql, "DEALLOCATE "):
		return ""
	case strings.HasPrefix(sql, "CREATE TEMP TABLE "):
		name := strings.Fields(strings.TrimPrefix(sql, "CREATE TEMP TABLE "))[0]
		if !temporary[name] {
			return "creates an unexpected temporary table " + name
		}
		return ""
	case strings.HasPrefix(sql, "CREATE TABLE pgmedic_hot "):
		return ""
	case strings.HasPrefix(sql, "CREATE TEMP SEQUENCE "), strings.HasPrefix(sql, "ALTER SEQUENCE "), strings.HasPrefix(sql, "ALTER TABLE "):
		// A key widened on a copy: the copy's column, a sequence of pg_temp.
		f := strings.Fields(sql)
		name := strings.TrimPrefix(f[2], "pg_temp.")
		if f[1] == "TEMP" {
			name = f[3]
		}
		if !temporary[name] {
			return "changes " + name + ", not a temporary copy"
		}
		return ""
	case strings.HasPrefix(sql, "CREATE STATISTICS "):
		// Extended statistics on a copy: the object lives in pg_temp
		// and reads the copy only.
		from := strings.Fields(sql[strings.LastIndex(sql, " FROM ")+len(" FROM "):])
		if !strings.HasPrefix(sql, "CREATE STATISTICS pg_temp.") || len(from) != 1 || !temporary[from[0]] {
			return "creates statistics outside pgmedic's temporary copies"
		}
		return ""
	case strings.HasPrefix(sql, "CREATE INDEX ON "), strings.HasPrefix(sql, "CREATE UNIQUE INDEX ON "):
		name := strings.Fields(strings.SplitN(sql, " ON ", 2)[1])[0]
		if !temporary[name] {
			return "builds an index on " + name + ", not a copy"
		}
		return ""
	case strings.HasPrefix(sql, "ANALYZE "):
		name := strings.Fields(sql)[len(strings.Fields(strings.SplitN(sql, " (", 2)[0]))-1]
		if !temporary[name] {
			return "builds or analyses " + name + ", not a temporary copy"
		}
		return ""
	}
	executed := sql
	if m := explainRe.FindStringSubmatch(sql); m != nil {
		if !strings.Contains(m[1], "ANALYZE") {
			return "" // planned, not executed
		}
		executed = m[2]
	}
	{
		if e := executeRe.FindStringSubmatch(executed); e != nil {
			st := prepared[e[1]]
			if st == nil {
				return "executes an unknown prepared statement " + e[1]
			}
			if !onlyTemp(st) {
				return "executes a data-changing statement on a real table"
			}
			return ""
		}
		sql = executed
	}
	st, err := sqlparse.Parse(sql)
	if err != nil {
		return "sends what does not parse"
	}
	if !onlyTemp(st) {
		return "changes data in " + st.Shape().Target.Name
	}
	if k := st.Kind(); k != "SelectStmt" && k != "InsertStmt" && !(k == "UpdateStmt" && st.Shape().Target.Name == "pgmedic_hot") {
		return "runs a " + st.Kind()
	}
	return ""
}

// TestEnvelopeProblemsFound checks the envelope check itself: each broken
// transcript below must be caught.
func TestEnvelopeProblemsFound(t *testing.T) {
	tag := envelope.Tag
	for name, calls := range map[string][]string{
		"untagged":       {"SELECT 1"},
		"committed":      {tag + "BEGIN READ WRITE", tag + "COMMIT"},
		"left open":      {tag + "BEGIN READ ONLY", tag + "SELECT 1"},
		"real table":     {tag + "BEGIN READ WRITE", tag + "INSERT INTO orders SELECT 1", tag + "ROLLBACK"},
		"real index":     {tag + "BEGIN READ WRITE", tag + "CREATE INDEX ON orders (id)", tag + "ROLLBACK"},
		"analyze update": {tag + "BEGIN READ ONLY", tag + "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE orders SET a = 1", tag + "ROLLBACK"},
		"prepared update": {tag + "PREPARE pgmedic_verify(integer) AS UPDATE orders SET a = $1", tag + "BEGIN READ ONLY",
			tag + "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pgmedic_verify(1)", tag + "ROLLBACK"},
		"temp outside":               {tag + "CREATE TEMP TABLE pgmedic_copy (LIKE orders)", tag + "INSERT INTO pgmedic_copy SELECT * FROM orders"},
		"other temp":                 {tag + "BEGIN READ WRITE", tag + "CREATE TEMP TABLE audit (LIKE orders)", tag + "ROLLBACK"},
		"statistics on a real table": {tag + "BEGIN READ WRITE", tag + "CREATE STATISTICS pg_temp.pgmedic_stats (mcv) ON a, b FROM orders", tag + "ROLLBACK"},
		"vacuum of a target's table": {tag + "VACUUM (FREEZE) orders"},
		"altered real table":         {tag + "BEGIN READ WRITE", tag + "ALTER TABLE orders ALTER COLUMN id TYPE bigint", tag + "ROLLBACK"},
		"executed update": {tag + "PREPARE pgmedic_verify(integer) AS UPDATE orders SET a = $1", tag + "BEGIN READ ONLY",
			tag + "EXECUTE pgmedic_verify(1)", tag + "ROLLBACK"},
	} {
		var cs []call
		for _, q := range calls {
			cs = append(cs, call{SQL: q})
		}
		if p := envelopeProblems(cs, false); len(p) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
	ok := []call{{SQL: tag + "BEGIN READ WRITE"}, {SQL: tag + "CREATE TEMP TABLE pgmedic_copy (LIKE public.orders INCLUDING INDEXES)"},
		{SQL: tag + "INSERT INTO pgmedic_copy SELECT * FROM public.orders"}, {SQL: tag + "CREATE INDEX ON pgmedic_copy (a)"},
		{SQL: tag + "ANALYZE pgmedic_copy"}, {SQL: tag + "ROLLBACK"}}
	if p := envelopeProblems(ok, false); len(p) != 0 {
		t.Errorf("a copy experiment is flagged: %v", p)
	}
}

// serverLogEvents reads the lab server's log over the connection and
// counts its events, as check does before its rules.
func serverLogEvents(ctx context.Context, t *testing.T, conn envelope.Conn) *model.LogEvents {
	sl, skip := collect.ReadServerLog(ctx, conn, "", 16<<20)
	if skip != nil {
		t.Fatalf("reading the lab server's log: %s", skip.Reason)
	}
	sum, err := logs.Analyze(ctx, []logs.Source{{Name: "server:" + sl.Path, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(sl.Data)), nil
	}}}, logs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := sum.LogEvents()
	return &ev
}
