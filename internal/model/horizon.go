package model

import "time"

// Kinds of XminHolder.
const (
	HolderSession  = "session"  // a client backend's open transaction or running statement
	HolderPrepared = "prepared" // a prepared transaction (PREPARE TRANSACTION) not yet committed or rolled back
	HolderSlot     = "slot"     // a replication slot's xmin or catalog_xmin
	HolderStandby  = "standby"  // a standby's hot_standby_feedback, through its WAL sender
)

// XminHolder is one thing that keeps the server's xmin horizon back: no
// VACUUM may remove a row version that died after the oldest transaction
// any of them can still see. PostgreSQL keeps one horizon per database for
// its tables (sessions and prepared transactions count in their own
// database only) and one for the whole cluster (slots and standbys count
// in every database).
type XminHolder struct {
	Kind string `json:"kind"`
	// Name is what the fix names: the backend's pid, the prepared
	// transaction's gid, the slot's name, the standby's application_name.
	Name     string `json:"name"`
	PID      int    `json:"pid,omitempty"`
	Database string `json:"database,omitempty"` // "" for a physical slot or a standby: every database
	User     string `json:"user,omitempty"`
	App      string `json:"application,omitempty"`
	Client   string `json:"client,omitempty"`
	State    string `json:"state,omitempty"`
	Query    string `json:"query,omitempty"`
	// XminAge is how many transactions the server has started since the
	// oldest one it holds (age() of its xmin or xid, whichever is older).
	XminAge int64 `json:"xmin_age"`
	// CatalogOnly: a logical slot's catalog_xmin, which holds back the
	// system catalogs only, not the application's tables.
	CatalogOnly bool `json:"catalog_only,omitempty"`
	// Since is when it began (the transaction's start, the PREPARE); nil
	// for a slot or a standby, whose start the server does not keep.
	Since *time.Time `json:"since,omitempty"`
	// Active is false for a slot no consumer is connected to.
	Active bool `json:"active"`
	// RetainedWAL is the WAL a slot keeps on the primary's disk (bytes
	// from its restart_lsn to the current WAL position).
	RetainedWAL int64 `json:"retained_wal_bytes,omitempty"`
}

// HeldFor is how long the holder has held the horizon at the snapshot's
// time; 0 when its start is not known.
func (h XminHolder) HeldFor(at time.Time) time.Duration {
	if h.Since == nil || at.Before(*h.Since) {
		return 0
	}
	return at.Sub(*h.Since)
}

// HoldsDatabase says whether the holder keeps back the horizon of db's
// tables: a session or prepared transaction of that database, a slot with
// an xmin (not only a catalog_xmin), a standby's feedback.
func (h XminHolder) HoldsDatabase(db string) bool {
	switch h.Kind {
	case HolderSession, HolderPrepared:
		return h.Database == db
	case HolderSlot:
		return !h.CatalogOnly && (h.Database == "" || h.Database == db)
	}
	return true
}
