package model

import (
	"strconv"
	"time"
)

// Checkpoints are the checkpointer's counters since they were last reset
// (pg_stat_bgwriter; pg_stat_checkpointer from 17) and the WAL written
// since pg_stat_wal's reset (14+).
type Checkpoints struct {
	Timed     int64      `json:"timed"`
	Requested int64      `json:"requested"`
	Reset     *time.Time `json:"stats_reset,omitempty"`
	// HasWAL says pg_stat_wal was read: WALBytes and FPI (full-page
	// images written) since WALReset.
	HasWAL   bool       `json:"has_wal"`
	WALBytes int64      `json:"wal_bytes,omitempty"`
	FPI      int64      `json:"wal_fpi,omitempty"`
	WALReset *time.Time `json:"wal_stats_reset,omitempty"`
}

// DatabaseAge is one database's oldest unfrozen transaction and
// multixact (pg_database), which every table's must stay within the
// server's wraparound limits.
type DatabaseAge struct {
	Name      string `json:"name"`
	FrozenAge int64  `json:"xid_age"`
	MxidAge   int64  `json:"mxid_age"`
	// AllowConn is false for template0 and databases nobody may connect
	// to: autovacuum still freezes them.
	AllowConn bool `json:"allow_connections"`
}

// MultiXact members: a multixact (the several transactions that lock one
// row, as concurrent foreign-key checks on one parent do) stores its
// member transaction ids in a space of its own, addressed by a 32-bit
// offset that every new multixact advances by its member count. A new
// multixact holding one more locker copies all the previous members, so
// the space can run out long before the multixact ids do. PostgreSQL
// forces anti-wraparound vacuums once half the space is in use and
// refuses new multixacts, and so the writes that need them, near its end.
const (
	MemberSpace   = 1 << 32
	MembersOfPage = 1636 // 409 groups of 4 members in an 8 kB page
)

// Members is the multixact member space as check read it: the next
// offset as of the server's last checkpoint (pg_control_checkpoint()),
// the offset of the oldest multixact any database still holds (its
// entry in pg_multixact/offsets), and the member pages the server
// zeroed (pg_stat_slru), read before and after the sample: the rate.
type Members struct {
	NextMulti    int64     `json:"next_multixact_id"`
	NextOffset   int64     `json:"next_offset"`
	Checkpoint   time.Time `json:"checkpoint_time"`
	OldestMulti  int64     `json:"oldest_multixact_id"`
	OldestOffset int64     `json:"oldest_offset"`
	// OldestDatabase holds the oldest multixact (the smallest datminmxid).
	OldestDatabase string `json:"oldest_database,omitempty"`
	// PagesBefore and PagesAfter are pg_stat_slru's blks_zeroed of the
	// member space, Seconds apart on the server's clock; Seconds is 0 when
	// the sessions were not sampled.
	PagesBefore int64   `json:"pages_zeroed_before"`
	PagesAfter  int64   `json:"pages_zeroed_after"`
	Seconds     float64 `json:"seconds,omitempty"`
}

// Used is the member entries between the oldest multixact and the next
// offset; the offset wraps at 2^32. The next offset is the last
// checkpoint's: a database vacuumed since then can hold no multixact
// older than that checkpoint's next one (ids compare modulo 2^32), and
// then what the checkpoint counted is all gone.
func (m *Members) Used() int64 {
	if m == nil || int32(uint32(m.OldestMulti)-uint32(m.NextMulti)) >= 0 {
		return 0
	}
	return ((m.NextOffset-m.OldestOffset)%MemberSpace + MemberSpace) % MemberSpace
}

// Rate is member entries consumed per second across the sample; 0 when
// not measured. Pages are counted as they are started, so the rate is
// known to within a page (1,636 members) over the window.
func (m *Members) Rate() float64 {
	if m == nil || m.Seconds <= 0 || m.PagesAfter < m.PagesBefore {
		return 0
	}
	return float64(m.PagesAfter-m.PagesBefore) * MembersOfPage / m.Seconds
}

// XIDClock is the next transaction id read twice, on the server's clock:
// the rate at which the server consumes transaction ids.
type XIDClock struct {
	Before, After int64
	Seconds       float64
}

// Rate is transaction ids consumed per second; 0 when not measured.
func (c *XIDClock) Rate() float64 {
	if c == nil || c.Seconds <= 0 || c.After <= c.Before {
		return 0
	}
	return float64(c.After-c.Before) / c.Seconds
}

// Subtrans is pg_subtrans, the map from each subtransaction to its parent,
// as pg_stat_slru counted it (named Subtrans before PostgreSQL 17,
// subtransaction since), read before and after the sample. A snapshot
// taken while any running transaction has more than 64 subtransactions
// is "suboverflowed": it no longer lists them, so every row version it
// checks from a transaction newer than its xmin is looked up there. The
// lookups are pages found in its buffers (blks_hit) or read in
// (blks_read): a server without such snapshots makes next to none.
type Subtrans struct {
	LookupsBefore int64   `json:"lookups_before"`
	LookupsAfter  int64   `json:"lookups_after"`
	ReadsBefore   int64   `json:"reads_before"`
	ReadsAfter    int64   `json:"reads_after"`
	Seconds       float64 `json:"seconds,omitempty"`
}

// LookupRate is pg_subtrans page lookups per second across the sample; 0
// when not measured.
func (t *Subtrans) LookupRate() float64 {
	if t == nil || t.Seconds <= 0 || t.LookupsAfter < t.LookupsBefore {
		return 0
	}
	return float64(t.LookupsAfter-t.LookupsBefore) / t.Seconds
}

// ReadRate is pg_subtrans pages read in per second (lookups its buffers
// missed); 0 when not measured.
func (t *Subtrans) ReadRate() float64 {
	if t == nil || t.Seconds <= 0 || t.ReadsAfter < t.ReadsBefore {
		return 0
	}
	return float64(t.ReadsAfter-t.ReadsBefore) / t.Seconds
}

// SettingKB is a setting whose unit is a size, in kB; ok is false for a
// setting that is missing or not a size.
func (s *Snapshot) SettingKB(name string) (float64, bool) {
	st, ok := s.Settings[name]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(st.Value, 64)
	if err != nil {
		return 0, false
	}
	switch st.Unit {
	case "kB":
		return v, true
	case "8kB":
		return v * 8, true
	case "MB":
		return v * 1024, true
	case "GB":
		return v * 1024 * 1024, true
	}
	return 0, false
}
