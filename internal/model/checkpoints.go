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
