package replay_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/replay"
)

// captureConfig logs what a replay needs.
const captureConfig = `
log_parameter_max_length_on_error = -1
log_min_duration_statement = 0
log_connections = on
log_disconnections = on
`

// labDB makes a database with setup SQL in the cluster.
func labDB(t *testing.T, c *lab.Cluster, db, setup string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, setup, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
}

// captureOf reads the cluster's log from byte from on as a workload of
// database db, once the server has logged the sessions' ends.
func captureOf(t *testing.T, c *lab.Cluster, db string, from int64, sessions int) *capture.Workload {
	t.Helper()
	w, err := capture.Read(context.Background(), []logs.Source{logs.FileSource(labtest.LogSince(t, c, from, sessions), nil)}, capture.Options{Database: db})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestLab(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{Config: captureConfig})
	// The application's statements may fail as they failed at capture;
	// pgmedic's own (the copies, the guards, the resets) never do.
	defer labtest.NoOwnErrors(t, c, labtest.LogSize(c))
	t.Run("queue poll before and after its partial index", func(t *testing.T) { queueCase(t, c) })
	t.Run("errors, deadlocks and aborted transactions replay to the end", func(t *testing.T) { errorsCase(t, c) })
	t.Run("connection storm: JIT on and off, a pool of 6 and of 2", func(t *testing.T) { stormCase(t, c) })
	t.Run("a stop ends every session", func(t *testing.T) { stopCase(t, c) })
	t.Run("an A/B never writes the database it names", func(t *testing.T) { untouchedCase(t, c) })
}

// untouchedCase: an A/B whose side B adds an index and whose sessions
// insert and delete rows leaves the database the DSN names as it was:
// each run replays into a copy. A role that cannot copy the database is
// refused before anything is written.
func untouchedCase(t *testing.T, c *lab.Cluster) {
	ctx := context.Background()
	labDB(t, c, "untouched", `CREATE TABLE items (id int PRIMARY KEY, v text);
		INSERT INTO items SELECT g, 'x' FROM generate_series(1, 500) g;
		CREATE ROLE copier LOGIN CREATEDB; CREATE ROLE plain LOGIN;
		GRANT ALL ON items TO plain; ALTER TABLE items OWNER TO copier;`)
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "ALTER DATABASE untouched OWNER TO copier"); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		conn, err := pgx.Connect(ctx, c.DSN("untouched"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var rows, indexes, tables int
		var sum int64
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM items), (SELECT coalesce(sum(id), 0) FROM items),
			(SELECT count(*) FROM pg_indexes WHERE schemaname = 'public'), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&rows, &sum, &indexes, &tables); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d rows (ids summing to %d), %d indexes, %d tables", rows, sum, indexes, tables)
	}
	before := state()
	w := &capture.Workload{Duration: time.Second, Shapes: []capture.Shape{{Fingerprint: "w", Query: "INSERT INTO items VALUES ($1, $2)"}}}
	for i := 0; i < 2; i++ {
		w.Sessions = append(w.Sessions, &capture.Session{ID: fmt.Sprint(i), User: "copier", End: time.Second, Statements: []capture.Statement{
			{SQL: fmt.Sprintf("INSERT INTO items VALUES (%d, 'new')", 1000+i)},
			{At: 100 * time.Millisecond, SQL: fmt.Sprintf("DELETE FROM items WHERE id = %d", 10+i)},
			{At: 200 * time.Millisecond, SQL: "SELECT count(*) FROM items WHERE v = 'new'"},
		}})
	}
	w.Statements = 6
	o := replay.Options{Speed: 0, Timeout: time.Minute}
	for _, role := range []string{"copier", "plain"} {
		srv, err := replay.OpenServer(ctx, c.UserDSN(role, "untouched"))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := srv.Side(replay.SideOptions{Name: "as is"})
		b, _ := srv.Side(replay.SideOptions{Name: "index", Apply: []string{"CREATE INDEX ON items (v)"}})
		cmp, err := replay.Compare(ctx, w, a, b, 2, o)
		switch {
		case role == "copier" && err != nil:
			t.Fatalf("a role that may copy the database: %v", err)
		case role == "copier" && (len(cmp.A.Runs) != 2 || cmp.A.Runs[0].Errors+cmp.B.Runs[0].Errors > 0):
			t.Fatalf("the replay on copies did not run whole: %+v", cmp.A.Runs)
		case role == "plain" && (err == nil || !strings.Contains(err.Error(), "CREATEDB") || !strings.Contains(err.Error(), "nothing was written")):
			t.Fatalf("a role that cannot copy the database was not refused as it should be: %v", err)
		}
		if after := state(); after != before {
			t.Fatalf("as %s, the A/B changed the database it names: %s before, %s after", role, before, after)
		}
	}
	var left int
	admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname LIKE 'pgmedic_replay_%'").Scan(&left)
	if left != 0 {
		t.Fatalf("%d copies were left on the server", left)
	}
}

// stopCase: four sessions in a long statement; cancelling the replay
// (Ctrl-C) returns at once, and no session of the replay is left on the
// server.
func stopCase(t *testing.T, c *lab.Cluster) {
	w := &capture.Workload{Duration: 10 * time.Second, Shapes: []capture.Shape{{Fingerprint: "sleep", Query: "SELECT pg_sleep($1)"}}}
	for i := 0; i < 4; i++ {
		w.Sessions = append(w.Sessions, &capture.Session{ID: fmt.Sprint(i), End: 10 * time.Second,
			Statements: []capture.Statement{{SQL: "SELECT pg_sleep(10)"}, {At: time.Second, SQL: "SELECT 1"}}})
	}
	w.Statements = 8
	labDB(t, c, "stopdb", "SELECT 1")
	srv, err := replay.OpenServer(context.Background(), c.DSN("stopdb"))
	if err != nil {
		t.Fatal(err)
	}
	side, _ := srv.Side(replay.SideOptions{Name: "as is"})
	tg, err := side.Open(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	started := time.Now()
	r, err := replay.Run(ctx, w, replay.Options{Speed: 1, Connect: tg.Connect})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(started); took > 8*time.Second || r.Stopped != "interrupted" || r.NotRun != 8 {
		t.Fatalf("stopped after %v: %q, %d not run of 8", took, r.Stopped, r.NotRun)
	}
	conn, err := pgx.Connect(context.Background(), c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for deadline := time.Now().Add(5 * time.Second); ; {
		var n int
		conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", replay.AppName).Scan(&n)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of the replay are still on the server", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The UK coronavirus dashboard's cascade: a statement of a millisecond
// that JIT compiles for a hundred, clients that give up after a timeout.
// The database's JIT thresholds are lowered so that a small lab table
// takes JIT's path, as a large plan's cost does on the defaults.
// stormQuery takes a millisecond to run, and JIT's compilation with
// inlining and optimisation on top.
const stormQuery = `SELECT k, sum(x * y), avg(x + y) FROM big WHERE id BETWEEN $1 AND $1 + 200 GROUP BY k`

func stormCase(t *testing.T, c *lab.Cluster) {
	labtest.CPUHeavy(t)
	ctx := context.Background()
	labDB(t, c, "storm", `CREATE TABLE big (id int PRIMARY KEY, k int, x float8, y float8);
		INSERT INTO big SELECT g, g % 50, random(), random() FROM generate_series(1, 100000) g;
		ANALYZE big;
		ALTER DATABASE storm SET jit_above_cost = 10;
		ALTER DATABASE storm SET jit_inline_above_cost = 10;
		ALTER DATABASE storm SET jit_optimize_above_cost = 10;`)
	conn, err := pgx.Connect(ctx, c.DSN("storm"))
	if err != nil {
		t.Fatal(err)
	}
	var jit string
	conn.QueryRow(ctx, "SELECT pg_jit_available()::text").Scan(&jit)
	if jit != "true" {
		conn.Close(ctx)
		t.Skip("this server has no JIT (embedded-postgres builds lack LLVM)")
	}
	// The clients' timeout is set from what one call costs here, alone
	// (compilation included): two and a half times it. One call at a time
	// per core then finishes in time; three at a time per core (a pool of
	// 6 on 2 cores) do not. A slower or busier machine moves both alike.
	var alone []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		rows, err := conn.Query(ctx, stormQuery, 1+i*700)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		alone = append(alone, time.Since(start))
	}
	conn.Close(ctx)
	slices.Sort(alone)
	timeout := min(max(alone[2]*5/2, 100*time.Millisecond), 3*time.Second)
	t.Logf("one call alone: %v; the clients' timeout: %v", alone[2], timeout)
	from := labtest.LogSize(c)
	const clients = 8
	// The clients cancel on the server at their timeout and keep their
	// connection (pgx would otherwise drop it), as the dashboard's did.
	cfg, err := pgx.ParseConfig(c.DSN("storm"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	labtest.ClientsConfig(t, cfg, clients, func(ctx context.Context, conn *pgx.Conn, i int) {
		for k := 0; k < 6; k++ {
			qctx, cancel := context.WithTimeout(ctx, timeout)
			rows, err := conn.Query(qctx, stormQuery, 1+(i*6+k)*500)
			if err == nil {
				rows.Close()
			}
			cancel()
			time.Sleep(alone[2])
		}
	})
	w := captureOf(t, c, "storm", from, clients)
	o := replay.Options{Speed: 1, StatementTimeout: timeout, Timeout: 2 * time.Minute}
	srv, err := replay.OpenServer(ctx, c.DSN("storm"))
	if err != nil {
		t.Fatal(err)
	}
	on, _ := srv.Side(replay.SideOptions{Name: "jit on"})
	off, _ := srv.Side(replay.SideOptions{Name: "jit off", Settings: map[string]string{"jit": "off"}})
	cmp, err := replay.Compare(ctx, w, on, off, 2, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jit off: %s; %v", cmp.Verdict, cmp.Why)
	if cmp.Verdict != replay.Faster || mean(cmp.B.Goodput) <= mean(cmp.A.Goodput) {
		t.Fatalf("jit off: %s, goodput %v -> %v: %v", cmp.Verdict, cmp.A.Goodput, cmp.B.Goodput, cmp.Why)
	}
	six, _ := srv.Side(replay.SideOptions{Name: "pool of 6", Pool: 6})
	two, _ := srv.Side(replay.SideOptions{Name: "pool of 2", Pool: 2})
	pc, err := replay.Compare(ctx, w, six, two, 2, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pool 6 -> 2: %s; %v", pc.Verdict, pc.Why)
	for _, r := range append(pc.A.Runs, pc.B.Runs...) {
		if r.Stopped != "" || r.Statements+r.NotRun != w.Statements {
			t.Fatalf("a pooled run did not account for every statement: %d sent, %d not run of %d (%s)", r.Statements, r.NotRun, w.Statements, r.Stopped)
		}
	}
	// A pool of the cores' number runs fewer compilations at once, so
	// fewer clients time out and the goodput the storm took is given
	// back. That holds while two calls at a time still fit in the
	// timeout. A run of the pool of 2 that lost a fifth of its calls was
	// slowed by the machine (other tests beside this one), not by the
	// pool: then its clients queue behind two busy connections past
	// their timeout, which a pool of 6 on the same busy machine partly
	// escapes, and no verdict, "slower" included, says anything about
	// the pool.
	for _, n := range pc.B.Errors {
		if n*5 > w.Statements {
			t.Logf("the machine was too busy for a pool of 2 to keep up in a run (%v of %d failed): no verdict required (%s)", pc.B.Errors, w.Statements, pc.Verdict)
			return
		}
	}
	// With no call of the pool of 6 timed out there was no storm to end
	// (the machine was slow enough that one call alone, measured at the
	// start, set a timeout six at once fit in): a pool of 2 then only
	// makes clients queue, and "slower" is the true verdict.
	if sum(pc.A.Errors) == 0 {
		t.Logf("no call of the pool of 6 timed out (goodput %v): no storm for a pool to end, no verdict required (%s)", pc.A.Goodput, pc.Verdict)
		return
	}
	if pc.Verdict == replay.Slower {
		t.Fatalf("pool 6 -> 2 called slower: %v", pc.Why)
	}
	// The timeout was calibrated on the machine as it was at the start.
	// A run of the pool of 6 with half the pool of 2's goodput had no
	// storm (the machine got calmer), and runs of the pool of 2 that
	// disagree by more than 2x were disturbed: either way the spread rule
	// rightly calls nothing.
	if slices.Max(pc.A.Goodput) > mean(pc.B.Goodput)/2 || slices.Max(pc.B.Goodput) > 2*slices.Min(pc.B.Goodput) {
		t.Logf("the machine changed under the comparison (goodput %v and %v): no verdict required", pc.A.Goodput, pc.B.Goodput)
		return
	}
	if pc.Verdict != replay.Faster || mean(pc.B.Goodput) <= mean(pc.A.Goodput) || sum(pc.B.Errors) >= sum(pc.A.Errors) {
		t.Fatalf("pool 6 -> 2: %s, goodput %v -> %v, failures %v -> %v: %v", pc.Verdict, pc.A.Goodput, pc.B.Goodput, pc.A.Errors, pc.B.Errors, pc.Why)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(max(1, len(xs)))
}

// The Channable poll: workers claim the oldest pending job among many
// done ones. Without an index on the pending jobs each poll reads the
// whole table.
func queueCase(t *testing.T, c *lab.Cluster) {
	// Its no-change control must see no change: a storm elsewhere on the
	// machine starting or ending between its runs would be one.
	labtest.CPUHeavy(t)
	ctx := context.Background()
	labDB(t, c, "queue", `CREATE TABLE jobs (id bigserial PRIMARY KEY, status text NOT NULL, created timestamptz NOT NULL, payload text);
		INSERT INTO jobs (status, created, payload) SELECT 'done', now() - interval '1 day' + g * interval '10 ms', md5(g::text) FROM generate_series(1, 80000) g;
		INSERT INTO jobs (status, created, payload) SELECT 'pending', now() + g * interval '10 ms', md5(g::text) FROM generate_series(1, 400) g;
		ANALYZE jobs;`)
	from := labtest.LogSize(c)
	labtest.Clients(t, c.DSN("queue"), 4, func(ctx context.Context, conn *pgx.Conn, i int) {
		for k := 0; k < 25; k++ {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			var id int64
			err = tx.QueryRow(ctx, `SELECT id FROM jobs WHERE status = 'pending' ORDER BY created LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id)
			if err == nil {
				_, err = tx.Exec(ctx, `UPDATE jobs SET status = 'done' WHERE id = $1`, id)
			}
			if err != nil && err != pgx.ErrNoRows {
				t.Error(err)
			}
			tx.Commit(ctx)
			time.Sleep(10 * time.Millisecond)
		}
	})
	w := captureOf(t, c, "queue", from, 4)
	if len(w.Sessions) != 4 || w.Statements < 4*25*3 {
		t.Fatalf("captured %d sessions, %d statements; want 4 and at least 300", len(w.Sessions), w.Statements)
	}
	srv, err := replay.OpenServer(ctx, c.DSN("queue"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Guard(ctx, nil, ""); err != nil || !srv.Fresh() {
		t.Fatalf("a lab cluster is refused (%v) or gets no fresh copies (%v)", err, srv.Fresh())
	}
	// The server the log came from is refused, lab or not.
	if err := srv.Guard(ctx, nil, c.DSN("postgres")); err == nil || !strings.Contains(err.Error(), "came from") {
		t.Fatalf("the source server was not refused: %v", err)
	}
	a, _ := srv.Side(replay.SideOptions{Name: "as is"})
	b, _ := srv.Side(replay.SideOptions{Name: "partial index", Apply: []string{`CREATE INDEX ON jobs (created) WHERE status = 'pending'`}})
	o := replay.Options{Speed: 0, Timeout: 2 * time.Minute}
	cmp, err := replay.Compare(ctx, w, a, b, 2, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("index: %s; %v", cmp.Verdict, cmp.Why)
	if cmp.Verdict != replay.Faster {
		t.Fatalf("verdict with the partial index = %q, want faster: %v", cmp.Verdict, cmp.Why)
	}
	poll := cmp.Shapes[0]
	if poll.Verdict != replay.Faster || poll.Ratio.High >= 0.5 {
		t.Fatalf("the poll's shape: %s, B/A %.2f [%.2f-%.2f]: %s", poll.Verdict, poll.Ratio.Value, poll.Ratio.Low, poll.Ratio.High, poll.Query)
	}
	// The control: a change that changes nothing.
	// Four runs a side whose every run of one side beats every run of the
	// other happen by chance once in 35 comparisons of two equal sides
	// (more often when other tests load the machine in bursts): a control
	// that moved is compared again, and a change the sides really differ
	// by moves twice.
	same, _ := srv.Side(replay.SideOptions{Name: "no change", Apply: []string{"SELECT 1"}})
	for try := 1; ; try++ {
		ctl, err := replay.Compare(ctx, w, a, same, 4, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("control, comparison %d: %s; %v", try, ctl.Verdict, ctl.Why)
		if ctl.Verdict == replay.NoChange {
			break
		}
		if try == 2 {
			t.Fatalf("verdict of no change = %q twice in a row: %v", ctl.Verdict, ctl.Why)
		}
	}
	// A DSN that names no sslmode is libpq's prefer: TLS if the server
	// offers it, else plain. The lab's server offers none; every session
	// must still connect, and the comparison must not be inconclusive.
	plain, ok := strings.CutSuffix(c.DSN("queue"), "?sslmode=disable")
	if !ok {
		t.Fatalf("the lab's DSN changed shape: %s", c.DSN("queue"))
	}
	psrv, err := replay.OpenServer(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := psrv.Side(replay.SideOptions{Name: "as is"})
	pb, _ := psrv.Side(replay.SideOptions{Name: "no change", Apply: []string{"SELECT 1"}})
	pc, err := replay.Compare(ctx, w, pa, pb, 1, o)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Verdict == replay.Inconclusive || pc.A.Runs[0].ConnectFailed > 0 {
		t.Fatalf("sslmode prefer against a server without TLS: %s, %d sessions could not connect: %v", pc.Verdict, pc.A.Runs[0].ConnectFailed, pc.Why)
	}
}

// errorsCase: a unique violation inside a transaction (what follows it
// fails until the ROLLBACK), a deadlock between two sessions, a division
// by zero. The replay runs every session to its end and counts them.
func errorsCase(t *testing.T, c *lab.Cluster) {
	labDB(t, c, "errs", `CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO acct SELECT g, 100 FROM generate_series(1, 10) g;`)
	from := labtest.LogSize(c)
	var ready sync.WaitGroup
	ready.Add(2)
	labtest.Clients(t, c.DSN("errs"), 2, func(ctx context.Context, conn *pgx.Conn, i int) {
		first, second := 1, 2
		if i == 1 {
			first, second = 2, 1
		}
		conn.Exec(ctx, "BEGIN")
		conn.Exec(ctx, fmt.Sprintf("UPDATE acct SET balance = balance - 1 WHERE id = %d", first))
		ready.Done()
		ready.Wait()
		time.Sleep(100 * time.Millisecond)
		if _, err := conn.Exec(ctx, fmt.Sprintf("UPDATE acct SET balance = balance + 1 WHERE id = %d", second)); err != nil {
			conn.Exec(ctx, "ROLLBACK")
		} else {
			conn.Exec(ctx, "COMMIT")
		}
		conn.Exec(ctx, "BEGIN")
		conn.Exec(ctx, fmt.Sprintf("INSERT INTO acct VALUES (%d, 0)", 3+i))
		conn.Exec(ctx, "SELECT count(*) FROM acct")
		conn.Exec(ctx, "ROLLBACK")
		conn.Exec(ctx, "SELECT 1/0")
		conn.Exec(ctx, "SELECT sum(balance) FROM acct")
	})
	w := captureOf(t, c, "errs", from, 2)
	if w.Failed < 7 {
		t.Fatalf("captured %d failed statements, want the deadlock, 2 unique violations, 2 aborted and 2 divisions: %+v", w.Failed, w.Sessions)
	}
	srv, err := replay.OpenServer(context.Background(), c.DSN("errs"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := srv.Side(replay.SideOptions{Name: "as is"})
	tg, err := a.Open(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	r, err := replay.Run(context.Background(), w, replay.Options{Speed: 1, Connect: tg.Connect, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stopped != "" || r.NotRun != 0 || r.Statements != w.Statements {
		t.Fatalf("the replay did not run to its end: %d of %d statements, %d not run, stopped %q", r.Statements, w.Statements, r.NotRun, r.Stopped)
	}
	// The deadlock recurs when each session has taken its first row
	// before the other asks for it, 100 ms later as captured; a session
	// that connects late on a busy machine finds no one in its way. Either
	// way one at most, and the replay goes on to the end.
	if r.ErrorStates["23505"] != 2 || r.ErrorStates["25P02"] != 2 || r.ErrorStates["22012"] != 2 || r.ErrorStates["40P01"] > 1 {
		t.Fatalf("errors by state: %v", r.ErrorStates)
	}
	t.Logf("errors replayed: %v", r.ErrorStates)
}
