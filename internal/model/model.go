// Package model holds the plain data pgmedic passes from collectors to rules,
// from rules to the verification engine, and from there to the reports.
// Nothing here does I/O.
package model

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Severity orders findings. The zero value is Info.
type Severity int

const (
	Info Severity = iota
	Warning
	Critical
)

// String is the severity's name in reports and flags.
func (s Severity) String() string {
	switch s {
	case Critical:
		return "critical"
	case Warning:
		return "warning"
	default:
		return "info"
	}
}

// ParseSeverity accepts info, warning or critical.
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "info":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "critical":
		return Critical, nil
	}
	return Info, fmt.Errorf("unknown severity %q: use info, warning or critical", s)
}

func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func (s *Severity) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	v, err := ParseSeverity(str)
	*s = v
	return err
}

// Sources the collectors read. One that cannot be read is recorded in
// Snapshot.Missing under its name, and every rule that needs it says so.
const (
	SrcStatements  = "pg_stat_statements"
	SrcRoleSets    = "pg_db_role_setting"
	SrcDBStats     = "pg_stat_database"
	SrcActivity    = "pg_stat_activity"
	SrcTables      = "pg_stat_user_tables"
	SrcIndexes     = "pg_index"
	SrcColumns     = "pg_stats"
	SrcPlans       = "plans"
	SrcLocks       = "lock waits"
	SrcCasts       = "casts"
	SrcHorizon     = "xmin holders"
	SrcSequences   = "pg_sequences"
	SrcCheckpoint  = "checkpoint counters"
	SrcDatabases   = "pg_database"
	SrcMembers     = "multixact member space"
	SrcSubtrans    = "pg_stat_slru (subtransactions)"
	SrcAutovacuum  = "autovacuum workers"
	SrcReplication = "replication"
	SrcJIT         = "pg_jit_available()"
	// Partial reads of very large databases (--max-tables,
	// --max-statements): what was left out, and the flag that includes it.
	SrcTablesCut     = "tables beyond --max-tables"
	SrcStatementsCut = "statements beyond --max-statements"
)

// Snapshot is everything the collectors learned about one database.
type Snapshot struct {
	// ShowValues: reports may show the application's values (literal
	// texts sampled from pg_stat_activity); see Shown.
	ShowValues  bool `json:"-"`
	CollectedAt time.Time
	Server      Server
	Database    string
	DatabaseOID uint32
	// User is the role pgmedic is connected as (the fixes grant to it).
	User string
	// Settings are the server-wide values a new session gets (pgmedic's own
	// session overrides are not visible here).
	Settings map[string]Setting
	// RoleSettings are ALTER ROLE / ALTER DATABASE settings (pg_db_role_setting).
	RoleSettings []RoleSetting
	// Roles maps role oids to names.
	Roles map[uint32]string
	// Statements from pg_stat_statements for this database; nil when the
	// view could not be read (see Missing).
	Statements []Statement
	// StatementsHidden counts statements whose text pgmedic may not read
	// (other roles', without pg_read_all_stats), and StatementsHiddenMS
	// their execution time, which pg_stat_statements still shows.
	StatementsHidden   int
	StatementsHiddenMS float64
	// OwnStatements counts pg_stat_statements' entries that are
	// pgmedic's own (this run's or earlier ones'), left out of every
	// rule, and OwnStatementsMS their execution time; StatsUntracked says
	// this run's session kept its statements out of the view.
	OwnStatements   int
	OwnStatementsMS float64
	StatsUntracked  bool
	// Shapes holds the parsed SQL of each statement by queryid; statements
	// that do not parse are counted in Unparsed.
	Shapes   map[int64]*QueryShape
	Unparsed int
	// Plans are EXPLAIN (VERBOSE, FORMAT JSON) outputs of the top
	// statements, generic plans for statements with $n, by queryid.
	Plans map[int64]*plan.Explain
	// PlanErrors says why a top statement has no plan, and PlanErrorFixes
	// what would let pgmedic plan it, by queryid.
	PlanErrors     map[int64]string
	PlanErrorFixes map[int64]string
	// GuessedTypes marks the plans made with parameter types pgmedic
	// guessed (PostgreSQL could not infer them from the normalised text,
	// as in $2 + $3): what such a plan shows of the parameters is
	// pgmedic's, not the application's.
	GuessedTypes map[int64]bool
	// ClientTypes are statements whose observed cost only a plan with
	// another parameter type explains (see ClientType), by queryid.
	ClientTypes map[int64]*ClientType
	// Casts are the catalog facts about the columns the plans read.
	Casts   *CastCatalog
	Tables  []Table
	Indexes []Index
	Columns []Column
	// Extensions installed in this database, name -> version.
	Extensions    map[string]string
	DatabaseStats DatabaseStats
	Activity      Activity
	// LockWaits are backends seen waiting on locks while sampling activity.
	LockWaits []LockWait
	// Holders are what keeps the xmin horizon back: transactions and
	// prepared transactions with an xmin or xid, replication slots,
	// standbys' feedback (every database's; see XminHolder.HoldsDatabase).
	Holders []XminHolder
	// Sequences are the database's sequences with the columns they feed.
	Sequences []Sequence
	// Checkpoints are the server's checkpoint and WAL counters; nil when
	// they could not be read (see Missing).
	Checkpoints *Checkpoints
	// Databases are every database's frozen ages (wraparound is the
	// server's, whatever database check reads), and XIDs the rate at
	// which transaction ids are consumed across the sample.
	Databases []DatabaseAge
	XIDs      *XIDClock
	// Members is the multixact member space; nil when it could not be
	// read (see Missing).
	Members *Members
	// Subtrans is pg_subtrans's lookups across the sample; nil when it
	// was not sampled or could not be read (see Missing).
	Subtrans *Subtrans
	// Autovacuum is what the server's autovacuum workers were doing, read
	// before the sessions are sampled and again after (one reading when
	// check does not sample); nil when it could not be read (see Missing).
	Autovacuum []AutovacuumReading
	// Replication is the server's streaming replication, seen from a
	// primary or from a standby; nil when it could not be read.
	Replication *Replication
	// ServerCores is the server's CPU count as check knows it (--server-cores,
	// or this machine's for a local server).
	ServerCores int
	// CoresGuessed says ServerCores is a guess (a remote server, no
	// --server-cores): no figure may be built on it alone.
	CoresGuessed bool
	// Sampling is the sessions sampled over check's window; nil when
	// sampling was off (--sample 0).
	Sampling *Sampling
	// Logged is what the server's log said over its span, when check read
	// one (--log, or the server's own over the connection); nil otherwise.
	// Connections the server refused are seen only there.
	Logged *LogEvents `json:",omitempty"`
	// Literals are statements as pg_stat_activity showed them while
	// sampling, by queryid: for clients that send literals (the simple
	// protocol), the values the application really used.
	Literals map[int64]string
	lookup   *lookup
	// Missing names sources that could not be collected, with why and the fix.
	Missing map[string]Skip
}

// ClientType is what the parameter-type probe found for one statement.
// pg_stat_statements keeps $n but not the type the client sent for it;
// re-planned with inferred types, a statement comparing an integer column
// with a driver's numeric gets the index plan the application never gets.
// When the observed cost is far above that plan's, the statement is
// planned again with the types drivers send (numeric, double precision,
// text, ...); the type whose plan explains the observed cost is the
// client's.
type ClientType struct {
	Param      int    // the $n
	Type       string // the type the client sends for it
	Column     string // the column it is compared with
	ColumnType string
	// Types is the PREPARE type list that gave Plan ("unknown" where
	// PostgreSQL infers), and Plan the generic plan with the client's type.
	Types []string
	Plan  *plan.Explain
	// BlocksPerCall is the observed cost, InferredCost the cost of the plan
	// with inferred types and ClientCost that of Plan.
	BlocksPerCall, InferredCost, ClientCost float64
}

// Server describes the PostgreSQL server.
type Server struct {
	Version      string
	VersionNum   int
	JITAvailable bool
}

// Setting is one row of pg_settings as a new session would see it.
type Setting struct {
	Name   string
	Value  string
	Unit   string
	Source string // default, configuration file, ... (PostgreSQL's words)
	Boot   string
}

// Float returns the setting as a number (0 when it is not one).
func (s Setting) Float() float64 {
	var f float64
	fmt.Sscan(s.Value, &f)
	return f
}

// RoleSetting is one row of pg_db_role_setting. An empty Role applies to
// every role in Database; an empty Database applies to Role everywhere.
type RoleSetting struct {
	Role     string
	Database string
	Settings map[string]string
}

// Statement is one pg_stat_statements entry (times in milliseconds).
type Statement struct {
	QueryID        int64
	Query          string
	UserID         uint32
	Role           string
	Calls          int64
	TotalExecMS    float64
	TotalPlanMS    float64
	Rows           int64
	SharedBlksHit  int64
	SharedBlksRead int64
	WALFPI         int64
	// TempBlksWritten are the 8 kB blocks the statement wrote to
	// temporary files: sorts, hashes and materialisations past work_mem.
	TempBlksWritten int64
	// The spread of one call's execution time.
	MinExecMS, MaxExecMS, StddevExecMS float64
	// GenericPlans and CustomPlans count the calls that ran the generic
	// plan of a prepared statement and those that ran a custom plan
	// (pg_stat_statements after PostgreSQL 18); -1 where it does not
	// count them (13 to 18).
	GenericPlans, CustomPlans int64
	JIT                       JITStats
	// Parsed is Query parsed once by collect; nil when it does not parse
	// (truncated text, another dialect).
	Parsed *sqlparse.Statement `json:"-"`
	// Fingerprint is pg_query's fingerprint of Query, taken once by
	// collect with the parse (reports and finding ids use it).
	Fingerprint string `json:"-"`
}

// MeanExecMS is the mean execution time per call.
func (s Statement) MeanExecMS() float64 {
	if s.Calls == 0 {
		return 0
	}
	return s.TotalExecMS / float64(s.Calls)
}

// BuffersPerCall is the shared blocks a call touched on average (found in
// shared buffers or read): the work, whatever the moment it ran at.
func (s Statement) BuffersPerCall() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.SharedBlksHit+s.SharedBlksRead) / float64(s.Calls)
}

// JITStats are the jit_* columns of pg_stat_statements (PG15+).
type JITStats struct {
	Available         bool
	Functions         int64
	GenerationMS      float64
	InliningCount     int64
	InliningMS        float64
	OptimizationCount int64
	OptimizationMS    float64
	EmissionCount     int64
	EmissionMS        float64
}

// TotalMS is all JIT time. PostgreSQL counts it inside execution time.
// (PG17's deform time is part of generation time, so it is not added.)
func (j JITStats) TotalMS() float64 {
	return j.GenerationMS + j.InliningMS + j.OptimizationMS + j.EmissionMS
}

// DatabaseStats come from pg_stat_database.
type DatabaseStats struct {
	Available         bool
	Sessions          int64
	SessionsAbandoned int64
	StatsReset        *time.Time
	// Blocks found in shared buffers and read from outside them (the
	// page cache or the disk), and the time those reads took when
	// track_io_timing is on (every version): what a page read costs on
	// this server. BlocksKnown is false when they could not be read.
	BlocksKnown       bool
	BlksHit, BlksRead int64
	BlkReadMS         float64
}

// Activity is a sample of pg_stat_activity, used to judge load.
type Activity struct {
	Active         int
	Total          int
	MaxConnections int
}

// Unseen is a part of the database check could not see, with how much of
// it and the grant that shows it: a report that found nothing in what it
// saw must not read as a clean bill of health.
type Unseen struct {
	What  string `json:"what"`
	Count int    `json:"count,omitempty"`
	// Share is its part of the database's statement time, when known
	// (-1: not known).
	Share float64 `json:"share_of_time"`
	Fix   string  `json:"fix"`
	// Blocks says a check that found nothing else cannot call the
	// database healthy (exit code 4 instead of 0).
	Blocks bool `json:"blocks_all_clear"`
}

// Skip says why a rule (or part of one) did not run, and the one-line fix.
type Skip struct {
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	Fix    string `json:"fix,omitempty"`
}

// Finding is one diagnosed problem, the same for every output format.
type Finding struct {
	// ID names the finding across runs (see Identity); reports fill it.
	ID           string       `json:"id,omitempty"`
	Rule         string       `json:"rule"`
	Severity     Severity     `json:"severity"`
	Title        string       `json:"title"`
	Object       Object       `json:"object"`
	Evidence     []Evidence   `json:"evidence"`
	Impact       Impact       `json:"impact"`
	Fix          Fix          `json:"fix"`
	Verification Verification `json:"verification"`
	Docs         string       `json:"docs"`

	// Experiment is what the verification engine should run to prove the
	// finding; nil when there is nothing to run.
	Experiment *Experiment `json:"-"`
}

// Clamp makes the finding printable: each statement of its fix ends with
// one semicolon, and every figure is finite: a rule's arithmetic on
// huge (but valid) plan figures can overflow to infinity, which JSON cannot
// carry and no person can read. Infinities become the largest float64, NaN
// becomes 0.
func (f *Finding) Clamp() {
	f.ID = f.Identity()
	f.Fix.SQL = oneSemicolon(f.Fix.SQL)
	for i := range f.Evidence {
		f.Evidence[i].Value = finite(f.Evidence[i].Value)
	}
	f.Impact.Share = finite(f.Impact.Share)
	for _, m := range []*Measure{f.Verification.Before, f.Verification.After} {
		if m != nil {
			m.Value = finite(m.Value)
		}
	}
}

// Identity is the finding's id: its rule and a hash of what it is about,
// not of its wording or figures, so the same problem keeps its id from one
// run to the next ("missing-index/3f2a9c1b"); `replay --fix` and
// `check --baseline` match findings by it.
//
// A statement is named by its fingerprint when the finding has one
// (pg_query's, of the normalised text): pg_stat_statements' queryid hashes
// the OIDs of the tables a statement reads, so the same statement on a
// database created afresh (every CI run) gets another queryid. A session's
// pid is left out for the same reason: the next run's session doing the
// same thing is the same problem.
func (f *Finding) Identity() string {
	h := fnv.New32a()
	for _, part := range []string{f.Rule, f.Object.Kind, f.Object.subject(), f.Object.Role, f.Object.Database} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s/%08x", f.Rule, h.Sum32())
}

// subject is what Identity hashes of the object beside its kind, role and
// database (see Identity).
func (o Object) subject() string {
	name := o.Name
	if o.Kind == "session" {
		if rest, ok := strings.CutPrefix(name, "pid "); ok {
			if _, after, ok := strings.Cut(rest, ": "); ok {
				name = after
			}
		}
	}
	if o.Fingerprint == "" {
		return name + "\x00" + o.QueryID
	}
	// A statement's finding may name the table it is about before the
	// text ("public.jobs: SELECT ..."): two findings of one statement on
	// two tables are two problems.
	if prefix, _, ok := strings.Cut(name, ": "); ok && !strings.ContainsAny(prefix, " \t") && o.Kind != "session" {
		return prefix + "\x00" + o.Fingerprint
	}
	return o.Fingerprint
}

// finite is x with NaN as 0 and infinities as the largest float64.
// oneSemicolon ends each statement of a fix with one semicolon: a fix
// built from a statement the application sent with its own semicolon
// must not print ";;".
func oneSemicolon(sql string) string {
	if !strings.Contains(sql, ";;") && !strings.Contains(sql, "; ;") {
		return sql
	}
	lines := strings.Split(sql, "\n")
	for i, l := range lines {
		code, comment, hasComment := strings.Cut(l, "--")
		trimmed := strings.TrimRight(code, " \t")
		pad := code[len(trimmed):]
		for strings.HasSuffix(trimmed, ";;") || strings.HasSuffix(trimmed, "; ;") {
			trimmed = strings.TrimRight(strings.TrimSuffix(trimmed, ";"), " ")
		}
		l = trimmed + pad
		if hasComment {
			l += "--" + comment
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

func finite(x float64) float64 {
	switch {
	case math.IsNaN(x):
		return 0
	case math.IsInf(x, 1):
		return math.MaxFloat64
	case math.IsInf(x, -1):
		return -math.MaxFloat64
	}
	return x
}

// Object is what a finding is about.
type Object struct {
	Kind    string `json:"kind"` // statement, setting, role, table, ...
	Name    string `json:"name"`
	QueryID string `json:"queryid,omitempty"`
	// Fingerprint is pg_query's fingerprint of the statement's text, for
	// objects that are statements (or sessions running one): the same
	// statement on another server or a database created again keeps it,
	// where its queryid changes (see Finding.Identity).
	Fingerprint string `json:"fingerprint,omitempty"`
	Role        string `json:"role,omitempty"`
	Database    string `json:"database,omitempty"`
}

// Evidence is one measured or collected figure.
type Evidence struct {
	Label string  `json:"label"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Fact marks a label that says it all ("jit for role app is on
	// (default)", "hot frame = qsort_tuple"): Value is 1 for true, 0 for
	// false, and reports show the label alone.
	Fact bool `json:"fact,omitempty"`
}

// Impact says how much the problem costs.
type Impact struct {
	Summary string  `json:"summary"`
	Share   float64 `json:"share"`
}

// Fix is what to do, as a sentence and as SQL ready to paste.
type Fix struct {
	Summary string `json:"summary"`
	SQL     string `json:"sql,omitempty"`
}

// Verification statuses.
const (
	Confirmed = "confirmed"
	Refuted   = "refuted"
	Estimated = "estimated"
	NotRun    = "not-run"
)

// Verification is the outcome of the experiment behind a finding.
type Verification struct {
	Status string   `json:"status"`
	Method string   `json:"method,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Before *Measure `json:"before,omitempty"`
	After  *Measure `json:"after,omitempty"`
	// Parameters are the values a normalised statement was re-run with,
	// one "$n = value (where it came from)" each.
	Parameters []string `json:"parameters,omitempty"`
	// Where is where the experiment ran, when not on the target itself:
	// "twin (PostgreSQL 15.20, lab cluster; full copy of public.orders,
	// 200,000 rows)". A measurement on a sample says so here.
	Where string `json:"where,omitempty"`
}

// NotRunBecause is the verification of a finding whose experiment did not
// run, with the reason a person reads.
func NotRunBecause(reason string) Verification {
	return Verification{Status: NotRun, Reason: reason}
}

// Measure is one measured number.
type Measure struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// HigherIsBetter marks figures that improve upwards (leaf density);
	// times, sizes and misestimates improve downwards.
	HigherIsBetter bool `json:"higher_is_better,omitempty"`
}

// Gain is how many times better after is than before: before/after for
// figures that improve downwards, after/before for those that improve
// upwards; 0 when it cannot be told.
func (v Verification) Gain() float64 {
	if v.Before == nil || v.After == nil {
		return 0
	}
	b, a := v.Before.Value, v.After.Value
	if v.Before.HigherIsBetter {
		b, a = a, b
		if a <= 0 && b > 0 {
			return math.Inf(1) // from nothing to something
		}
	}
	if a <= 0 {
		return 0
	}
	return b / a
}

// Experiment kinds.
const (
	// ExpJITToggle re-runs a statement with jit on and off.
	ExpJITToggle = "jit-toggle"
	// ExpAggregate derives a setting-level result from the statement
	// experiments of the same run.
	ExpAggregate = "aggregate"
	// ExpIndex tries a proposed index: HypoPG cost, then a measured run on
	// a temporary copy of the table when allowed.
	ExpIndex = "index"
	// ExpIndexStats reads pgstatindex figures of an existing index.
	ExpIndexStats = "pgstatindex"
	// ExpTableStats reads pgstattuple figures of a table.
	ExpTableStats = "pgstattuple"
	// ExpMisestimate runs EXPLAIN ANALYZE to measure a row misestimate and,
	// with copies allowed, again on a freshly analysed temporary copy.
	ExpMisestimate = "misestimate"
	// ExpCast re-plans and times a query with the value cast to the
	// column's type instead of the column cast to the value's.
	ExpCast = "cast"
	// ExpHotspot re-runs a CPU hot spot's statement as the application
	// ran it and with the fix while perf records pgmedic's own backend.
	ExpHotspot = "hotspot"
	// ExpClaimRace runs a queue's claim from concurrent workers as
	// written and with FOR UPDATE SKIP LOCKED, counting rows claimed
	// twice (on a twin or a lab database only).
	ExpClaimRace = "claim-race"
	// ExpLockQueue reproduces a schema change queued behind a lock: a
	// session holding the lock as the head did, the change, and readers
	// running the waiting statement, as written and with lock_timeout and
	// retries (on a twin only).
	ExpLockQueue = "lock-queue"
	// ExpHeldLock reproduces sessions waiting behind a transaction left
	// idle: a session taking the head's locks and sitting idle, and
	// sessions running the waiting statement, as it happened and with
	// idle_in_transaction_session_timeout (on a twin only).
	ExpHeldLock = "held-lock"
	// ExpDDLHold reproduces statements queued behind a schema change that
	// holds its lock while it runs (a CREATE INDEX blocking writes): a
	// session holding the change's lock for a while and sessions running
	// the waiting statement, then the same with the lock the fix takes
	// (CONCURRENTLY's SHARE UPDATE EXCLUSIVE) (on a twin only).
	ExpDDLHold = "ddl-hold"
	// ExpCheckpointWAL measures what a checkpoint costs the writes after
	// it: the WAL of one batch of updates to a table's rows right after a
	// CHECKPOINT (every page written whole again, full_page_writes)
	// against the same batch with no checkpoint between (on a twin only).
	ExpCheckpointWAL = "checkpoint-wal"
	// ExpIndexWrites measures what indexes cost the table's writes: rows
	// of the table inserted into a copy with all its indexes and without
	// the named ones, WAL and time per row (on a twin or a lab database
	// only).
	ExpIndexWrites = "index-writes"
	// ExpConcurrency replays the sampled statement mix at the observed
	// concurrency as the clients ran it and through a pool of the
	// proposed size, measuring goodput and p95 (on a twin only).
	ExpConcurrency = "concurrency"
	// ExpHeldSessions replays clients that each hold a session, more of
	// them than the server admits, against the same clients through a
	// pool (Slots, ThinkMS): refusals and goodput.
	ExpHeldSessions = "held-sessions"
	// ExpHOTUpdate applies an UPDATE's SET list to rows of a copy of the
	// table with all its indexes and without those the update's columns
	// are in, counting HOT updates and WAL per row (on a twin or a lab
	// database only).
	ExpHOTUpdate = "hot-update"
	// ExpHorizon counts the dead rows VACUUM can remove from rows of a
	// table updated once while another session holds a snapshot taken
	// before the update, and once with none held (on a twin or a lab
	// database only).
	ExpHorizon = "vacuum-horizon"
	// ExpIndexRebuild measures an index as it is (its size, pgstatindex's
	// leaf density where installed) and a fresh build of it on a copy of
	// the table's rows: what REINDEX would leave.
	ExpIndexRebuild = "index-rebuild"
	// ExpVacuumThrottle times VACUUM on two identical copies of a table's
	// rows with a third of them deleted: one at the throttle autovacuum
	// runs it at now (AppSettings: vacuum_cost_delay, vacuum_cost_limit),
	// one at the proposed throttle (FixSettings) (on a twin or a lab
	// database only).
	ExpVacuumThrottle = "vacuum-throttle"
	// ExpWorkMem re-runs a statement that spills to disk with work_mem as
	// its role has it and at the size the spill asks for (FixSettings),
	// read-only and rolled back.
	ExpWorkMem = "work-mem"
	// ExpGenericPlan runs a prepared statement under its generic plan and
	// under custom plans (plan_cache_mode, SET LOCAL) for the most common
	// values of the skewed column it compares Param with, and a few
	// others, read-only and rolled back.
	ExpGenericPlan = "generic-plan"
	// ExpPartitionPruning runs a statement on a partitioned table as
	// written and with its predicate on the key rewritten as a range
	// (Rewrite), counting the partitions each scans, read-only and
	// rolled back.
	ExpPartitionPruning = "partition-pruning"
	// ExpExtendedStats runs a statement on a freshly analysed copy of a
	// table (on the twin, or a temporary one) before and after CREATE
	// STATISTICS (dependencies, ndistinct, mcv) on StatColumns: the row
	// estimate at the table's scans and the time, both ways.
	ExpExtendedStats = "extended-statistics"
	// ExpBatch times a lookup by key run Calls times, one round trip
	// each, against one run of Rewrite (the key = ANY($n) form) with the
	// same keys, read-only and rolled back.
	ExpBatch = "batch"
	// ExpPlannerSetting plans the top statements with the planner
	// settings as they are and with FixSettings (SET LOCAL), and times
	// those whose plan changes both ways, read-only and rolled back.
	ExpPlannerSetting = "planner-setting"
	// ExpFreeze runs VACUUM (FREEZE) on the twin's copy of a table past
	// its freeze age: the copy's oldest age before and after, and the time.
	ExpFreeze = "freeze"
	// ExpNotifyCommits times concurrent one-row write transactions with a
	// NOTIFY in each and then without it (the outbox's form): commits per
	// second on each side, on a database pgmedic may write to.
	ExpNotifyCommits = "notify-commits"
	// ExpTruncateWaits makes a table with an empty end on a database
	// pgmedic may write to, and has sessions read it while VACUUM runs
	// with TRUNCATE false and then truncates: the reads seen waiting on
	// the table's lock on each side, and the longest read.
	ExpTruncateWaits = "truncate-waits"
	// ExpSubtransReads has a session read rows written after a long
	// transaction began, on a database pgmedic may write to, while that
	// transaction is held open with 70 subtransactions (its cache
	// overflowed) and then with none: pg_subtrans lookups per read and
	// the read's time on each side.
	ExpSubtransReads = "subtrans-reads"
	// ExpKeyWiden tries the first number past a key's limit (Limit, of
	// ColumnType: Column's, or the sequence's when Column is empty) on a
	// copy before and after widening it to bigint.
	ExpKeyWiden = "key-widen"
)

// IndexProposal is an index a rule proposes, as fields rather than SQL
// text: verify creates it as a HypoPG hypothetical index and on a copy of
// the table, and the fix is written from the same fields (SQL).
type IndexProposal struct {
	Name  string
	Table RelRef
	Keys  []IndexKey
	// Where is the partial index's predicate as SQL ("" for none).
	Where string `json:",omitempty"`
}

// SQL is the CREATE INDEX statement for the proposal, named and on its
// table; CONCURRENTLY (which cannot run in a transaction block, nor on a
// partitioned table) when concurrently is set.
func (p IndexProposal) SQL(concurrently bool) string {
	verb := "CREATE INDEX "
	if concurrently {
		verb = "CREATE INDEX CONCURRENTLY "
	}
	return verb + sqlparse.QuoteIdent(p.Name) + " ON " + sqlparse.QuoteQualified(p.Table.Schema, p.Table.Name) + p.Tail()
}

// On is the CREATE INDEX statement without a name on another relation:
// the copy of the table an experiment measures on.
func (p IndexProposal) On(relation string) string {
	return "CREATE INDEX ON " + relation + p.Tail()
}

// Tail is the key list and predicate: " (a, b DESC) WHERE c IS NULL".
func (p IndexProposal) Tail() string {
	cols := make([]string, len(p.Keys))
	for i, k := range p.Keys {
		cols[i] = sqlparse.QuoteIdent(k.Column)
		if k.Opclass != "" {
			cols[i] += " " + k.Opclass
		}
		if k.Desc {
			cols[i] += " DESC"
		}
	}
	s := " (" + strings.Join(cols, ", ") + ")"
	if p.Where != "" {
		s += " WHERE " + p.Where
	}
	return s
}

// IndexKey is one key column of a proposed B-tree index.
type IndexKey struct {
	Column string
	Desc   bool `json:",omitempty"`
	// Opclass is the key's operator class when it is not the type's
	// default (text_pattern_ops, for LIKE 'abc%' under a collation
	// that is not C).
	Opclass string `json:",omitempty"`
}

// Experiment describes the test that can prove a finding.
type Experiment struct {
	Kind string
	// Query is the statement's text and Stmt the same statement parsed
	// (the one collect parsed, when it came from pg_stat_statements).
	Query   string
	Stmt    *sqlparse.Statement `json:"-"`
	QueryID int64
	Role    string
	// Settings to apply (SET LOCAL) for the "as the application runs it"
	// side, e.g. the role's own jit thresholds.
	AppSettings map[string]string
	// FixSettings are the settings of the fixed side, where the fix is a
	// setting (a vacuum throttle).
	FixSettings map[string]string `json:",omitempty"`
	// Calls weights a statement in an aggregate; Rows/Calls is what the
	// statement returns per call, the value a LIMIT $n is re-run with.
	Calls int64
	Rows  int64
	// MeanMS is the statement's mean execution time in pg_stat_statements
	// and ReadShare the share of its buffers read from outside shared
	// buffers: what the application's calls cost, beside what a copy shows.
	MeanMS    float64 `json:",omitempty"`
	ReadShare float64 `json:",omitempty"`
	// MaxMS is the statement's slowest call in pg_stat_statements, and
	// BuffersPerCall the shared blocks its calls touched on average.
	MaxMS          float64 `json:",omitempty"`
	BuffersPerCall float64 `json:",omitempty"`
	// StatColumns are the columns extended statistics are built on.
	StatColumns []string `json:",omitempty"`
	// Table is the table an index, key or bloat experiment looks at.
	Table RelRef
	// Proposal is the index an index experiment tries.
	Proposal *IndexProposal `json:",omitempty"`
	// Index is the existing index a pgstatindex experiment reads;
	// Indexes those a hot-update experiment leaves out.
	Index   string
	Indexes []string `json:",omitempty"`
	// Column and ColumnType are what an implicit-cast experiment compares
	// in the column's own type; CastType is the type the plan cast it to.
	Column, ColumnType, CastType string
	// Limit is the last number a key-widen experiment's type holds.
	Limit int64 `json:",omitempty"`
	// KeepValue: drop the cast on the column and leave the value alone,
	// because the index's operator family compares the two types directly.
	KeepValue bool
	// ClientTypes, for a cast the client's parameter type causes, is the
	// PREPARE type list the client's statement gets and Param its $n: the
	// experiment prepares the statement with them, then with the column's
	// type at Param, instead of rewriting the text.
	ClientTypes []string `json:",omitempty"`
	Param       int      `json:",omitempty"`
	// Rewrite is the fixed statement a claim race runs on its second side.
	Rewrite string `json:",omitempty"`
	// Waiter is a statement queued behind a lock (with its values, as
	// pg_stat_activity showed it) and HeadLock the lock mode the head of
	// the queue held on Table: what a lock-queue reproduction replays. They
	// are never reported.
	Waiter   string `json:"-"`
	HeadLock string `json:"-"`
	// Change is a schema change queued between a held lock's head and its
	// waiters (an ALTER waiting behind an idle transaction, reads queued
	// behind the ALTER): a held-lock reproduction queues it the same way.
	Change string `json:"-"`
	// FixLock is the lock mode the fixed change takes instead of
	// HeadLock (a ddl-hold reproduction's second side), in LOCK TABLE's words.
	FixLock string `json:"-"`
	// IdleMS is how long the head of a held-lock chain was seen idle in
	// its transaction, and TimeoutMS the idle_in_transaction_session_timeout
	// the fix proposes (below it, so that it would have ended that
	// transaction): what a held-lock reproduction holds and sets.
	IdleMS    float64 `json:",omitempty"`
	TimeoutMS float64 `json:",omitempty"`
	// Mix is the statement mix a concurrency experiment replays (texts as
	// the sampler saw them, repeated as often as they were seen), Clients
	// the sessions that ran it, Pool the server connections the fix
	// proposes and PoolNow those the clients had (0: none, they connected
	// directly); Cores is the server's, to scale the clients to the
	// twin's machine. Reconnect: the clients opened a session per request.
	Mix       []string `json:"-"`
	Clients   int      `json:",omitempty"`
	Pool      int      `json:",omitempty"`
	PoolNow   int      `json:",omitempty"`
	Cores     int      `json:",omitempty"`
	Reconnect bool     `json:",omitempty"`
	// Slots are the connections the server admitted the clients of a
	// held-connections replay (max_connections less the reserved ones),
	// and ThinkMS how long each client sat idle between its statements:
	// such a replay holds a session per client, as they did, against a
	// pool.
	Slots   int     `json:",omitempty"`
	ThinkMS float64 `json:",omitempty"`
	// Hotspot is the kind of CPU hot spot a hotspot experiment measures
	// (one of the cpu-hotspot rule's kinds: jit, timezone, ...).
	Hotspot string `json:",omitempty"`
}

// Percentile is the p-th percentile (0 to 1) of sorted figures by the
// nearest rank, 0 for none: the smallest figure with at least that share
// of them at or below it (for 20 figures, p95 is the 19th). It is the one
// definition every report uses (logs, replay, the experiments).
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// The small allowance keeps 0.95 x 20, which floating point makes
	// 19.000000000000004, at rank 19.
	rank := int(math.Ceil(p*float64(len(sorted)) - 1e-9))
	return sorted[max(0, min(rank-1, len(sorted)-1))]
}

// Round rounds a figure to places decimals for reports, half away from
// zero. Figures of 1e12 and more, NaN and infinities are returned as they
// are: scaling them could overflow, and Clamp deals with the last two.
func Round(x float64, places int) float64 {
	if math.Abs(x) >= 1e12 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	scale := math.Pow(10, float64(places))
	return math.Round(x*scale) / scale
}

// Remeasured is a statement run again to tell a regression from noise
// (check --baseline): its median execution time now, the plan it ran, and
// when the baseline's plan differs and settings bring it back, the same
// statement with the same values run with that plan too.
type Remeasured struct {
	Runs     int     `json:"runs"`
	MedianMS float64 `json:"median_ms"`
	Plan     string  `json:"plan,omitempty"`
	// BaselinePlanMS is the median with the baseline's plan, got back with
	// BaselineSettings ("enable_seqscan=off"); 0 when it was not.
	BaselinePlanMS   float64 `json:"baseline_plan_median_ms,omitempty"`
	BaselineSettings string  `json:"baseline_plan_settings,omitempty"`
	// Values are the parameter values both sides ran with.
	Values []string `json:"values,omitempty"`
	// Why says why it was not re-run ("" when it was).
	Why string `json:"not_run,omitempty"`
}

// String says what the re-run measured, for the report.
func (r Remeasured) String() string {
	if r.Why != "" {
		return r.Why
	}
	s := fmt.Sprintf("re-run x%d now: median %.3g ms", r.Runs, r.MedianMS)
	if r.BaselinePlanMS > 0 {
		s += fmt.Sprintf("; with the baseline's plan (%s), same values: %.3g ms", r.BaselineSettings, r.BaselinePlanMS)
	}
	return s
}
