package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
)

// AppRole is the login role scenario workloads use.
const AppRole = "app"

// Env is what a scenario's workload gets.
type Env struct {
	Cluster *lab.Cluster
	DB      string
	// Role is the application role the workload connects as.
	Role string
	Log  func(format string, args ...any)
	// Metrics are figures the workload measured itself (rows claimed
	// twice, leaf density, ...), reported beside pgmedic's findings.
	Metrics map[string]float64
	// Bouncer is the scenario's PgBouncer, when it has one.
	Bouncer *lab.Bouncer

	ready     chan struct{}
	readyOnce sync.Once
}

// Ready is called by a workload that runs during check once its sessions
// are in the state it reproduces (see GoWorkload.SignalsReady): check's warm-up
// starts from there instead of from the workload's start, however long
// the machine took to get there.
func (e *Env) Ready() { e.readyOnce.Do(func() { close(e.ready) }) }

// BouncerDSN is the workload's connection string through PgBouncer.
func (e *Env) BouncerDSN() string { return e.Bouncer.DSN(e.Role, e.DB) }

// Record stores one measured figure of the workload.
func (e *Env) Record(name string, value float64) {
	if e.Metrics == nil {
		e.Metrics = map[string]float64{}
	}
	e.Metrics[name] = value
}

// StandbyDSN is the scenario database on the cluster's standby (the
// superuser's: a standby takes no writes, and its settings change with
// ALTER SYSTEM); "" when the cluster has none.
func (e *Env) StandbyDSN() string {
	if e.Cluster.Standby == nil {
		return ""
	}
	return e.Cluster.Standby.DSN(e.DB)
}

// AppDSN is the workload's connection string.
func (e *Env) AppDSN() string { return e.Cluster.UserDSN(e.Role, e.DB) }

// Admin opens a superuser connection to the scenario database.
func (e *Env) Admin(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, e.Cluster.DSN(e.DB))
	if err != nil {
		return nil, fmt.Errorf("connecting to the lab database %s: %w", e.DB, err)
	}
	return conn, nil
}

// Prepare creates the scenario's database on the cluster (replacing an
// earlier one), runs its setup, clears the statement statistics the setup
// left (bulk loads are not the workload) and runs the workload.
func Prepare(ctx context.Context, c *lab.Cluster, s Scenario, logf func(string, ...any)) (*Env, error) {
	env, err := Setup(ctx, c, s, logf)
	if err != nil {
		return nil, err
	}
	if err := env.Run(ctx, s); err != nil {
		return nil, err
	}
	return env, nil
}

// statsCaughtUp waits, on 13 and 14, until the statistics collector has
// written a file newer than the setup's last statement: a backend there
// reads a stats file up to half a second old, so a check right after the
// setup would see the table counts from before its VACUUM. From 15 the
// counters are in shared memory, read as they are.
func statsCaughtUp(ctx context.Context, db *pgx.Conn) error {
	var v int
	var done time.Time
	if err := db.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, clock_timestamp()").Scan(&v, &done); err != nil || v >= 150000 {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; {
		var at time.Time
		if _, err := db.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return err
		}
		// Any read of the statistics loads the file; its timestamp says
		// when the collector wrote it.
		if err := db.QueryRow(ctx, "SELECT pg_stat_get_snapshot_timestamp() FROM (SELECT pg_stat_get_db_xact_commit(0)) x").Scan(&at); err != nil {
			return err
		}
		if at.After(done) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the statistics collector wrote nothing newer than the setup within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Setup is Prepare without the workload.
func Setup(ctx context.Context, c *lab.Cluster, s Scenario, logf func(string, ...any)) (*Env, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	env := &Env{Cluster: c, DB: strings.ReplaceAll(s.Name, "-", "_"), Role: AppRole, Log: logf, ready: make(chan struct{})}
	if err := env.createDatabase(ctx); err != nil {
		return nil, err
	}
	db, err := env.Admin(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close(context.Background())
	exts := []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "CREATE EXTENSION IF NOT EXISTS pgstattuple"}
	if c.HypoPG {
		exts = append(exts, "CREATE EXTENSION IF NOT EXISTS hypopg")
	}
	if err := execAll(ctx, db, exts...); err != nil {
		return nil, fmt.Errorf("installing extensions in %s: %w", env.DB, err)
	}
	// Fail before loading anything when the client is missing.
	if err := CheckClients(ctx, s); err != nil {
		return nil, err
	}
	logf("%s: loading schema and data", s.Name)
	start := time.Now()
	if err := env.execApp(ctx, s.Setup...); err != nil {
		return nil, fmt.Errorf("scenario %s setup: %w", s.Name, err)
	}
	// A backend flushes its table counters at most once a second and when
	// it exits, so a bulk load analysed in the same second shows up later
	// as "modified since analyze". Wait for the setup's sessions to end and
	// analyze again (as superuser, so the system catalogues too, as
	// autovacuum would leave them): the workload, not the load, must make
	// statistics stale.
	for i := 0; i < 50; i++ {
		var others int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&others); err != nil || others == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	// The load's WAL is not the workload's either: the checkpoints it
	// started are counted from here (the server's counters are shared by
	// every database of the lab).
	_, resets, err := checkpointResets(ctx, db)
	if err != nil {
		return nil, err
	}
	if err := execAll(ctx, db, append([]string{"ANALYZE",
		"SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)"}, resets...)...); err != nil {
		return nil, fmt.Errorf("analyzing and resetting statement statistics after setup: %w", err)
	}
	if err := statsCaughtUp(ctx, db); err != nil {
		return nil, err
	}
	logf("%s: setup took %s", s.Name, time.Since(start).Round(time.Millisecond))
	return env, nil
}

// Run runs the scenario's workload. A workload that runs during check
// stops when ctx ends, which is not an error.
func (e *Env) Run(ctx context.Context, s Scenario) error {
	start := time.Now()
	err := e.workload(ctx, s)
	if err != nil && !(s.DuringCheck && errors.Is(err, context.Canceled)) {
		return fmt.Errorf("scenario %s workload: %w", s.Name, err)
	}
	e.Log("%s: workload took %s", s.Name, time.Since(start).Round(time.Millisecond))
	return nil
}

// createDatabase drops an earlier database of the scenario and creates it
// afresh, owned by the application role.
func (e *Env) createDatabase(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, e.Cluster.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the lab cluster: %w", err)
	}
	defer admin.Close(context.Background())
	// A prepared transaction an earlier run left (a run that was killed)
	// keeps its database from being dropped, even WITH (FORCE).
	var prepared int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_xacts WHERE database = $1", e.DB).Scan(&prepared); err == nil && prepared > 0 {
		rollbackPrepared(e)
	}
	err = execAll(ctx, admin,
		fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", e.DB),
		fmt.Sprintf("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF; END $$", AppRole, AppRole),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", e.DB, AppRole))
	if err != nil {
		return fmt.Errorf("creating the scenario database: %w", err)
	}
	return nil
}

// workload runs the scenario's workloads in a fixed order: workload.sql,
// workload.pgbench, then Go.
func (e *Env) workload(ctx context.Context, s Scenario) error {
	if s.PgBouncer != nil && e.Bouncer == nil {
		// Its clients connect through the pool (BouncerDSN).
		return errors.New("it runs behind PgBouncer, and none was started for it (Env.StartBouncer)")
	}
	for i := 0; i < s.Repeat && len(s.SQL) > 0; i++ {
		if err := e.execApp(ctx, s.SQL...); err != nil {
			return err
		}
	}
	if s.Pgbench != "" {
		if err := e.pgbench(ctx, s.Pgbench, s.PgbenchArgs); err != nil {
			return err
		}
	}
	if s.Go != nil {
		return s.Go(ctx, e)
	}
	return nil
}

// pgbench runs a script with PostgreSQL's own benchmark client as the
// application role. --protocol=prepared is the default: named prepared
// statements, as pgx and most pooled drivers send them, so the server
// plans them the way it plans the application's.
func (e *Env) pgbench(ctx context.Context, script string, args []string) error {
	bin, err := lab.ClientTool(e.Cluster.BinDir, "pgbench")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pgmedic-pgbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "workload.pgbench")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		return err
	}
	full := []string{"--no-vacuum", "--protocol=prepared"}
	full = append(full, args...) // a later --protocol wins
	full = append(full, "--file="+file, e.AppDSN())
	cmd := exec.CommandContext(ctx, bin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgbench failed: %w: %s", err, lastLines(out.String(), 5))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// execApp runs statements in order on one connection as the application role.
func (e *Env) execApp(ctx context.Context, stmts ...string) error {
	conn, err := pgx.Connect(ctx, e.AppDSN())
	if err != nil {
		return fmt.Errorf("connecting as %s: %w", e.Role, err)
	}
	defer conn.Close(context.Background())
	return execAll(ctx, conn, stmts...)
}

// execAll runs statements in order on one connection.
func execAll(ctx context.Context, conn *pgx.Conn, stmts ...string) error {
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return nil
}

// firstLine is a statement's first line, cut to 80 bytes, for errors.
func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if len(q) > 80 {
		q = q[:80]
	}
	return q
}
