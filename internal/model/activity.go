package model

import "time"

// Sampling is what check saw of the server's sessions over its sampling
// window (check --sample): one ActivitySample per tick, the database's
// counters before and after, and what the sampler itself cost.
type Sampling struct {
	Start      time.Time        `json:"start"`
	Seconds    float64          `json:"seconds"`
	IntervalMS float64          `json:"interval_ms"`
	Samples    []ActivitySample `json:"samples"`
	// Delta is pg_stat_database's change over the window.
	Delta DatabaseDelta `json:"delta"`
	// OverheadMS is the time the sampler's own queries took; BackedOff
	// says it slowed its ticks because the server answered slowly.
	OverheadMS float64 `json:"overhead_ms"`
	BackedOff  bool    `json:"backed_off,omitempty"`
	// Hidden says what the role could not see (other roles' statements)
	// and the GRANT that shows it; "" when it saw everything.
	Hidden         string `json:"hidden,omitempty"`
	HiddenSessions int    `json:"hidden_sessions,omitempty"`
	// PgBouncer is the version of the PgBouncer sampled with the sessions
	// (check --pgbouncer), Pools its pools at each tick, and BouncerError
	// why it could not be sampled.
	PgBouncer    string       `json:"pgbouncer,omitempty"`
	Pools        []PoolSample `json:"pools,omitempty"`
	BouncerError string       `json:"pgbouncer_error,omitempty"`
	// BouncerStats is the change of SHOW STATS over the window, by
	// database.
	BouncerStats []BouncerStat `json:"pgbouncer_stats,omitempty"`
	// BouncerClients is SHOW CLIENTS at the end of the window.
	BouncerClients *BouncerClients `json:"pgbouncer_clients,omitempty"`
	// NoSessionCounts says why new connections were not counted over
	// the window (a server without pg_stat_database.sessions).
	NoSessionCounts string `json:"no_session_counts,omitempty"`
}

// BouncerClients counts PgBouncer's clients by state, with the longest
// current wait for a server connection.
type BouncerClients struct {
	Active        int     `json:"active"`
	Waiting       int     `json:"waiting"`
	Idle          int     `json:"idle"`
	LongestWaitMS float64 `json:"longest_wait_ms"`
}

// BouncerStat is one database's SHOW STATS change over the window.
type BouncerStat struct {
	Database     string  `json:"database"`
	Transactions int64   `json:"transactions"`
	Queries      int64   `json:"queries"`
	WaitMS       float64 `json:"wait_ms"` // clients' total time waiting for a server connection
}

// PoolSample is PgBouncer's SHOW POOLS at one tick.
type PoolSample struct {
	At    time.Time `json:"at"`
	Pools []Pool    `json:"pools"`
}

// Pool is one PgBouncer pool (a database and user pair).
type Pool struct {
	Database  string  `json:"database"`
	User      string  `json:"user"`
	Mode      string  `json:"pool_mode,omitempty"`
	ClActive  int     `json:"cl_active"`
	ClWaiting int     `json:"cl_waiting"`
	SvActive  int     `json:"sv_active"`
	SvIdle    int     `json:"sv_idle"`
	SvUsed    int     `json:"sv_used"`
	MaxWaitMS float64 `json:"maxwait_ms"`
}

// ActivitySample is one tick: every client backend but pgmedic's.
type ActivitySample struct {
	At       time.Time `json:"at"`
	Backends []Backend `json:"backends"`
}

// Backend is one session as pg_stat_activity and pg_locks showed it.
type Backend struct {
	PID      int    `json:"pid"`
	Database string `json:"database"`
	User     string `json:"user,omitempty"`
	App      string `json:"application,omitempty"`
	Client   string `json:"client,omitempty"`
	State    string `json:"state"` // active, idle, idle in transaction, ...
	// WaitType and Wait are pg_stat_activity's wait_event_type and
	// wait_event ("" when on CPU).
	WaitType string `json:"wait_type,omitempty"`
	Wait     string `json:"wait,omitempty"`
	QueryID  int64  `json:"queryid,omitempty"`
	Query    string `json:"query,omitempty"`
	// XactMS is how long its transaction has been open, StateMS how long
	// it has been in its state, and LastMS how long its last statement ran
	// (query_start to state_change, for a session that is no longer
	// active): what the server spent, beside what the transaction took.
	XactMS  float64 `json:"xact_ms,omitempty"`
	StateMS float64 `json:"state_ms,omitempty"`
	LastMS  float64 `json:"last_ms,omitempty"`
	// Overflowed: its transaction had more than 64 subtransactions, past
	// its backend's cache (pg_stat_get_backend_subxact, 16 and later).
	Overflowed bool `json:"subxact_overflowed,omitempty"`
	// BlockedBy are the sessions it waits for (pg_blocking_pids).
	BlockedBy []int `json:"blocked_by,omitempty"`
	// WaitsFor is the lock it waits for, as "relation (mode)" (or the
	// lock type, for a row's transaction id; "object CLASS/OBJ of database
	// DB (mode)" for an object's), when it waits for one.
	WaitsFor string `json:"waits_for,omitempty"`
	// Autovacuum is the autovacuum worker among the sessions it waits for,
	// as "PID QUERY [PHASE]" ("1234 autovacuum: VACUUM public.objects (to
	// prevent wraparound) [scanning heap]"), when one blocks it: a
	// background process the sampler does not list as a session, which
	// may be a chain's head.
	Autovacuum string `json:"autovacuum,omitempty"`
	// BlockedByPgmedic says it waited only for pgmedic's own sessions:
	// a wait pgmedic caused, never evidence against the application.
	BlockedByPgmedic bool `json:"blocked_by_pgmedic,omitempty"`
	// CPUMS is the CPU time the backend's process had used by then, for a
	// server on pgmedic's machine (/proc); 0 when not known. Two samples
	// of it say how much of a core the session got in between.
	CPUMS float64 `json:"cpu_ms,omitempty"`
	// Locks are the relations it holds locks on (and lock types without a
	// relation), for sessions inside a transaction.
	Locks []string `json:"locks,omitempty"`
}

// DatabaseDelta is the change of pg_stat_database counters over a window.
type DatabaseDelta struct {
	Sessions          int64 `json:"sessions"`
	SessionsAbandoned int64 `json:"sessions_abandoned"`
	SessionsFatal     int64 `json:"sessions_fatal"`
	SessionsKilled    int64 `json:"sessions_killed"`
	Commits           int64 `json:"xact_commit"`
	Rollbacks         int64 `json:"xact_rollback"`
	Deadlocks         int64 `json:"deadlocks"`
	TempFiles         int64 `json:"temp_files"`
	Conflicts         int64 `json:"conflicts"`
	// WALBytes is the WAL the server wrote over the window (0 on a
	// standby).
	WALBytes int64 `json:"wal_bytes,omitempty"`
}

// InTransaction says whether the session is inside a transaction.
func (b Backend) InTransaction() bool {
	return b.State == "idle in transaction" || b.State == "idle in transaction (aborted)" || (b.State == "active" && b.XactMS > 0)
}

// LogEvents is what a server log counted that the session rules judge
// the same way they judge sampled sessions (pgmedic logs).
type LogEvents struct {
	Seconds        float64 // the span the log covers
	Connections    int64
	PeakPerMinute  int64 // connections in the busiest minute
	TooManyClients int64
	LockWaits      int64
	// RelationLockWaits are the lock waits on a relation (a schema
	// change's queue), not on a row's transaction.
	RelationLockWaits  int64
	LockWaitMS         float64
	Deadlocks          int64
	ClientsLost        int64 // connection to client lost, unexpected EOF, connection reset
	DuplicateKeys      int64
	StatementTimeouts  int64
	CancelledByClients int64
	// PoolWaitTimeouts are the clients PgBouncer's log shows closed
	// because they waited longer than query_wait_timeout for a server
	// connection; PoolLogins its logins, for scale.
	PoolWaitTimeouts int64
	PoolLogins       int64
	// Checkpoints (log_checkpoints): started by WAL volume or by
	// checkpoint_timeout, the server's "too frequently" warnings, the
	// median time between starts, the WAL between checkpoints and the WAL
	// written per second over the span of the starts.
	CheckpointsByWAL          int64
	CheckpointsByTime         int64
	CheckpointsTooFrequent    int64
	CheckpointMedianIntervalS float64
	CheckpointMeanDistanceKB  float64
	WALKBPerSecond            float64
	CheckpointSpanS           float64 // from the first checkpoint start to the last
	// Tables is autovacuum's and autoanalyze's runs per table.
	Tables []TableMaintenance
	// Wraparound are the server's warnings and refusals about its
	// wraparound limits, one per limit it logged about.
	Wraparound []WraparoundLogged
}

// The server's wraparound limits, as WraparoundLogged names them.
const (
	LimitXIDs    = "transaction ids"
	LimitMultis  = "multixact ids"
	LimitMembers = "multixact members"
)

// WraparoundLogged is what a server log says of one wraparound limit:
// the WARNINGs that a database must be vacuumed before so many more are
// used (PostgreSQL writes one with each assignment once it is close), the
// fewest left of all of them and the database they named, and the
// commands refused at the limit.
type WraparoundLogged struct {
	Limit    string `json:"limit"`
	Warnings int64  `json:"warnings"`
	Least    int64  `json:"least_left"`
	Database string `json:"database,omitempty"`
	Refusals int64  `json:"refusals"`
}

// TableMaintenance is one table's autovacuum and autoanalyze runs in a
// server log.
type TableMaintenance struct {
	Table    string // database.schema.table, as autovacuum names it
	Vacuums  int64
	Analyzes int64
	Removed  int64 // dead rows removed, over all runs
	// NotRemovable is the most dead rows one run could not remove (a
	// snapshot still saw them), RemainAt the table's rows then, and
	// LastNotRemovable the last run's figure.
	NotRemovable, RemainAt, LastNotRemovable int64
	// Truncations are the runs that gave the table's empty end back under
	// ACCESS EXCLUSIVE ("pages: N removed"), PagesRemoved their pages.
	Truncations, PagesRemoved int64
}
