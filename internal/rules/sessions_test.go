package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// sampledSnapshot is a snapshot whose sampler saw the same backends in each
// of ticks samples.
func sampledSnapshot(ticks int, backends ...model.Backend) *model.Snapshot {
	s := &model.Snapshot{Database: "shop", ServerCores: 2, Activity: model.Activity{MaxConnections: 100},
		Sampling: &model.Sampling{Seconds: float64(ticks) / 10}}
	for i := 0; i < ticks; i++ {
		smp := model.ActivitySample{At: time.Unix(int64(i), 0)}
		for _, b := range backends {
			b.Database = "shop"
			smp.Backends = append(smp.Backends, b)
		}
		s.Sampling.Samples = append(s.Sampling.Samples, smp)
	}
	return s
}

// burning gives each backend a process that used msPerTick of CPU
// between samples (100 ms apart): 10 is a tenth of a core.
func burning(s *model.Snapshot, msPerTick float64) *model.Snapshot {
	for i := range s.Sampling.Samples {
		s.Sampling.Samples[i].At = time.Unix(0, 0).Add(time.Duration(i) * 100 * time.Millisecond)
		for j := range s.Sampling.Samples[i].Backends {
			s.Sampling.Samples[i].Backends[j].CPUMS = 1000 + float64(i)*msPerTick
		}
	}
	return s
}

// guessedCores marks the snapshot's core count as a guess (a remote
// server without --server-cores).
func guessedCores(s *model.Snapshot) *model.Snapshot {
	s.CoresGuessed = true
	return s
}

// readersBehindALock: a long report holds a lock, an ALTER waits for
// AccessExclusiveLock, six reads queue behind it. Active, none on CPU.
func readersBehindALock() []model.Backend {
	out := []model.Backend{
		{PID: 50, State: "active", Query: "SELECT region, sum(total) FROM orders GROUP BY region", XactMS: 60000, StateMS: 60000},
		{PID: 51, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{50}, Query: "ALTER TABLE orders ADD COLUMN note text", XactMS: 5000, StateMS: 5000,
			WaitsFor: "orders (AccessExclusiveLock)"},
	}
	for i := 0; i < 6; i++ {
		out = append(out, model.Backend{PID: 60 + i, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{51}, Query: "SELECT * FROM orders WHERE id = $1"})
	}
	return out
}

// writersOnIO: five sessions inserting, each waiting on WAL or the disk.
func writersOnIO() []model.Backend {
	waits := [][2]string{{"IO", "WALSync"}, {"LWLock", "WALWrite"}, {"IO", "DataFileWrite"}, {"IO", "WALWrite"}, {"LWLock", "WALWrite"}}
	var out []model.Backend
	for i, w := range waits {
		out = append(out, model.Backend{PID: 70 + i, State: "active", WaitType: w[0], Wait: w[1], Query: "INSERT INTO readings VALUES ($1, $2, $3)"})
	}
	return out
}

// sendingRows gives every backend a process that used msPerTick of CPU
// between samples, one second apart (sampledSnapshot's clock).
func sendingRows(s *model.Snapshot, msPerTick float64) *model.Snapshot {
	for i := range s.Sampling.Samples {
		for j := range s.Sampling.Samples[i].Backends {
			s.Sampling.Samples[i].Backends[j].CPUMS = 5000 + float64(i)*msPerTick
		}
	}
	return s
}

// abandoned records n sessions the server found abandoned over the window.
func abandoned(s *model.Snapshot, n int64) *model.Snapshot {
	s.Sampling.Delta.SessionsAbandoned = n
	return s
}

// exporter is a session sending a large result, waiting for its client.
var exporter = model.Backend{PID: 20, State: "active", WaitType: "Client", Wait: "ClientWrite", StateMS: 2500, Query: "SELECT * FROM invoices"}

// streamedExport is one statement streaming a result for ticks samples,
// 100 ms apart, on CPU but for waits samples in the middle, where it waited
// for its client (its buffers full); the backend works all along.
func streamedExport(ticks, waits int) *model.Snapshot {
	s := &model.Snapshot{Database: "shop", ServerCores: 2, Activity: model.Activity{MaxConnections: 100},
		Sampling: &model.Sampling{Seconds: float64(ticks) / 10}}
	for i := 0; i < ticks; i++ {
		at := time.Unix(0, 0).Add(time.Duration(i) * 100 * time.Millisecond)
		b := model.Backend{PID: 30, Database: "shop", State: "active", StateMS: 400 + float64(i)*100, XactMS: 400 + float64(i)*100,
			Query: "SELECT * FROM invoices", CPUMS: 1000 + float64(i)*80}
		if i >= ticks/2 && i < ticks/2+waits {
			b.WaitType, b.Wait = "Client", "ClientWrite"
		}
		s.Sampling.Samples = append(s.Sampling.Samples, model.ActivitySample{At: at, Backends: []model.Backend{b}})
	}
	return s
}

func TestSessionRules(t *testing.T) {
	holder := model.Backend{PID: 10, User: "app", App: "worker", State: "idle in transaction", Wait: "ClientRead", WaitType: "Client",
		StateMS: 4000, XactMS: 4100, LastMS: 2, Locks: []string{"public.accounts (RowExclusiveLock)"}, Query: "UPDATE accounts SET balance = balance - 5 WHERE id = 1"}
	waiter := func(pid int) model.Backend {
		return model.Backend{PID: pid, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{10}, Query: "UPDATE accounts SET balance = 0 WHERE id = 1"}
	}
	many := []model.Backend{}
	for i := 0; i < 20; i++ {
		many = append(many, model.Backend{PID: 100 + i, State: "active", Query: "SELECT count(*) FROM generate_series(1, 1e6)"})
	}
	quiet := []model.Backend{{PID: 1, State: "idle", Wait: "ClientRead", WaitType: "Client"}, {PID: 2, State: "active", Query: "SELECT 1"}}
	for _, c := range []struct {
		name     string
		s        *model.Snapshot
		want     map[string]model.Severity
		titleHas map[string]string
	}{
		{"a client idle in its transaction with a queue behind it", sampledSnapshot(5, holder, waiter(11), waiter(12)),
			map[string]model.Severity{IdleInTransactionID: model.Critical, LockContentionID: model.Info, ClientStallID: model.Info},
			map[string]string{IdleInTransactionID: "pid 10 (application worker, user app) sat idle in a transaction for 4.0 s holding locks on public.accounts (RowExclusiveLock); 2 sessions waited",
				LockContentionID: "behind pid 10", ClientStallID: "the database answered pid 10 (application worker, user app) in 2.0 ms; the client then kept the transaction open 4.1 s"}},
		{"a client that stopped reading its results, nobody waiting: the backend sent nothing", sendingRows(sampledSnapshot(4, exporter), 0),
			map[string]model.Severity{ClientStallID: model.Info}, map[string]string{ClientStallID: "waited 3.0 s for its client to read its results (ClientWrite) and sent nothing for 3.0 s"}},
		{"a client that stopped reading its results, sessions abandoned in the window", abandoned(sendingRows(sampledSnapshot(4, exporter), 0), 3),
			map[string]model.Severity{ClientStallID: model.Warning}, map[string]string{ClientStallID: "sent nothing for 3.0 s"}},
		{"a client that stopped reading its results with a writer waiting behind it", sendingRows(sampledSnapshot(4, exporter,
			model.Backend{PID: 21, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{20}, Query: "TRUNCATE invoices"}), 0),
			map[string]model.Severity{ClientStallID: model.Critical, LockContentionID: model.Critical}, map[string]string{ClientStallID: "1 session waited behind it"}},
		{"a client reading a large result at its own pace: the backend kept sending", sendingRows(sampledSnapshot(4, exporter), 4),
			map[string]model.Severity{ClientStallID: model.Info}, map[string]string{ClientStallID: "read its results slower than the server sent them"}},
		{"a client waited for to read on another host: not known whether it read", sampledSnapshot(4, exporter),
			map[string]model.Severity{ClientStallID: model.Info}, map[string]string{ClientStallID: "whether the client kept reading is not known"}},
		{"an export read as fast as the client can: the server waited for it in 2 samples of 20", streamedExport(20, 2),
			map[string]model.Severity{}, nil},
		{"twenty sessions on CPU on two cores, each getting a tenth of a core", burning(sampledSnapshot(5, many...), 10),
			map[string]model.Severity{ConnectionPressureID: model.Critical}, map[string]string{ConnectionPressureID: "20.0 sessions were on CPU on average (20 at the peak) on 2 cores and got 2.0 cores between them: each statement took 10.0x"}},
		{"twenty sessions on CPU of a remote server of unknown size: counted, not measured", guessedCores(sampledSnapshot(5, many...)),
			map[string]model.Severity{ConnectionPressureID: model.Info}, map[string]string{ConnectionPressureID: "was not measured"}},
		{"twenty sessions on CPU on two known cores, CPU time unreadable", sampledSnapshot(5, many...),
			map[string]model.Severity{ConnectionPressureID: model.Critical}, map[string]string{ConnectionPressureID: "each got at most 0.10 of a core"}},
		{"three sessions on CPU on two known cores, CPU time unreadable", sampledSnapshot(5, many[:3]...),
			map[string]model.Severity{}, nil},
		{"three sessions on CPU on two cores, each getting most of a core", burning(sampledSnapshot(5, many[:3]...), 60),
			map[string]model.Severity{}, nil},
		{"six readers queued behind a migration", sampledSnapshot(5, readersBehindALock()...),
			map[string]model.Severity{LockContentionID: model.Critical},
			map[string]string{LockContentionID: `schema change "ALTER TABLE orders ADD COLUMN note text" waited 5.0 s for AccessExclusiveLock on orders behind pid 50 running "SELECT region, sum(total) FROM orders GROUP BY region"; 6 sessions queued behind it`}},
		{"five writers waiting on WAL and I/O", burning(sampledSnapshot(5, writersOnIO()...), 5),
			map[string]model.Severity{}, nil},
		{"idle, healthy", sampledSnapshot(10, quiet...), map[string]model.Severity{}, nil},
		{"a short idle transaction alone", sampledSnapshot(3, model.Backend{PID: 3, State: "idle in transaction", Wait: "ClientRead", StateMS: 300, XactMS: 310, LastMS: 1}),
			map[string]model.Severity{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]model.Finding{}
			for _, check := range []func(*model.Snapshot) ([]model.Finding, []model.Skip){idleInTransaction, lockContention, clientStall, connectionPressure} {
				fs, _ := check(c.s)
				for _, f := range fs {
					got[f.Rule] = f
				}
			}
			for id, sev := range c.want {
				f, ok := got[id]
				if !ok {
					t.Errorf("no %s finding", id)
					continue
				}
				if f.Severity != sev {
					t.Errorf("%s: severity %v, want %v", id, f.Severity, sev)
				}
				if want := c.titleHas[id]; want != "" && !strings.Contains(f.Title, want) {
					t.Errorf("%s: title %q lacks %q", id, f.Title, want)
				}
			}
			for id := range got {
				if _, ok := c.want[id]; !ok {
					t.Errorf("unexpected %s: %s", id, got[id].Title)
				}
			}
		})
	}
	// The client's side of a stalled transaction pastes what idle-in-
	// transaction pastes: its own role, a timeout below the stall.
	snap := sampledSnapshot(5, holder, waiter(11), waiter(12))
	idle, _ := idleInTransaction(snap)
	stall, _ := clientStall(snap)
	const want = "ALTER ROLE app SET idle_in_transaction_session_timeout = '2s';"
	if len(idle) != 1 || len(stall) != 1 || idle[0].Fix.SQL != want || stall[0].Fix.SQL != want {
		t.Errorf("idle-in-transaction and client-stall fixes: %+v %+v", idle, stall)
	}
	// Nothing sampled: each rule says so, with the flag that samples.
	for _, check := range []func(*model.Snapshot) ([]model.Finding, []model.Skip){idleInTransaction, lockContention, clientStall, connectionPressure} {
		fs, skips := check(&model.Snapshot{})
		if len(fs) != 0 || len(skips) != 1 || !strings.Contains(skips[0].Fix, "--sample") {
			t.Errorf("without samples: %v %v", fs, skips)
		}
	}
}

// TestQueueBehindTheFirstWaiter: waiters for a row queue behind the first
// one (it holds the tuple lock); all of them count for the session at the
// head.
func TestQueueBehindTheFirstWaiter(t *testing.T) {
	holder := model.Backend{PID: 10, State: "idle in transaction", Wait: "ClientRead", StateMS: 5000, XactMS: 5000, LastMS: 1}
	first := model.Backend{PID: 11, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{10}}
	second := model.Backend{PID: 12, State: "active", WaitType: "Lock", Wait: "tuple", BlockedBy: []int{11}}
	third := model.Backend{PID: 13, State: "active", WaitType: "Lock", Wait: "tuple", BlockedBy: []int{11}}
	fs, _ := idleInTransaction(sampledSnapshot(3, holder, first, second, third))
	if len(fs) != 1 || fs[0].Severity != model.Critical || !strings.Contains(fs[0].Title, "3 sessions waited behind it") {
		t.Fatalf("%+v", fs)
	}
}

// TestPoolSaturation: clients waiting while every server connection is
// busy, in at least two samples, is a saturated pool; a pool with idle
// server connections, or no PgBouncer sampled, is not.
func TestPoolSaturation(t *testing.T) {
	pools := func(ps ...model.Pool) *model.Snapshot {
		s := &model.Snapshot{Sampling: &model.Sampling{PgBouncer: "PgBouncer 1.18.0"},
			Statements: []model.Statement{{Query: "SELECT slow()", Calls: 10, TotalExecMS: 1000, JIT: model.JITStats{GenerationMS: 500}}}}
		for i := 0; i < 3; i++ {
			s.Sampling.Pools = append(s.Sampling.Pools, model.PoolSample{Pools: ps})
		}
		return s
	}
	full := model.Pool{Database: "shop", User: "app", Mode: "transaction", ClActive: 2, ClWaiting: 10, SvActive: 2, MaxWaitMS: 1500}
	fs, _ := poolSaturation(pools(full))
	if len(fs) != 1 || fs[0].Severity != model.Critical || !strings.Contains(fs[0].Title, "up to 10 clients waited") ||
		!strings.Contains(fs[0].Impact.Summary, "JIT compilation (jit-overhead)") {
		t.Errorf("saturated: %+v", fs)
	}
	// The queue's cost sets the severity: a moment's queue (the lab's
	// roomy pool on a loaded machine) is info; a long mean wait, or a
	// longest wait of 100 ms, a warning.
	for _, c := range []struct {
		maxWait, waitMS float64
		want            model.Severity
	}{{32, 72 * 4.87, model.Info}, {32, 72 * 254, model.Warning}, {257, 72 * 254, model.Warning}, {40, 0, model.Info}} {
		brief := full
		brief.MaxWaitMS = c.maxWait
		s := pools(brief)
		s.Sampling.BouncerStats = []model.BouncerStat{{Database: "shop", Transactions: 72, WaitMS: c.waitMS}}
		if fs, _ := poolSaturation(s); len(fs) != 1 || fs[0].Severity != c.want {
			t.Errorf("longest wait %v ms, %v ms waited in all: %+v, want %v", c.maxWait, c.waitMS, fs, c.want)
		}
	}
	idle := full
	idle.SvIdle = 3
	if fs, _ := poolSaturation(pools(idle)); len(fs) != 0 {
		t.Errorf("a pool with idle server connections: %+v", fs)
	}
	if fs, skips := poolSaturation(&model.Snapshot{}); len(fs) != 0 || len(skips) != 1 || !strings.Contains(skips[0].Fix, "--pgbouncer") {
		t.Errorf("no PgBouncer: %v %v", fs, skips)
	}
}

// TestPressureBehindAPool: twenty sessions on CPU on two cores are a run
// queue, but when they are the server connections of a PgBouncer pool
// whose clients queue, the queue is the pool's: connection-pressure says
// so at info and names pool-saturation, whose finding stands; beside a
// pool smaller than the queue it is the server's own.
func TestPressureBehindAPool(t *testing.T) {
	var busy []model.Backend
	for i := 0; i < 20; i++ {
		busy = append(busy, model.Backend{PID: 100 + i, State: "active", Query: "SELECT report($1)"})
	}
	s := burning(sampledSnapshot(5, busy...), 10)
	fs, _ := connectionPressure(s)
	if len(fs) != 1 || fs[0].Severity != model.Critical {
		t.Fatalf("without a pool: %+v", fs)
	}
	s.Sampling.PgBouncer = "PgBouncer 1.18.0"
	for range s.Sampling.Samples {
		s.Sampling.Pools = append(s.Sampling.Pools, model.PoolSample{Pools: []model.Pool{{Database: "shop", User: "app", Mode: "transaction", ClActive: 20, ClWaiting: 60, SvActive: 20, MaxWaitMS: 900}}})
	}
	fs, _ = connectionPressure(s)
	if len(fs) != 1 || fs[0].Severity != model.Info || !strings.Contains(fs[0].Title, "see pool-saturation") || fs[0].Experiment != nil || !strings.Contains(fs[0].Fix.Summary, "size it to about") {
		t.Errorf("behind a saturated pool: %+v", fs)
	}
	if ps, _ := poolSaturation(s); len(ps) != 1 || ps[0].Severity < model.Warning {
		t.Errorf("pool-saturation: %+v", ps)
	}
	// A pool of two server connections cannot be twenty sessions on CPU:
	// the others connect directly, and the server's queue stands.
	for i := range s.Sampling.Pools {
		s.Sampling.Pools[i].Pools[0].SvActive = 2
	}
	fs, _ = connectionPressure(s)
	if len(fs) != 1 || fs[0].Severity != model.Critical || strings.Contains(fs[0].Title, "pool-saturation") {
		t.Errorf("beside a pool smaller than the queue: %+v", fs)
	}
}

// TestFromLogEvents: what a server log counted, judged with the session
// rules' ids; an ordinary log gives nothing.
func TestFromLogEvents(t *testing.T) {
	ids := func(fs []model.Finding) string {
		var s []string
		for _, f := range fs {
			s = append(s, f.Rule+":"+f.Severity.String())
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		ev   model.LogEvents
		want string
	}{
		{model.LogEvents{Connections: 100, PeakPerMinute: 40}, ""},
		{model.LogEvents{Connections: 3000, PeakPerMinute: 1200}, "connection-pressure:warning"},
		{model.LogEvents{TooManyClients: 4, PeakPerMinute: 100}, "connection-pressure:critical"},
		{model.LogEvents{LockWaits: 3, LockWaitMS: 4500}, "lock-contention:warning"},
		{model.LogEvents{LockWaits: 1, LockWaitMS: 200}, ""},
		{model.LogEvents{ClientsLost: 5, DuplicateKeys: 7, StatementTimeouts: 6}, "client-stall:warning"},
		{model.LogEvents{DuplicateKeys: 7}, ""},
		{model.LogEvents{PoolWaitTimeouts: 3, PoolLogins: 900}, "pool-saturation:warning"},
		{model.LogEvents{PoolWaitTimeouts: 40, PoolLogins: 900}, "pool-saturation:critical"},
		{model.LogEvents{PoolLogins: 900}, ""},
	} {
		if got := ids(runLog(LogInput{Events: c.ev, Name: "shop"})); got != c.want {
			t.Errorf("%+v: %q, want %q", c.ev, got, c.want)
		}
	}
}

// TestLogLockWaitsName: waits on a relation's lock (a schema change and
// the queue behind it) get the schema change's fix, not the row locks'.
func TestLogLockWaitsName(t *testing.T) {
	ddl := runLog(LogInput{Events: model.LogEvents{LockWaits: 6, RelationLockWaits: 5, LockWaitMS: 9000}, Name: "shop"})
	rows := runLog(LogInput{Events: model.LogEvents{LockWaits: 6, RelationLockWaits: 1, LockWaitMS: 9000}, Name: "shop"})
	if len(ddl) != 1 || !strings.Contains(ddl[0].Fix.Summary, "lock_timeout") || strings.Contains(ddl[0].Fix.Summary, "SKIP LOCKED") {
		t.Errorf("waits on a relation's lock: %+v", ddl)
	}
	if len(rows) != 1 || !strings.Contains(rows[0].Fix.Summary, "SKIP LOCKED") {
		t.Errorf("waits on rows: %+v", rows)
	}
}

// runLog runs every rule that reads a log, through the registry.
func runLog(in LogInput) []model.Finding {
	fs, _ := RunLog(in, nil)
	return fs
}

// TestFromLogMaintenance: checkpoints WAL volume started, and dead rows
// vacuum had to leave; quiet on checkpoints started by time and on
// vacuums that removed what they found.
func TestFromLogMaintenance(t *testing.T) {
	stuck := model.TableMaintenance{Table: "shop.public.jobs", Vacuums: 6, NotRemovable: 300000, RemainAt: 400000, LastNotRemovable: 250000}
	cleared := stuck
	cleared.LastNotRemovable = 0
	for _, c := range []struct {
		name string
		ev   model.LogEvents
		want string
	}{
		{"timed checkpoints", model.LogEvents{CheckpointsByTime: 12, CheckpointsByWAL: 1, CheckpointMedianIntervalS: 300}, ""},
		{"WAL checkpoints", model.LogEvents{CheckpointsByTime: 2, CheckpointsByWAL: 9, CheckpointMedianIntervalS: 70, CheckpointMeanDistanceKB: 600000, WALKBPerSecond: 9000, CheckpointSpanS: 600}, "checkpoint-pressure:warning"},
		{"too frequent, seconds apart", model.LogEvents{CheckpointsByWAL: 40, CheckpointsTooFrequent: 39, CheckpointMedianIntervalS: 4}, "checkpoint-pressure:critical"},
		{"one warning", model.LogEvents{CheckpointsByTime: 20, CheckpointsByWAL: 1, CheckpointsTooFrequent: 1}, "checkpoint-pressure:warning"},
		{"held back", model.LogEvents{Tables: []model.TableMaintenance{stuck}}, "table-bloat:warning"},
		{"held back, then cleared", model.LogEvents{Tables: []model.TableMaintenance{cleared}}, "table-bloat:info"},
		{"a few stuck rows", model.LogEvents{Tables: []model.TableMaintenance{{Table: "a.b.c", Vacuums: 3, NotRemovable: 5000, RemainAt: 9000}}}, ""},
		{"stuck rows, a small share of a big table", model.LogEvents{Tables: []model.TableMaintenance{{Table: "a.b.c", Vacuums: 3, NotRemovable: 20000, RemainAt: 9000000}}}, ""},
	} {
		fs := runLog(LogInput{Events: c.ev})
		var got []string
		for _, f := range fs {
			got = append(got, f.Rule+":"+f.Severity.String())
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: %v, want %q", c.name, got, c.want)
		}
	}
	// The size proposed: 9 MB/s is 2.6 GB per 5 minutes (a log does not
	// say the server's checkpoint_timeout: the default), times 1.9 is
	// 4.9 GB, rounded up; the log's checkpoints say max_wal_size is about
	// 1GB now.
	f := runLog(LogInput{Events: model.LogEvents{CheckpointsByWAL: 9, CheckpointMeanDistanceKB: 600000, WALKBPerSecond: 9000, CheckpointSpanS: 600}})[0]
	if !strings.Contains(f.Fix.SQL, "max_wal_size = '6GB'") || !strings.Contains(f.Fix.Summary, "from about 1GB") || !strings.Contains(f.Fix.Summary, "default checkpoint_timeout") {
		t.Errorf("fix: %s / %s", f.Fix.Summary, f.Fix.SQL)
	}
}

// TestFromLogMisestimates: a far-off estimate of a table the log never
// saw analyzed is stale-statistics, once per table; one analyzed
// recently is not.
func TestFromLogMisestimates(t *testing.T) {
	m := LogMisestimate{Table: "events", Node: "node #2 Seq Scan on events", Factor: 300000, Estimated: 1, Actual: 300000, Query: "SELECT count(*) FROM events WHERE kind = $1", LogHours: 0.2}
	analyzed := m
	analyzed.Analyzes = 2
	small := m
	small.Factor = 20
	fs := runLog(LogInput{Misestimates: []LogMisestimate{m, m, analyzed, small}})
	if len(fs) != 1 || fs[0].Rule != StaleStatisticsID || fs[0].Fix.SQL != "ANALYZE events;" || !strings.Contains(fs[0].Title, "12 minutes") {
		t.Fatalf("%+v", fs)
	}
	if fs := runLog(LogInput{Misestimates: []LogMisestimate{analyzed, small}}); len(fs) != 0 {
		t.Errorf("fired on %+v", fs[0].Title)
	}
}

// TestDDLQueueFix: the fix of a queue a schema change heads is the one for
// that statement and its lock, never the row-lock advice.
func TestDDLQueueFix(t *testing.T) {
	fs, _ := lockContention(sampledSnapshot(5, readersBehindALock()...))
	if len(fs) != 1 {
		t.Fatalf("%d findings", len(fs))
	}
	f := fs[0]
	for _, want := range []string{"lock_timeout", "retry"} {
		if !strings.Contains(f.Fix.Summary, want) {
			t.Errorf("fix %q lacks %q", f.Fix.Summary, want)
		}
	}
	if strings.Contains(f.Fix.Summary, "SKIP LOCKED") || strings.Contains(f.Fix.Summary, "consistent order") {
		t.Errorf("row-lock advice for a migration: %q", f.Fix.Summary)
	}
	if !strings.Contains(f.Fix.SQL, "SET lock_timeout = '2s'") || !strings.Contains(f.Fix.SQL, "ALTER TABLE orders ADD COLUMN note text;") || !strings.Contains(f.Fix.SQL, "pg_cancel_backend(50)") {
		t.Errorf("fix SQL %q", f.Fix.SQL)
	}
	if !strings.Contains(f.Impact.Summary, "reads included") || !strings.Contains(f.Impact.Summary, "pid 50") {
		t.Errorf("impact %q", f.Impact.Summary)
	}
	// A rewrite that holds its lock while it runs heads the queue too.
	rewrite := model.Backend{PID: 40, State: "active", Query: "ALTER TABLE orders ALTER COLUMN total TYPE numeric(14,2)", StateMS: 9000, XactMS: 9000}
	r1 := model.Backend{PID: 41, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{40}, Query: "SELECT * FROM orders WHERE id = $1"}
	r2 := r1
	r2.PID = 42
	fs, _ = lockContention(sampledSnapshot(5, rewrite, r1, r2))
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "has held AccessExclusiveLock on orders for 9.0 s; 2 sessions queued") ||
		!strings.Contains(fs[0].Fix.Summary, "backfill it in batches") {
		t.Errorf("a running rewrite: %+v", fs)
	}
	// A plain CREATE INDEX holding off the writers: the SQL to paste is
	// the concurrent build, with no lock_timeout (a concurrent build it
	// cancelled would leave an invalid index), never the build as
	// written under a timeout, which would repeat the incident.
	build := model.Backend{PID: 43, State: "active", Query: "CREATE INDEX slots_clinician_idx ON slots (clinician_id, starts_at)", StateMS: 4000, XactMS: 4000}
	wr := model.Backend{PID: 44, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{43}, Query: "UPDATE slots SET booked = true WHERE id = $1"}
	wr2 := wr
	wr2.PID = 45
	fs, _ = lockContention(sampledSnapshot(5, build, wr, wr2))
	if len(fs) != 1 || fs[0].Fix.SQL != "CREATE INDEX CONCURRENTLY slots_clinician_idx ON slots USING btree (clinician_id, starts_at);" {
		t.Errorf("a plain index build: %q", fs[0].Fix.SQL)
	}
	// A row-lock queue keeps its own advice.
	holder := model.Backend{PID: 10, State: "idle in transaction", StateMS: 5000, XactMS: 5000}
	w := model.Backend{PID: 11, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{10}, Query: "SELECT * FROM jobs WHERE state = 'new' LIMIT 1 FOR UPDATE"}
	fs, _ = lockContention(sampledSnapshot(5, holder, w))
	if len(fs) != 1 || !strings.Contains(fs[0].Fix.Summary, "SKIP LOCKED") || strings.Contains(fs[0].Fix.Summary, "lock_timeout") {
		t.Errorf("row-lock queue: %+v", fs)
	}
}

// TestDDLLocks: the lock each schema change takes, and the form of it
// that does not hold the table, follow PostgreSQL's documentation.
func TestDDLLocks(t *testing.T) {
	for _, c := range []struct{ sql, mode, fix string }{
		{"ALTER TABLE orders ADD COLUMN note text", "AccessExclusiveLock", "lock_timeout"},
		{"CREATE INDEX ON orders (customer_id)", "ShareLock", "CREATE INDEX CONCURRENTLY"},
		{"CREATE INDEX CONCURRENTLY ON orders (customer_id)", "ShareUpdateExclusiveLock", "lock_timeout"},
		{"ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (customer_id) REFERENCES customers (id)", "ShareRowExclusiveLock", "NOT VALID"},
		{"ALTER TABLE orders VALIDATE CONSTRAINT fk", "ShareUpdateExclusiveLock", "lock_timeout"},
		{"ALTER TABLE orders ALTER COLUMN total SET NOT NULL", "AccessExclusiveLock", "IS NOT NULL) NOT VALID"},
		{"ALTER TABLE orders ALTER COLUMN total TYPE numeric(14,2)", "AccessExclusiveLock", "backfill it in batches"},
		{"ALTER TABLE orders ADD PRIMARY KEY (id)", "AccessExclusiveLock", "CREATE UNIQUE INDEX CONCURRENTLY"},
		{"ALTER TABLE orders SET (fillfactor = 80)", "ShareUpdateExclusiveLock", "lock_timeout"},
		{"VACUUM FULL orders", "AccessExclusiveLock", "pg_repack"},
		{"REINDEX TABLE orders", "ShareLock", "CONCURRENTLY"},
		{"LOCK TABLE orders IN SHARE MODE", "ShareLock", "lock_timeout"},
		{"REFRESH MATERIALIZED VIEW daily", "AccessExclusiveLock", "CONCURRENTLY"},
		{"DROP INDEX orders_customer_idx", "AccessExclusiveLock", "DROP INDEX CONCURRENTLY"},
	} {
		st, err := sqlparse.Parse(c.sql)
		if err != nil {
			t.Fatal(err)
		}
		d := st.DDL()
		if d == nil {
			t.Errorf("%s: not read as a schema change", c.sql)
			continue
		}
		if got := migration.Lock(d); got != c.mode {
			t.Errorf("%s: %s, want %s", c.sql, got, c.mode)
		}
		if sum, _ := ddlFix(d, c.sql); !strings.Contains(sum, c.fix) {
			t.Errorf("%s: fix %q lacks %q", c.sql, sum, c.fix)
		}
	}
	for _, sql := range []string{"SELECT 1", "UPDATE orders SET total = 0", "CREATE TABLE t (id int)"} {
		if st, _ := sqlparse.Parse(sql); st.DDL() != nil {
			t.Errorf("%s read as a schema change", sql)
		}
	}
}

func TestHeldMode(t *testing.T) {
	for _, c := range []struct {
		locks []string
		want  string
	}{
		{[]string{"public.accounts (AccessShareLock)"}, "ACCESS SHARE"},
		{[]string{"public.accounts (AccessShareLock)", "public.accounts (RowExclusiveLock)", "public.other (ExclusiveLock)"}, "ROW EXCLUSIVE"},
		{[]string{"accounts (ShareUpdateExclusiveLock)"}, "SHARE UPDATE EXCLUSIVE"},
		{[]string{"public.other (AccessExclusiveLock)"}, ""},
		{nil, ""},
	} {
		if got := heldMode(c.locks, "accounts"); got != c.want {
			t.Errorf("heldMode(%v) = %q, want %q", c.locks, got, c.want)
		}
	}
}

// TestStaleStatisticsFromTheLog: an executed plan's scan estimated far
// off, of a table autoanalyze left alone while the log ran, is stale
// statistics; not when autoanalyze did run, and not when the scan's
// condition holds a parameter: a generic plan, estimated without the
// value, is as far off on skewed data with statistics analysed a minute
// ago.
func TestStaleStatisticsFromTheLog(t *testing.T) {
	scan := func(filter string) *plan.Explain {
		ex := &plan.Explain{HasAnalyze: true, Plan: plan.Node{NodeType: "Seq Scan", RelationName: "events", Schema: "public", Alias: "events",
			PlanRows: 50, ActualRows: 400000, ActualLoops: 1, Filter: filter}}
		ex.Derive()
		return ex
	}
	for _, c := range []struct {
		name     string
		ex       *plan.Explain
		analyzes int64
		unlogged bool
		want     bool
	}{
		{"custom plan, no autoanalyze", scan("(kind = 'click'::text)"), 0, false, true},
		{"custom plan, autoanalyze ran", scan("(kind = 'click'::text)"), 2, false, false},
		{"custom plan, a log without autovacuum's lines", scan("(kind = 'click'::text)"), 0, true, false},
		{"generic plan, no autoanalyze", scan("(kind = $1)"), 0, false, false},
		{"a dollar in a literal is no parameter", scan("(kind = 'US$'::text)"), 0, false, true},
	} {
		ms := ScanMisestimates(c.ex)
		if len(ms) != 1 {
			t.Fatalf("%s: %d misestimates, want 1", c.name, len(ms))
		}
		ms[0].Analyzes, ms[0].Unlogged, ms[0].LogHours = c.analyzes, c.unlogged, 1
		fs := runLog(LogInput{Misestimates: ms, Name: "the server log"})
		warned := false
		for _, f := range fired(fs, StaleStatisticsID) {
			warned = warned || f.Severity >= model.Warning
		}
		if got := warned; got != c.want {
			t.Errorf("%s: stale-statistics at warning %v, want %v", c.name, got, c.want)
		}
	}
}

// TestClaimChainIsTheClaimRace: workers running one queue claim (no SKIP
// LOCKED) queue behind the worker that claimed the row first. That chain
// is queue-claim-race's problem, not a second one: lock-contention says
// so at info; a chain of other statements behind a running head stays a
// warning.
func TestClaimChainIsTheClaimRace(t *testing.T) {
	const claim = "UPDATE seats SET held_by = $1 WHERE id = (SELECT id FROM seats WHERE held_by IS NULL ORDER BY id LIMIT $2) RETURNING id"
	chain := func(head, waiter string) []model.Backend {
		out := []model.Backend{{PID: 10, State: "active", Query: head, XactMS: 50, StateMS: 50}}
		for i := 0; i < 4; i++ {
			out = append(out, model.Backend{PID: 20 + i, State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{10}, Query: waiter})
		}
		return out
	}
	for _, c := range []struct {
		name         string
		head, waiter string
		want         model.Severity
	}{
		{"the claim behind the claim", claim, claim, model.Info},
		{"writers behind a running transfer", "UPDATE accounts SET balance = balance - 1 WHERE id = 1", "UPDATE accounts SET balance = balance + 1 WHERE id = 1", model.Warning},
	} {
		fs, _ := lockContention(sampledSnapshot(10, chain(c.head, c.waiter)...))
		if len(fs) != 1 {
			t.Fatalf("%s: %d findings", c.name, len(fs))
		}
		if fs[0].Severity < c.want || (c.want == model.Info && fs[0].Severity != model.Info) {
			t.Errorf("%s: %s, want %s: %s", c.name, fs[0].Severity, c.want, fs[0].Title)
		}
	}
}

// TestHeldLockWithAChangeBehind: an idle transaction holds ACCESS SHARE
// (it read the table), an ALTER waits for it, reads queue behind the
// ALTER. The reads would not wait for the idle transaction alone: the
// reproduction queues the ALTER between them.
func TestHeldLockWithAChangeBehind(t *testing.T) {
	s := sampledSnapshot(5,
		model.Backend{PID: 1, State: "idle in transaction", Query: "SELECT count(*) FROM orders", Locks: []string{"public.orders (AccessShareLock)"}},
		model.Backend{PID: 2, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{1}, Query: "ALTER TABLE orders ADD COLUMN note text"},
		model.Backend{PID: 3, State: "active", WaitType: "Lock", Wait: "relation", BlockedBy: []int{2}, Query: "SELECT total FROM orders WHERE id = $1"})
	s.Tables = []model.Table{{Schema: "public", Name: "orders"}}
	head := s.Sampling.Samples[0].Backends[0]
	exp := heldLockExperiment(s, head, map[int]bool{2: true, 3: true})
	if exp == nil || exp.Change != "ALTER TABLE orders ADD COLUMN note text" || exp.Waiter != "SELECT total FROM orders WHERE id = $1" || exp.HeadLock != "ACCESS SHARE" {
		t.Fatalf("the experiment: %+v", exp)
	}
}

// TestBurstJudgedByTime: a burst of 150 sessions (49 on CPU, the rest on
// LWLock:LockManager) on 2 cores lasts 9 s of a 14.5 s window; the sampler,
// slowed by the saturated server, took 7 of its 55 samples inside it. By
// samples the burst is a minority, by time a majority: it is a run queue.
func TestBurstJudgedByTime(t *testing.T) {
	s := &model.Snapshot{Database: "shop", ServerCores: 2, Activity: model.Activity{MaxConnections: 300},
		Sampling: &model.Sampling{Seconds: 14.5, IntervalMS: 100}}
	at := time.Unix(0, 0)
	add := func(n int, gap time.Duration, onCPU, onLock int) {
		for i := 0; i < n; i++ {
			smp := model.ActivitySample{At: at}
			for j := 0; j < onCPU+onLock; j++ {
				b := model.Backend{PID: 1000 + j, Database: "shop", State: "active", Query: "SELECT score($1)"}
				if j >= onCPU {
					b.WaitType, b.Wait = "LWLock", "LockManager"
				}
				smp.Backends = append(smp.Backends, b)
			}
			s.Sampling.Samples = append(s.Sampling.Samples, smp)
			at = at.Add(gap)
		}
	}
	add(30, 100*time.Millisecond, 1, 0)     // 3 s quiet
	add(7, 9*time.Second/7, 49, 100)        // the burst, sampled slowly
	add(18, 2500*time.Millisecond/18, 1, 0) // 2.5 s quiet again
	fs, _ := connectionPressure(s)
	if len(fs) != 1 || fs[0].Severity < model.Warning || !strings.Contains(fs[0].Title, "on 2 cores") {
		t.Fatalf("the burst: %+v", fs)
	}
	q := readRunQueue(s, 2)
	if q.ticksOver != 7 || q.overShare < 0.5 {
		t.Errorf("%d samples over, %.2f of the time", q.ticksOver, q.overShare)
	}
}
