// Package pgversion is the one table of what each PostgreSQL major
// version has that pgmedic reads or sets. Code asks Of(version).Field
// instead of comparing version numbers, so a difference between versions
// is written once, here, with the version that brought it.
package pgversion

import "fmt"

// Has is what one major version offers.
type Has struct {
	Major int
	// QueryIDInActivity: pg_stat_activity.query_id and the
	// compute_query_id setting (14). Without it the sampler cannot tie a
	// session to its pg_stat_statements entry.
	QueryIDInActivity bool
	// SessionStats: pg_stat_database.sessions, sessions_abandoned,
	// sessions_fatal, sessions_killed (14).
	SessionStats bool
	// StatWAL: the pg_stat_wal view, WAL bytes and full-page images since
	// its reset (14).
	StatWAL bool
	// JSONLog: log_destination = 'jsonlog' (15).
	JSONLog bool
	// PGSSJIT: pg_stat_statements' jit_* columns (15); PGSSSharedBlkTime:
	// blk_read_time renamed shared_blk_read_time (17).
	PGSSJIT, PGSSSharedBlkTime bool
	// StatIO: the pg_stat_io view (16).
	StatIO bool
	// Checkpointer: checkpoint counters in pg_stat_checkpointer rather
	// than pg_stat_bgwriter (17).
	Checkpointer bool
	// ExplainGenericPlan: EXPLAIN (GENERIC_PLAN) (16); ExplainSerialize and
	// ExplainMemory: EXPLAIN's SERIALIZE and MEMORY options (17).
	ExplainGenericPlan, ExplainSerialize, ExplainMemory bool
	// AnalyzeBuffers: EXPLAIN ANALYZE reports buffers without being asked
	// (18), and index scans say how many searches they made.
	AnalyzeBuffers bool
	// ICULocale: CREATE DATABASE ... LOCALE_PROVIDER icu ICU_LOCALE (15).
	ICULocale bool
	// VacuumReloadsCost: a running autovacuum worker takes a reloaded
	// cost limit or delay at once (16); before, at its next table.
	VacuumReloadsCost bool
	// ClientCheck: client_connection_check_interval notices a client that
	// went away while its statement runs (14, on Linux).
	ClientCheck bool
	// WorkerSlots: autovacuum_max_workers changes with a reload, up to
	// autovacuum_worker_slots (18); before, a restart.
	WorkerSlots bool
	// BackendSubxact: pg_stat_get_backend_subxact(), a session's
	// subtransaction count and whether its cache overflowed (16).
	BackendSubxact bool
	// SubtransBuffers: the subtransaction_buffers setting, pg_subtrans's
	// buffers sized apart from shared_buffers' 32 pages (17).
	SubtransBuffers bool
}

// Table holds every major version pgmedic supports, oldest first.
var Table = []Has{
	{Major: 13},
	{Major: 14, QueryIDInActivity: true, SessionStats: true, ClientCheck: true, StatWAL: true},
	{Major: 15, QueryIDInActivity: true, SessionStats: true, ClientCheck: true, StatWAL: true, JSONLog: true, PGSSJIT: true, ICULocale: true},
	{Major: 16, QueryIDInActivity: true, SessionStats: true, ClientCheck: true, StatWAL: true, JSONLog: true, PGSSJIT: true, ICULocale: true, StatIO: true, ExplainGenericPlan: true,
		VacuumReloadsCost: true, BackendSubxact: true},
	{Major: 17, QueryIDInActivity: true, SessionStats: true, ClientCheck: true, StatWAL: true, JSONLog: true, PGSSJIT: true, ICULocale: true, StatIO: true, ExplainGenericPlan: true,
		PGSSSharedBlkTime: true, Checkpointer: true, ExplainSerialize: true, ExplainMemory: true, VacuumReloadsCost: true,
		BackendSubxact: true, SubtransBuffers: true},
	{Major: 18, QueryIDInActivity: true, SessionStats: true, ClientCheck: true, StatWAL: true, JSONLog: true, PGSSJIT: true, ICULocale: true, StatIO: true, ExplainGenericPlan: true,
		PGSSSharedBlkTime: true, Checkpointer: true, ExplainSerialize: true, ExplainMemory: true, AnalyzeBuffers: true, VacuumReloadsCost: true, WorkerSlots: true,
		BackendSubxact: true, SubtransBuffers: true},
}

// Oldest and Newest bound the versions pgmedic supports: the table's
// first and last rows. Adding a major is its row here, and its locked
// build for the lab (internal/lab/postgres/N).
var (
	Oldest = Table[0].Major
	Newest = Table[len(Table)-1].Major
)

// Majors are the supported major versions, oldest first.
func Majors() []int {
	ms := make([]int, len(Table))
	for i, h := range Table {
		ms[i] = h.Major
	}
	return ms
}

// Range says which majors pgmedic supports, for messages: "13 to 18".
func Range() string { return fmt.Sprintf("%d to %d", Oldest, Newest) }

// Major is the major version of a server_version_num (170004 -> 17).
func Major(versionNum int) int { return versionNum / 10000 }

// Of is what the server of a server_version_num has. A version newer than
// the table is taken to have what the newest has; an older one, what the
// oldest has (Supported says whether it is one pgmedic was tested on).
func Of(versionNum int) Has {
	m := Major(versionNum)
	if versionNum == 0 { // unknown: assume the newest
		m = Newest
	}
	for _, h := range Table {
		if h.Major == m {
			return h
		}
	}
	if m > Newest {
		h := Table[len(Table)-1]
		h.Major = m
		return h
	}
	h := Table[0]
	h.Major = m
	return h
}

// ForMajor is Of for a major version number.
func ForMajor(major int) Has { return Of(major * 10000) }

// Supported says whether pgmedic supports the major version, and if not,
// what to say.
func Supported(versionNum int) (bool, string) {
	m := Major(versionNum)
	if m < Oldest {
		return false, fmt.Sprintf("PostgreSQL %d is older than %d, the oldest pgmedic reads", m, Oldest)
	}
	if m > Newest {
		return false, fmt.Sprintf("PostgreSQL %d is newer than %d, the newest pgmedic was tested on: some readings may be missing", m, Newest)
	}
	return true, ""
}

// Lacks says, for a reason shown to a user, that the version lacks a
// feature that arrived in a later one: "PostgreSQL 13 has no
// pg_stat_activity.query_id (it arrived in 14)".
func (h Has) Lacks(what string, since int) string {
	return fmt.Sprintf("PostgreSQL %d has no %s (it arrived in %d)", h.Major, what, since)
}
