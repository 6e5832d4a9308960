package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
)

// TestCheckTwin: a target without HypoPG and without --verify-indexes
// cannot prove the index it needs; with --twin the index is built and
// measured on a copy of the table in a throwaway cluster, the finding says
// where, and the target is left as it was: no row written (pg_stat_database)
// and no writing statement of pgmedic's in its pg_stat_statements.
func TestCheckTwin(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	root, db := freshDatabase(t, "twin_target")
	// Autovacuum analysing a table or a catalog during the check writes
	// pg_statistic rows, which pg_stat_database counts as this database's
	// writes: it is paused while the counters are compared.
	for _, q := range []string{"ALTER SYSTEM SET autovacuum = off", "SELECT pg_reload_conf()"} {
		if _, err := root.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		root.Exec(context.Background(), "ALTER SYSTEM RESET autovacuum")
		root.Exec(context.Background(), "SELECT pg_reload_conf()")
	})
	for _, q := range []string{
		"CREATE EXTENSION pg_stat_statements",
		"CREATE TABLE payments (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, merchant int NOT NULL, state text NOT NULL, cents bigint NOT NULL, created timestamptz NOT NULL)",
		"INSERT INTO payments (merchant, state, cents, created) SELECT g % 4000, (ARRAY['new','settled','refunded'])[1 + g % 3], g % 99999, now() - g * interval '1 s' FROM generate_series(1, 150000) g",
		"VACUUM ANALYZE payments",
		"CREATE TABLE outbox (id bigint PRIMARY KEY, body text NOT NULL, taken_by int, taken_at timestamptz)",
		"INSERT INTO outbox SELECT g, 'message ' || g FROM generate_series(1, 5000) g",
		"CREATE INDEX outbox_open_idx ON outbox (id) WHERE taken_at IS NULL",
		"VACUUM ANALYZE",
		"SELECT pg_stat_statements_reset()",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := 0; i < 20; i++ {
		rows, err := db.Query(ctx, "SELECT id, cents FROM payments WHERE merchant = $1 AND state = 'new'", 17+i)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	// A claim that picks rows without locking them, run by one worker here:
	// the race it allows shows only with several, on the twin.
	for i := 0; i < 10; i++ {
		if _, err := db.Exec(ctx, "UPDATE outbox o SET taken_by = $1, taken_at = now() FROM (SELECT id FROM outbox WHERE taken_at IS NULL ORDER BY id LIMIT 5) s WHERE o.id = s.id", i); err != nil {
			t.Fatal(err)
		}
	}
	// Counters reach pg_stat_database when a backend flushes its
	// statistics, up to a second after its statements: this session's
	// writes are flushed first, and pgmedic's sessions have ended.
	writes := func() (n int64) {
		db.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		db.QueryRow(ctx, "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = 'twin_target'").Scan(&n)
		return n
	}
	leftovers := len(lab.Leftovers())
	before := writes()
	tables := func() string {
		rows, _ := db.Query(ctx, "SELECT relname || ':' || (n_tup_ins+n_tup_upd+n_tup_del) FROM pg_stat_all_tables WHERE n_tup_ins+n_tup_upd+n_tup_del > 0 ORDER BY 1")
		out, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		return strings.Join(out, " ")
	}
	tablesBefore := tables()
	defer func() {
		if t.Failed() {
			t.Logf("DEBUG before: %s\nDEBUG after:  %s", tablesBefore, tables())
		}
	}()
	check := func(args ...string) (model.Verification, string) {
		t.Helper()
		code, out, errOut := run(t, append([]string{"check", cluster.DSN("twin_target"), "--format", "json", "--rules", "missing-index", "--sample", "0"}, args...)...)
		if code != 1 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep struct {
			Findings []model.Finding
			Twin     string
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0].Fix.SQL, "ON public.payments (merchant") {
			t.Fatalf("want an index on payments (merchant ...), got %s", out)
		}
		return rep.Findings[0].Verification, rep.Twin
	}
	if v, _ := check(); v.Status != model.NotRun {
		t.Fatalf("without --twin: %+v", v)
	}
	v, line := check("--twin")
	if v.Status != model.Confirmed || v.Before == nil || v.After == nil || !strings.Contains(v.Where, "twin (PostgreSQL 15") || !strings.Contains(v.Where, "full copy of public.payments, 150,000 rows") {
		t.Errorf("with --twin: %+v", v)
	}
	if !strings.Contains(line, "copied public.payments (150,000 rows") || !strings.Contains(line, "read from the target") {
		t.Errorf("the report's twin line: %q", line)
	}
	if after := writes(); after != before {
		t.Errorf("the target's write counters moved from %d to %d", before, after)
	}
	rows, err := db.Query(ctx, "SELECT query FROM pg_stat_statements WHERE query LIKE '%pgmedic%'")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var q string
		rows.Scan(&q)
		seen++
		body := strings.ToUpper(strings.TrimSpace(q[strings.Index(q, "*/")+2:]))
		for _, w := range []string{"INSERT", "UPDATE", "DELETE", "CREATE", "ANALYZE", "ALTER", "DROP", "TRUNCATE"} {
			if strings.HasPrefix(body, w) {
				t.Errorf("pgmedic wrote to the target: %s", q)
			}
		}
	}
	rows.Close()
	if seen == 0 {
		t.Error("pg_stat_statements shows none of pgmedic's statements: the check above looked at nothing")
	}
	code, out, errOut := run(t, "check", cluster.DSN("twin_target"), "--format", "json", "--rules", "queue-claim-race", "--sample", "0", "--twin")
	var race struct{ Findings []model.Finding }
	json.Unmarshal([]byte(out), &race)
	if code != 1 || len(race.Findings) != 1 || race.Findings[0].Verification.Status != model.Confirmed || race.Findings[0].Verification.Before.Value == 0 ||
		race.Findings[0].Verification.After.Value != 0 || !strings.Contains(race.Findings[0].Verification.Where, "full copy of public.outbox") {
		t.Errorf("the claim race on the twin: exit %d, %s %s", code, out, errOut)
	}
	if after := writes(); after != before {
		t.Errorf("the race wrote to the target: write counters %d -> %d", before, after)
	}
	// A twin on the target's own server is refused before anything is
	// dropped or written there.
	code, out, _ = run(t, "check", cluster.DSN("twin_target"), "--format", "json", "--rules", "missing-index", "--sample", "0", "--twin-dsn", cluster.DSN("postgres"))
	var refused struct{ Findings []model.Finding }
	json.Unmarshal([]byte(out), &refused)
	if code != 1 || len(refused.Findings) != 1 || !strings.Contains(refused.Findings[0].Verification.Reason, "the target's own server") {
		t.Errorf("a --twin-dsn on the target's server: exit %d, %s", code, out)
	}
	if after := writes(); after != before {
		t.Errorf("the refused twin wrote to the target: write counters %d -> %d", before, after)
	}
	if n := len(lab.Leftovers()); n != leftovers {
		t.Errorf("the twin's cluster was left behind (%d leftovers, %d before)", n, leftovers)
	}
}

// TestCheckTwinLockQueue: a schema change queued behind a long read, and
// reads queued behind it, on the target while check samples; --twin
// rehearses the queue on the table's definition (no row is read from a
// table behind a lock queue) and measures the longest read as written and
// with lock_timeout and retries.
func TestCheckTwinLockQueue(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	root, db := freshDatabase(t, "twin_queue")
	if _, err := db.Exec(ctx, "CREATE TABLE ledger (id int PRIMARY KEY, owner text, amount numeric); INSERT INTO ledger SELECT g, 'o' || g, g FROM generate_series(1, 20000) g"); err != nil {
		t.Fatal(err)
	}
	head, change := admin(t, "twin_queue"), admin(t, "twin_queue")
	var headPID int
	head.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&headPID)
	if _, err := head.Exec(ctx, "BEGIN; SELECT count(*) FROM ledger"); err != nil {
		t.Fatal(err)
	}
	defer root.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'twin_queue' AND pid <> pg_backend_pid()")
	go change.Exec(ctx, "ALTER TABLE ledger ADD COLUMN note text")
	// The reads start once the change waits: one that ran before it
	// queued would share the head's lock and not wait at all.
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_queue' AND wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE ledger%'").Scan(&n)
		return n == 1
	})
	for i := 0; i < 3; i++ {
		r := admin(t, "twin_queue")
		go r.Exec(ctx, "SELECT amount FROM ledger WHERE id = 42")
	}
	// The queue is in place once three reads wait behind the change.
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_queue' AND wait_event_type = 'Lock' AND query LIKE 'SELECT amount%'").Scan(&n)
		return n == 3
	})
	code, out, errOut := run(t, "check", cluster.DSN("twin_queue"), "--format", "json", "--rules", "lock-contention", "--sample", "1s", "--twin")
	var rep struct{ Findings []model.Finding }
	json.Unmarshal([]byte(out), &rep)
	if code != 1 || len(rep.Findings) != 1 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	v := rep.Findings[0].Verification
	// By construction the reads queued as written wait for the head's
	// 1.2 s, however fast the machine; with lock_timeout they wait at most
	// 100 ms for the lock, plus whatever a loaded machine adds.
	if v.Status != model.Confirmed || v.Before == nil || v.After == nil || v.Before.Value < 1000 || v.After.Value > v.Before.Value/2 ||
		!strings.Contains(v.Where, "the definition of public.ledger, no rows") {
		t.Errorf("the rehearsal: %+v (before %v, after %v)", v, v.Before, v.After)
	}
}

// TestCheckTwinIndexBuild: a CREATE INDEX without CONCURRENTLY builds
// (an expression made slow, so the build lasts while check samples) and
// holds SHARE on the table, and writes queue behind it. --twin rehearses
// the queue: the write's longest run under SHARE held, against under
// SHARE UPDATE EXCLUSIVE, the lock CREATE INDEX CONCURRENTLY takes.
func TestCheckTwinIndexBuild(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	root, db := freshDatabase(t, "twin_build")
	if _, err := db.Exec(ctx, `CREATE TABLE readings (id int PRIMARY KEY, v int);
		INSERT INTO readings SELECT g, 0 FROM generate_series(1, 600) g;
		CREATE FUNCTION slow_key(int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT $1 FROM (SELECT pg_sleep(0.01)) s'`); err != nil {
		t.Fatal(err)
	}
	defer root.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'twin_build' AND pid <> pg_backend_pid()")
	build := admin(t, "twin_build")
	go build.Exec(ctx, "CREATE INDEX readings_slow ON readings (slow_key(id))")
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_build' AND state = 'active' AND query LIKE 'CREATE INDEX readings_slow%'").Scan(&n)
		return n == 1
	})
	for i := 0; i < 3; i++ {
		w := admin(t, "twin_build")
		go w.Exec(ctx, fmt.Sprintf("UPDATE readings SET v = v + 1 WHERE id = %d", 10+i))
	}
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_build' AND wait_event_type = 'Lock' AND query LIKE 'UPDATE readings%'").Scan(&n)
		return n == 3
	})
	code, out, errOut := run(t, "check", cluster.DSN("twin_build"), "--format", "json", "--rules", "lock-contention", "--sample", "1s", "--twin")
	var rep struct{ Findings []model.Finding }
	json.Unmarshal([]byte(out), &rep)
	if code != 1 || len(rep.Findings) != 1 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	v := rep.Findings[0].Verification
	// By construction the writes wait out the 1.2 s SHARE is held; under
	// SHARE UPDATE EXCLUSIVE they do not wait at all, and confirmed means
	// the longest run fell by a fifth or more (a loaded machine can stall
	// one run for a good part of a second).
	if v.Status != model.Confirmed || v.Before == nil || v.After == nil || v.Before.Value < 1000 ||
		!strings.Contains(v.Method, "SHARE UPDATE EXCLUSIVE") {
		t.Errorf("the rehearsal: %+v (before %v, after %v)", v, v.Before, v.After)
	}
}

// TestCheckTwinCheckpointWAL: a log whose checkpoints WAL volume started,
// read by check --twin on a database whose busiest table it copies: the
// finding is measured, the WAL per row a batch of updates writes right
// after a checkpoint (every page whole) against with none between.
func TestCheckTwinCheckpointWAL(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	_, db := freshDatabase(t, "twin_ckpt")
	if _, err := db.Exec(ctx, `CREATE TABLE events (id int PRIMARY KEY, payload text);
		INSERT INTO events SELECT g, md5(g::text) FROM generate_series(1, 30000) g;
		UPDATE events SET payload = payload WHERE id <= 100;
		ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	// The writes reach pg_stat_user_tables when the session reports them.
	db.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	code, out, errOut := run(t, "check", cluster.DSN("twin_ckpt"), "--format", "json", "--rules", "checkpoint-pressure", "--sample", "0",
		"--log", "../logs/testdata/lab/maintenance.log", "--twin")
	var rep struct{ Findings []model.Finding }
	json.Unmarshal([]byte(out), &rep)
	if !checkRan(code) || len(rep.Findings) != 1 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	v := rep.Findings[0].Verification
	// WAL is counted in bytes, not timed: a row updated right after a
	// checkpoint carries its share of its 8 kB page, on any machine.
	if v.Status != model.Confirmed || v.Before == nil || v.After == nil || v.Before.Value < 1.2*v.After.Value || !strings.Contains(v.Method, "public.events") {
		t.Errorf("the measurement: %+v (before %v, after %v)", v, v.Before, v.After)
	}
	t.Logf("WAL per row: %.1f bytes right after a checkpoint, %.1f with none between (%s)", v.Before.Value, v.After.Value, v.Method)
}

// waitFor polls cond until it holds, for up to a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freshDatabase drops and creates a database on the shared cluster and
// returns connections to postgres and to it.
func freshDatabase(t *testing.T, name string) (root, db *pgx.Conn) {
	t.Helper()
	root = admin(t, "postgres")
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := root.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return root, admin(t, name)
}

// TestCheckTwinIdleChain: a client updates a row and leaves its
// transaction idle while writers, sending their UPDATE with $1 through
// the extended protocol, queue behind it. --twin rehearses the chain on a
// copy of the table: the waiters' longest wait with the head idle, and
// with idle_in_transaction_session_timeout on the head's session.
func TestCheckTwinIdleChain(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	root, db := freshDatabase(t, "twin_idle")
	if _, err := db.Exec(ctx, "CREATE TABLE wallets (id int PRIMARY KEY, balance numeric NOT NULL); INSERT INTO wallets SELECT g, 100 FROM generate_series(1, 5000) g; ANALYZE wallets"); err != nil {
		t.Fatal(err)
	}
	head := admin(t, "twin_idle")
	if _, err := head.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := head.Exec(ctx, "UPDATE wallets SET balance = balance - 1 WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	defer root.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'twin_idle' AND pid <> pg_backend_pid()")
	for i := 0; i < 3; i++ {
		w := admin(t, "twin_idle")
		go w.Exec(ctx, "UPDATE wallets SET balance = balance + 1 WHERE id = $1", 7)
	}
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_idle' AND wait_event_type = 'Lock'").Scan(&n)
		return n == 3
	})
	code, out, errOut := run(t, "check", cluster.DSN("twin_idle"), "--format", "json", "--min-severity", "info", "--rules", "lock-contention,idle-in-transaction", "--sample", "1500ms", "--twin")
	var rep struct{ Findings []model.Finding }
	json.Unmarshal([]byte(out), &rep)
	if code != 1 || len(rep.Findings) != 2 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	// One problem, one finding: the chain behind an idle transaction is
	// idle-in-transaction's; lock-contention names it at info.
	for _, f := range rep.Findings {
		if f.Rule == "lock-contention" {
			if f.Severity != model.Info || f.Experiment != nil && f.Verification.Status == model.Confirmed {
				t.Errorf("lock-contention is a second finding for the idle transaction: %s %s", f.Severity, f.Title)
			}
			continue
		}
		v := f.Verification
		// The head sits idle 1.2 s by construction, so the waiters wait
		// that long as written; the timeout ends it after 300 ms.
		if v.Status != model.Confirmed || v.Before == nil || v.After == nil || v.Before.Value < 1000 || v.After.Value > v.Before.Value*0.8 ||
			!strings.Contains(v.Where, "full copy of public.wallets") {
			t.Errorf("%s on the twin: %+v (before %v, after %v)", f.Rule, v, v.Before, v.After)
		}
	}
}

// TestCheckTwinLockedTable: a table behind a lock queue when the twin is
// built (a read holds it, an ALTER waits, reads queue behind the ALTER),
// whose updates are never HOT. The twin's read of the rows gives up at
// pgmedic's lock_timeout: the twin keeps the table's definition, the
// queue is still rehearsed, and the HOT experiment says why it has no
// rows, instead of the whole twin failing.
func TestCheckTwinLockedTable(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	root, db := freshDatabase(t, "twin_locked")
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
		CREATE TABLE ledger (id int PRIMARY KEY, owner text, amount numeric);
		CREATE INDEX ON ledger (owner);
		INSERT INTO ledger SELECT g, 'o' || g, g FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	// Updates of an indexed column: never HOT, the table-bloat rule's
	// finding, whose experiment needs the table's rows on the twin.
	for i := 0; i < 4; i++ {
		if _, err := db.Exec(ctx, "UPDATE ledger SET owner = owner || 'x' WHERE id % 4 = $1", i); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	head, change := admin(t, "twin_locked"), admin(t, "twin_locked")
	if _, err := head.Exec(ctx, "BEGIN; SELECT count(*) FROM ledger"); err != nil {
		t.Fatal(err)
	}
	defer root.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'twin_locked' AND pid <> pg_backend_pid()")
	go change.Exec(ctx, "ALTER TABLE ledger ADD COLUMN note text")
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_locked' AND wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE ledger%'").Scan(&n)
		return n == 1
	})
	for i := 0; i < 3; i++ {
		r := admin(t, "twin_locked")
		go r.Exec(ctx, "SELECT amount FROM ledger WHERE id = 42")
	}
	waitFor(t, func() bool {
		var n int
		root.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = 'twin_locked' AND wait_event_type = 'Lock' AND query LIKE 'SELECT amount FROM ledger WHERE id%'").Scan(&n)
		return n == 3
	})
	code, out, errOut := run(t, "check", cluster.DSN("twin_locked"), "--format", "json", "--rules", "lock-contention,table-bloat", "--sample", "1s", "--twin")
	var rep struct {
		Findings []model.Finding
		Twin     string
	}
	json.Unmarshal([]byte(out), &rep)
	if !checkRan(code) {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	seen := map[string]model.Verification{}
	for _, f := range rep.Findings {
		seen[f.Rule] = f.Verification
	}
	if v := seen["lock-contention"]; v.Status != model.Confirmed {
		t.Errorf("the queue was not rehearsed: %+v", v)
	}
	if v, ok := seen["table-bloat"]; !ok || v.Status != model.NotRun || !strings.Contains(v.Reason, "behind a lock") {
		t.Errorf("the HOT experiment on the locked table: %+v (findings %v)", v, rep.Findings)
	}
}
