package migration

import (
	"slices"
	"sync"

	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// PostgreSQL's table lock modes, weakest first, as pg_locks spells them.
const (
	AccessShare          = "AccessShareLock"
	RowShare             = "RowShareLock"
	RowExclusive         = "RowExclusiveLock"
	ShareUpdateExclusive = "ShareUpdateExclusiveLock"
	Share                = "ShareLock"
	ShareRowExclusive    = "ShareRowExclusiveLock"
	Exclusive            = "ExclusiveLock"
	AccessExclusive      = "AccessExclusiveLock"
)

// Modes are the table lock modes, weakest first.
var Modes = []string{AccessShare, RowShare, RowExclusive, ShareUpdateExclusive, Share, ShareRowExclusive, Exclusive, AccessExclusive}

// conflicts is PostgreSQL's table-level lock conflict matrix (the
// "Conflicting Lock Modes" table of the explicit-locking chapter), by
// each mode's rank in Modes: the modes each one waits for.
var conflicts = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		AccessShare:          {AccessExclusive},
		RowShare:             {Exclusive, AccessExclusive},
		RowExclusive:         {Share, ShareRowExclusive, Exclusive, AccessExclusive},
		ShareUpdateExclusive: {ShareUpdateExclusive, Share, ShareRowExclusive, Exclusive, AccessExclusive},
		Share:                {RowExclusive, ShareUpdateExclusive, ShareRowExclusive, Exclusive, AccessExclusive},
		ShareRowExclusive:    {RowExclusive, ShareUpdateExclusive, Share, ShareRowExclusive, Exclusive, AccessExclusive},
		Exclusive:            {RowShare, RowExclusive, ShareUpdateExclusive, Share, ShareRowExclusive, Exclusive, AccessExclusive},
		AccessExclusive:      Modes,
	}
})

// Conflicts says whether a lock in mode a waits for one held in mode b
// (the matrix is symmetric).
func Conflicts(a, b string) bool { return slices.Contains(conflicts()[a], b) }

// ConflictsWith are the modes a lock in this mode waits for.
func ConflictsWith(mode string) []string { return conflicts()[mode] }

// Stronger says whether mode a is stronger than mode b.
func Stronger(a, b string) bool { return slices.Index(Modes, a) > slices.Index(Modes, b) }

// BlocksReads says whether a lock mode conflicts with the AccessShareLock
// every SELECT takes: only AccessExclusiveLock does.
func BlocksReads(mode string) bool { return Conflicts(mode, AccessShare) }

// BlocksWrites says whether a lock mode conflicts with the
// RowExclusiveLock every INSERT, UPDATE and DELETE takes.
func BlocksWrites(mode string) bool { return Conflicts(mode, RowExclusive) }

// Lock is the table lock PostgreSQL takes for a schema change (the ALTER
// TABLE, CREATE INDEX, ... pages of its documentation): the strongest of
// its subcommands'.
func Lock(d *sqlparse.DDL) string {
	switch d.Command {
	case "CREATE INDEX", "REINDEX":
		if d.Concurrently {
			return ShareUpdateExclusive
		}
		return Share
	case "DROP INDEX":
		if d.Concurrently {
			return ShareUpdateExclusive
		}
		return AccessExclusive
	case "VACUUM", "ANALYZE":
		return ShareUpdateExclusive
	case "REFRESH MATERIALIZED VIEW":
		if d.Concurrently {
			return Exclusive
		}
		return AccessExclusive
	case "CREATE TRIGGER":
		return ShareRowExclusive
	case "LOCK TABLE":
		if d.LockMode != "" {
			return d.LockMode
		}
		return AccessExclusive
	case "ALTER TABLE":
		mode := ""
		for _, a := range d.Actions {
			if m := actionOf(a.Kind).lock; mode == "" || Stronger(m, mode) {
				mode = m
			}
		}
		if mode == "" {
			mode = AccessExclusive
		}
		return mode
	}
	return AccessExclusive // DROP TABLE, TRUNCATE, VACUUM FULL, CLUSTER
}
