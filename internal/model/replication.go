package model

// Replication is what the server says of streaming replication: on a
// primary its standbys and slots, on a standby its own replay. It is read
// before the sessions are sampled and again after (one reading when check
// does not sample), so that what moved in between is measured.
type Replication struct {
	// InRecovery: the server checked is a standby.
	InRecovery bool                 `json:"in_recovery"`
	Readings   []ReplicationReading `json:"readings"`
	// Slots are the server's replication slots (as of the last reading).
	Slots []ReplicationSlot `json:"slots,omitempty"`
}

// ReplicationReading is one look, on the server's clock (At, seconds since
// the epoch). WAL positions are bytes from 0/0.
type ReplicationReading struct {
	At float64 `json:"at"`
	// WAL is the primary's current WAL position, or on a standby the last
	// position it received.
	WAL int64 `json:"wal"`
	// Standbys are the primary's WAL senders (pg_stat_replication).
	Standbys []StandbyStatus `json:"standbys,omitempty"`
	// On a standby: the position replayed, how long ago the last
	// transaction replayed had committed on the primary (-1: none yet),
	// whether replay is paused, the WAL receiver's status ("" for none),
	// what the startup process waits for ("RecoveryConflictSnapshot"),
	// this database's queries cancelled by recovery conflicts since the
	// statistics were reset, and the sessions with the oldest snapshots.
	Replayed     int64          `json:"replayed,omitempty"`
	ReplayDelayS float64        `json:"replay_delay_s,omitempty"`
	Paused       bool           `json:"paused,omitempty"`
	Receiver     string         `json:"receiver,omitempty"`
	StartupWait  string         `json:"startup_wait,omitempty"`
	Conflicts    ConflictCounts `json:"conflicts"`
	OldestQuery  []StandbyQuery `json:"oldest_queries,omitempty"`
}

// StandbyStatus is one standby as its primary's WAL sender sees it.
type StandbyStatus struct {
	PID    int    `json:"pid"`
	Name   string `json:"name"` // application_name
	Client string `json:"client,omitempty"`
	State  string `json:"state"` // streaming, catchup, backup, startup, stopping
	Sync   string `json:"sync_state"`
	// Positions the standby reported written, flushed and replayed, and
	// the one sent to it; the lags are PostgreSQL's (seconds, -1 when it
	// has none: caught up, or not measured yet).
	Sent, Written, Flushed, Replayed int64
	WriteLagS, FlushLagS, ReplayLagS float64
	// Hidden: the role may not see its positions (pg_read_all_stats).
	Hidden bool `json:"hidden,omitempty"`
}

// ReplicationSlot is one replication slot.
type ReplicationSlot struct {
	Name     string `json:"name"`
	Type     string `json:"type"` // physical, logical
	Database string `json:"database,omitempty"`
	Active   bool   `json:"active"`
	// Retained is the WAL it keeps on the primary's disk (from its
	// restart_lsn); WALStatus is pg_replication_slots.wal_status (reserved,
	// extended, unreserved, lost) and SafeBytes how much more WAL may be
	// written before it is lost (-1: no max_slot_wal_keep_size).
	Retained  int64  `json:"retained_bytes"`
	WALStatus string `json:"wal_status,omitempty"`
	SafeBytes int64  `json:"safe_wal_bytes"`
	// HoldsXmin: it keeps an xmin too (xmin-horizon reports that).
	HoldsXmin bool `json:"holds_xmin,omitempty"`
}

// ConflictCounts are pg_stat_database_conflicts' queries cancelled on a
// standby, by what they conflicted with.
type ConflictCounts struct {
	Tablespace, Lock, Snapshot, BufferPin, Deadlock int64
}

// Total is every cancelled query.
func (c ConflictCounts) Total() int64 {
	return c.Tablespace + c.Lock + c.Snapshot + c.BufferPin + c.Deadlock
}

// StandbyQuery is a session on a standby with a snapshot open: what
// replay may wait for.
type StandbyQuery struct {
	PID   int     `json:"pid"`
	User  string  `json:"user,omitempty"`
	App   string  `json:"application,omitempty"`
	State string  `json:"state,omitempty"`
	Query string  `json:"query,omitempty"`
	XactS float64 `json:"xact_s"`
}
