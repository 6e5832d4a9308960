// Package collect reads what the rules need from a live database into a
// model.Snapshot. Every query is read-only, tagged with envelope.Tag, and a
// source that cannot be read (missing extension, missing privilege) becomes a
// model.Skip with the fix instead of an error: `check` still runs the rest.
package collect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// overridden are the settings pgmedic's own session changes (see envelope);
// for these pg_settings.reset_val is what other sessions get.
var overridden = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"jit": true, "statement_timeout": true, "lock_timeout": true,
		"idle_in_transaction_session_timeout": true, "default_transaction_read_only": true,
	}
})

// Options tune how much the collectors do.
type Options struct {
	// PlanTop is how many of the most expensive statements get a plan.
	PlanTop int
	// SampleFor is how long the sessions are sampled (0: not at all) and
	// SampleEvery the time between ticks (see sample).
	SampleFor   time.Duration
	SampleEvery time.Duration
	// Bouncer, with its Version, is a PgBouncer admin console sampled with
	// the sessions (SHOW POOLS each tick); nil for none.
	Bouncer        envelope.Conn
	BouncerVersion string
	// BouncerError is why the PgBouncer given could not be connected to.
	BouncerError string
	// MaxTables and MaxStatements bound what is read on very large
	// databases; what is left out is listed in Missing (never silently).
	MaxTables     int
	MaxStatements int
	// Clock paces the sampler (nil: the wall clock).
	Clock Clock
	// CPU, for a server on this machine, reads a backend's CPU time so far
	// (ProcCPU); nil for a remote server.
	CPU func(pid int) (ms float64, ok bool)
	// Statements, when set, replaces the statements read from
	// pg_stat_statements (totals since its last reset) before they are
	// parsed and planned: watch gives what moved in an incident's window.
	Statements func(read []model.Statement) []model.Statement
}

// Defaults are the options `check` starts from: its flags' defaults
// (sampling for 10 s, a tick every 100 ms). A copy is returned, so no
// caller can change another's.
func Defaults() Options {
	return Options{PlanTop: 15, SampleFor: 10 * time.Second, SampleEvery: 100 * time.Millisecond, MaxTables: 200000, MaxStatements: 10000}
}

// SnapshotWith collects everything for the connected database.
func SnapshotWith(ctx context.Context, q envelope.Conn, now time.Time, opts Options) (*model.Snapshot, error) {
	s := &model.Snapshot{CollectedAt: now.UTC(), Missing: map[string]model.Skip{}}
	if err := q.QueryRow(ctx, envelope.Tag+`SELECT current_database(), d.oid, current_setting('server_version'),
		current_setting('server_version_num')::int, current_user
		FROM pg_database d WHERE d.datname = current_database()`).
		Scan(&s.Database, &s.DatabaseOID, &s.Server.Version, &s.Server.VersionNum, &s.User); err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	// Asking loads the server's JIT provider (LLVM, a large library) into
	// pgmedic's backend; on a saturated server that alone can outlast
	// statement_timeout. The answer is then taken from what the statements
	// show instead of giving up the whole check.
	var err error
	jit, jitErr := jitAvailable(ctx, q)
	s.Server.JITAvailable = jit
	if s.Settings, err = settings(ctx, q); err != nil {
		return nil, err
	}
	if s.Roles, err = roles(ctx, q); err != nil {
		return nil, err
	}
	if s.RoleSettings, err = roleSettings(ctx, q); err != nil {
		s.Missing[model.SrcRoleSets] = skipFor(s, "cannot read pg_db_role_setting", err)
	}
	statements(ctx, q, s, opts.MaxStatements)
	if jitErr != nil {
		s.Missing[model.SrcJIT] = skipFor(s, "cannot ask whether the server can JIT", jitErr)
		s.Server.JITAvailable = jitSeen(s.Statements)
	}
	if opts.Statements != nil && s.Statements != nil {
		s.Statements = opts.Statements(s.Statements)
	}
	shapes(s)
	databaseStats(ctx, q, s)
	activity(ctx, q, s)
	if err := catalog(ctx, q, s, opts); err != nil {
		return nil, err
	}
	plans(ctx, q, s, opts.PlanTop)
	horizon(ctx, q, s)
	checkpoints(ctx, q, s)
	databases(ctx, q, s)
	seqAt := sequences(ctx, q, s)
	xid0, xidAt, xidErr := nextXID(ctx, q)
	membersAt := members(ctx, q, s)
	autovacuum(ctx, q, s)
	replication(ctx, q, s)
	subtransAt := subtrans(ctx, q, s)
	sample(ctx, q, s, opts)
	if s.Sampling != nil {
		sequencesAfter(ctx, q, s, seqAt)
		// A second look at the workers (which stayed busy, their pace)
		// and at replication (what replay and the WAL did meanwhile).
		autovacuum(ctx, q, s)
		replication(ctx, q, s)
		// The rate at which transaction ids go, across the window: the
		// time wraparound leaves is counted at it.
		if xid1, at, err := nextXID(ctx, q); err == nil && xidErr == nil && at > xidAt {
			s.XIDs = &model.XIDClock{Before: xid0, After: xid1, Seconds: at - xidAt}
		}
		membersAfter(ctx, q, s, membersAt)
		subtransAfter(ctx, q, s, subtransAt)
	} else {
		s.Subtrans = nil // one reading is no rate
	}
	return s, nil
}

// jitAvailable asks whether the server can JIT at all. pg_jit_available()
// also returns false while jit is off, which it is in pgmedic's session, so
// the question is asked with jit switched on for one rolled-back
// transaction. Loading the provider compiles nothing.
func jitAvailable(ctx context.Context, q envelope.Conn) (bool, error) {
	var ok bool
	err := envelope.RolledBack(ctx, q, envelope.ReadOnly, func() error {
		if _, err := q.Exec(ctx, envelope.Tag+"SET LOCAL jit = on"); err != nil {
			return err
		}
		// Loading LLVM can take seconds on a saturated machine: a read
		// past the statement_timeout is trapped, not logged.
		v, err := envelope.Value(ctx, q, "SELECT pg_jit_available()")
		ok = v == "true"
		return err
	})
	if err != nil {
		return false, fmt.Errorf("checking JIT availability: %w", err)
	}
	return ok, nil
}

// jitSeen says whether any statement has had JIT work counted by
// pg_stat_statements (its jit_* columns, PostgreSQL 15 and later): proof
// that the server can JIT, when pg_jit_available() could not be asked.
func jitSeen(sts []model.Statement) bool {
	for _, st := range sts {
		if st.JIT.Functions > 0 {
			return true
		}
	}
	return false
}

// settings reads pg_settings. For the settings pgmedic's session
// overrides, the value kept is reset_val: what the application's sessions
// get.
func settings(ctx context.Context, q envelope.Conn) (map[string]model.Setting, error) {
	rows, err := q.Query(ctx, envelope.Tag+`SELECT name, setting, coalesce(unit, ''), source, coalesce(boot_val, ''), coalesce(reset_val, '') FROM pg_settings`)
	if err != nil {
		return nil, fmt.Errorf("reading pg_settings: %w", err)
	}
	out := map[string]model.Setting{}
	for rows.Next() {
		var st model.Setting
		var reset string
		if err := rows.Scan(&st.Name, &st.Value, &st.Unit, &st.Source, &st.Boot, &reset); err != nil {
			return nil, fmt.Errorf("reading pg_settings: %w", err)
		}
		if overridden()[st.Name] && st.Source == "session" {
			st.Value = reset
			st.Source = "configuration file"
			if reset == st.Boot {
				st.Source = "default"
			}
		}
		out[st.Name] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading pg_settings: %w", err)
	}
	return out, nil
}

// roles maps role oids to names, for pg_stat_statements.userid.
func roles(ctx context.Context, q envelope.Conn) (map[uint32]string, error) {
	rows, err := q.Query(ctx, envelope.Tag+`SELECT oid, rolname FROM pg_roles`)
	if err != nil {
		return nil, fmt.Errorf("reading pg_roles: %w", err)
	}
	out := map[uint32]string{}
	for rows.Next() {
		var oid uint32
		var name string
		if err := rows.Scan(&oid, &name); err != nil {
			return nil, fmt.Errorf("reading pg_roles: %w", err)
		}
		out[oid] = name
	}
	return out, rows.Err()
}

// roleSettings reads pg_db_role_setting: ALTER ROLE and ALTER DATABASE
// settings, which is where a role's own jit setting lives.
func roleSettings(ctx context.Context, q envelope.Conn) ([]model.RoleSetting, error) {
	rows, err := q.Query(ctx, envelope.Tag+`SELECT coalesce(r.rolname, ''), coalesce(d.datname, ''), s.setconfig
		FROM pg_db_role_setting s
		LEFT JOIN pg_roles r ON r.oid = s.setrole
		LEFT JOIN pg_database d ON d.oid = s.setdatabase`)
	if err != nil {
		return nil, err
	}
	var out []model.RoleSetting
	for rows.Next() {
		var rs model.RoleSetting
		var cfg []string
		if err := rows.Scan(&rs.Role, &rs.Database, &cfg); err != nil {
			return nil, err
		}
		rs.Settings = ParseSetConfig(cfg)
		out = append(out, rs)
	}
	return out, rows.Err()
}

// ParseSetConfig parses pg_db_role_setting.setconfig entries ("name=value").
// PostgreSQL stores the value as given to ALTER ... SET, unquoted.
func ParseSetConfig(entries []string) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		name, value, ok := strings.Cut(e, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" {
			continue
		}
		out[name] = value
	}
	return out
}

// pgssColumns maps model fields to the pg_stat_statements columns that hold
// them, newest name first: PG13 renamed total_time to total_exec_time, PG15
// added the jit_* columns, PG17 renamed blk_read_time.
var pgssColumns = []struct {
	field      string
	candidates []string
}{
	{"queryid", []string{"queryid"}},
	{"query", []string{"query"}},
	{"userid", []string{"userid"}},
	{"calls", []string{"calls"}},
	{"total_exec_time", []string{"total_exec_time", "total_time"}},
	{"total_plan_time", []string{"total_plan_time"}},
	{"rows", []string{"rows"}},
	{"shared_blks_hit", []string{"shared_blks_hit"}},
	{"shared_blks_read", []string{"shared_blks_read"}},
	{"wal_fpi", []string{"wal_fpi"}},
	{"jit_functions", []string{"jit_functions"}},
	{"jit_generation_time", []string{"jit_generation_time"}},
	{"jit_inlining_count", []string{"jit_inlining_count"}},
	{"jit_inlining_time", []string{"jit_inlining_time"}},
	{"jit_optimization_count", []string{"jit_optimization_count"}},
	{"jit_optimization_time", []string{"jit_optimization_time"}},
	{"jit_emission_count", []string{"jit_emission_count"}},
	{"jit_emission_time", []string{"jit_emission_time"}},
	{"temp_blks_written", []string{"temp_blks_written"}},
	{"min_exec_time", []string{"min_exec_time", "min_time"}},
	{"max_exec_time", []string{"max_exec_time", "max_time"}},
	{"stddev_exec_time", []string{"stddev_exec_time", "stddev_time"}},
	// Counts of the calls that ran a generic plan and a custom one, in
	// the pg_stat_statements after 18 (none of 13 to 18 has them).
	{"generic_plan_calls", []string{"generic_plan_calls"}},
	{"custom_plan_calls", []string{"custom_plan_calls"}},
}

// PgssSelect builds the select list for the columns the installed
// pg_stat_statements actually has; missing ones read as 0.
func PgssSelect(schema string, have map[string]bool) (sql string, hasJIT bool) {
	var cols []string
	for _, c := range pgssColumns {
		expr := "0"
		switch c.field {
		case "query":
			expr = "''"
		case "generic_plan_calls", "custom_plan_calls":
			expr = "-1" // not counted by this version: unknown, not none
		}
		for _, cand := range c.candidates {
			if have[cand] {
				expr = cand
				break
			}
		}
		switch c.field {
		case "queryid", "userid":
			expr = "coalesce(" + expr + ", 0)::bigint"
		case "query":
			expr = "coalesce(" + expr + ", '')"
		default:
			expr = "coalesce(" + expr + ", 0)::float8"
		}
		cols = append(cols, expr+" AS "+c.field)
	}
	// How many there are in all, to say how many the limit left out.
	cols = append(cols, "count(*) OVER () AS all_statements")
	hasJIT = have["jit_functions"]
	total := "total_exec_time"
	if !have[total] {
		total = "total_time"
	}
	sql = envelope.Tag + "SELECT " + strings.Join(cols, ", ") + " FROM " + sqlparse.QuoteIdent(schema) +
		".pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())" +
		" ORDER BY " + total + " DESC LIMIT $1"
	return sql, hasJIT
}

// pgssInstalled finds the schema pg_stat_statements is installed in and the
// columns its view has (they change between its versions); ok is false
// when it cannot be read, with the reason and fix in s.Missing.
func pgssInstalled(ctx context.Context, q envelope.Conn, s *model.Snapshot) (schema string, have map[string]bool, ok bool) {
	err := q.QueryRow(ctx, envelope.Tag+`SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_stat_statements'`).Scan(&schema)
	if errors.Is(err, pgx.ErrNoRows) {
		fix := "CREATE EXTENSION pg_stat_statements; (it also needs shared_preload_libraries = 'pg_stat_statements' and a restart)"
		// pg_settings shows shared_preload_libraries to roles that may
		// read it (and leaves it out for the others, without an error).
		if pre, ok := s.Settings["shared_preload_libraries"]; ok && strings.Contains(pre.Value, "pg_stat_statements") {
			fix = "CREATE EXTENSION pg_stat_statements; (the server already preloads it: no restart needed)"
		}
		s.Missing[model.SrcStatements] = model.Skip{
			Reason: fmt.Sprintf("the pg_stat_statements extension is not installed in database %q", s.Database),
			Fix:    fix,
		}
		return "", nil, false
	}
	if err != nil {
		s.Missing[model.SrcStatements] = skipFor(s, "cannot look up pg_stat_statements", err)
		return "", nil, false
	}
	rows, err := q.Query(ctx, envelope.Tag+`SELECT attname FROM pg_attribute
		WHERE attrelid = format('%I.pg_stat_statements', $1::text)::regclass AND attnum > 0 AND NOT attisdropped`, schema)
	if err != nil {
		s.Missing[model.SrcStatements] = skipFor(s, "cannot read the columns of pg_stat_statements", err)
		return "", nil, false
	}
	have = map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err == nil {
			have[name] = true
		}
	}
	rows.Close()
	return schema, have, true
}

// statements reads this database's pg_stat_statements entries, the most
// expensive first and at most limit (the rest are counted as skipped); a
// view that cannot be read is recorded in Missing with the fix.
func statements(ctx context.Context, q envelope.Conn, s *model.Snapshot, limit int) {
	schema, have, ok := pgssInstalled(ctx, q, s)
	if !ok {
		return
	}
	if limit <= 0 {
		limit = Defaults().MaxStatements
	}
	sql, hasJIT := PgssSelect(schema, have)
	rows, err := q.Query(ctx, sql, limit)
	if err != nil {
		s.Missing[model.SrcStatements] = pgssError(s, err)
		return
	}
	defer rows.Close()
	list := []model.Statement{}
	var all, seen int64
	for rows.Next() {
		var st model.Statement
		var calls, nrows, hit, read, fpi, jf, ic, oc, ec, temp, generic, custom float64
		if err := rows.Scan(&st.QueryID, &st.Query, &st.UserID, &calls, &st.TotalExecMS, &st.TotalPlanMS, &nrows, &hit, &read, &fpi,
			&jf, &st.JIT.GenerationMS, &ic, &st.JIT.InliningMS, &oc, &st.JIT.OptimizationMS, &ec, &st.JIT.EmissionMS,
			&temp, &st.MinExecMS, &st.MaxExecMS, &st.StddevExecMS, &generic, &custom, &all); err != nil {
			s.Missing[model.SrcStatements] = skipFor(s, "cannot read pg_stat_statements", err)
			return
		}
		st.Calls, st.Rows, st.SharedBlksHit, st.SharedBlksRead, st.WALFPI = int64(calls), int64(nrows), int64(hit), int64(read), int64(fpi)
		st.JIT.Functions, st.JIT.InliningCount, st.JIT.OptimizationCount, st.JIT.EmissionCount = int64(jf), int64(ic), int64(oc), int64(ec)
		st.JIT.Available = hasJIT
		st.TempBlksWritten, st.GenericPlans, st.CustomPlans = int64(temp), int64(generic), int64(custom)
		st.Role = s.Roles[st.UserID]
		seen++
		if envelope.Own(st.Query) {
			// pgmedic's own statements, never the application's.
			s.OwnStatements++
			s.OwnStatementsMS += st.TotalExecMS
			continue
		}
		if st.Query == "<insufficient privilege>" {
			s.StatementsHidden++
			s.StatementsHiddenMS += st.TotalExecMS
			continue
		}
		list = append(list, st)
	}
	if err := rows.Err(); err != nil {
		s.Missing[model.SrcStatements] = pgssError(s, err)
		return
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].TotalExecMS > list[j].TotalExecMS })
	s.Statements = list
	if all > seen {
		s.Missing[model.SrcStatementsCut] = model.Skip{
			Reason: fmt.Sprintf("pg_stat_statements holds %d statements of this database; the %d with the most execution time were read and %d were left out", all, seen, all-seen),
			Fix:    fmt.Sprintf("pgmedic check --max-statements %d reads them all", all)}
	}
}

// pgssError says why pg_stat_statements could not be read and the fix.
func pgssError(s *model.Snapshot, err error) model.Skip {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "shared_preload_libraries") {
		return model.Skip{
			Reason: "pg_stat_statements is installed but not loaded by the server",
			Fix:    "add pg_stat_statements to shared_preload_libraries in postgresql.conf and restart PostgreSQL",
		}
	}
	return skipFor(s, "cannot read pg_stat_statements", err)
}

// databaseStats reads this database's pg_stat_database row.
func databaseStats(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	d := &s.DatabaseStats
	if err := q.QueryRow(ctx, envelope.Tag+`SELECT blks_hit, blks_read, blk_read_time FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&d.BlksHit, &d.BlksRead, &d.BlkReadMS); err == nil {
		d.BlocksKnown = true
	}
	if h := pgversion.Of(s.Server.VersionNum); !h.SessionStats {
		s.Missing[model.SrcDBStats] = model.Skip{Reason: h.Lacks("session counters in pg_stat_database", 14)}
		return
	}
	err := q.QueryRow(ctx, envelope.Tag+`SELECT sessions, sessions_abandoned, stats_reset FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&s.DatabaseStats.Sessions, &s.DatabaseStats.SessionsAbandoned, &s.DatabaseStats.StatsReset)
	if err != nil {
		s.Missing[model.SrcDBStats] = skipFor(s, "cannot read pg_stat_database", err)
		return
	}
	s.DatabaseStats.Available = true
}

func activity(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	a, err := Load(ctx, q)
	if err != nil {
		s.Missing[model.SrcActivity] = skipFor(s, "cannot read pg_stat_activity", err)
		return
	}
	s.Activity = a
}

// Load reads the server's load as the envelope's load rule judges it:
// client backends active (not pgmedic's, and not waiting for a lock: a
// queue of sessions stuck behind one lock uses no CPU or disk), connected,
// and max_connections. check reads it once; a re-run reads it again just
// before it starts.
func Load(ctx context.Context, q envelope.Conn) (model.Activity, error) {
	var a model.Activity
	err := q.QueryRow(ctx, envelope.Tag+`SELECT count(*) FILTER (WHERE state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock' AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM '`+envelope.AppName+`'),
		count(*), current_setting('max_connections')::int
		FROM pg_stat_activity WHERE backend_type = 'client backend'`).
		Scan(&a.Active, &a.Total, &a.MaxConnections)
	return a, err
}
