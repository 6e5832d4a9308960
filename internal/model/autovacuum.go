package model

import (
	"math"
	"strings"
)

// AutovacuumReading is one look at the server's autovacuum workers
// (pg_stat_activity joined with pg_stat_progress_vacuum).
type AutovacuumReading struct {
	// At is the server's clock, in seconds since the epoch: the pace of a
	// worker is counted between two readings on it.
	At      float64            `json:"at"`
	Workers []AutovacuumWorker `json:"workers"`
}

// AutovacuumWorker is one autovacuum worker at one reading.
type AutovacuumWorker struct {
	PID      int    `json:"pid"`
	Database string `json:"database,omitempty"`
	// TableOID is the table it works on, when it is in the database check
	// reads and the role may see it (0 otherwise); Table names it as the
	// worker's query does ("" when hidden).
	TableOID uint32 `json:"table_oid,omitempty"`
	Table    string `json:"table,omitempty"`
	// Analyze: an ANALYZE only, which the cost limit throttles too but
	// which removes nothing. Wraparound: an aggressive run started to
	// prevent wraparound, which no setting stops.
	Analyze    bool `json:"analyze,omitempty"`
	Wraparound bool `json:"wraparound,omitempty"`
	// Phase and the heap pages of pg_stat_progress_vacuum ("" and 0 for
	// an ANALYZE, or when hidden).
	Phase       string `json:"phase,omitempty"`
	HeapTotal   int64  `json:"heap_blks_total,omitempty"`
	HeapScanned int64  `json:"heap_blks_scanned,omitempty"`
	// RunningS is how long its current table has taken so far.
	RunningS float64 `json:"running_s"`
	// Hidden: the role may not see what it works on (pg_read_all_stats).
	Hidden bool `json:"hidden,omitempty"`
}

// ParseAutovacuumQuery reads what a worker's query says it does:
// "autovacuum: VACUUM ANALYZE public.orders (to prevent wraparound)", with
// its schema-qualified table (PostgreSQL writes the names unquoted).
func ParseAutovacuumQuery(q string) (table string, analyzeOnly, wraparound bool) {
	rest, ok := strings.CutPrefix(q, "autovacuum: ")
	if !ok {
		return "", false, false
	}
	rest, wraparound = strings.CutSuffix(rest, " (to prevent wraparound)")
	switch {
	case strings.HasPrefix(rest, "VACUUM ANALYZE "):
		table = strings.TrimPrefix(rest, "VACUUM ANALYZE ")
	case strings.HasPrefix(rest, "VACUUM "):
		table = strings.TrimPrefix(rest, "VACUUM ")
	case strings.HasPrefix(rest, "ANALYZE "):
		table, analyzeOnly = strings.TrimPrefix(rest, "ANALYZE "), true
	default: // BRIN summarize and what later versions add
		return "", false, wraparound
	}
	if table = strings.TrimSpace(table); table == "" {
		return "", false, wraparound
	}
	return table, analyzeOnly, wraparound
}

// VacuumTrigger is the dead rows at which autovacuum takes up t:
// autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor x
// reltuples, the table's own values first, capped from 18 by
// autovacuum_vacuum_max_threshold (-1 switches the cap off).
func (s *Snapshot) VacuumTrigger(t *Table) float64 {
	own := func(key, setting string) float64 {
		if v, ok := t.VacuumOptions[key]; ok {
			return v
		}
		return s.Settings["autovacuum_vacuum_"+setting].Float()
	}
	trigger := own("threshold", "threshold") + own("scale_factor", "scale_factor")*math.Max(t.Reltuples, 0)
	if _, ok := s.Settings["autovacuum_vacuum_max_threshold"]; ok {
		if max := own("max_threshold", "max_threshold"); max >= 0 && trigger > max {
			trigger = max
		}
	}
	return trigger
}

// VacuumThrottle is how a VACUUM paces itself (cost-based delay): after
// Limit units of cost (a page found in shared buffers costs
// vacuum_cost_page_hit, one read page_miss, one dirtied page_dirty) it
// sleeps DelayMS. A DelayMS of 0 is no throttle at all.
type VacuumThrottle struct {
	DelayMS float64
	Limit   float64
}

// CostPerSecond is the cost a throttled VACUUM may spend per second
// (ignoring the work between sleeps); +Inf when it is not throttled.
func (v VacuumThrottle) CostPerSecond() float64 {
	if v.DelayMS <= 0 {
		return math.Inf(1)
	}
	return v.Limit / v.DelayMS * 1000
}

// AutovacuumThrottle is the throttle the server gives its autovacuum
// workers: autovacuum_vacuum_cost_delay and _limit, each -1 meaning
// vacuum_cost_delay and _limit. PostgreSQL shares the limit among the
// workers running at once that have no cost settings of their own.
func (s *Snapshot) AutovacuumThrottle() VacuumThrottle {
	pick := func(av, plain string) float64 {
		if v := s.Settings[av].Float(); v >= 0 {
			return v
		}
		return s.Settings[plain].Float()
	}
	return VacuumThrottle{DelayMS: pick("autovacuum_vacuum_cost_delay", "vacuum_cost_delay"), Limit: pick("autovacuum_vacuum_cost_limit", "vacuum_cost_limit")}
}

// TableThrottle is t's throttle when its own storage parameters set one
// (and the server's for what they leave unset); own is false when they
// set neither, and t's workers share the server's limit.
func (s *Snapshot) TableThrottle(t *Table) (th VacuumThrottle, own bool) {
	th = s.AutovacuumThrottle()
	if v, ok := t.VacuumOptions["cost_delay"]; ok && v >= 0 {
		th.DelayMS, own = v, true
	}
	if v, ok := t.VacuumOptions["cost_limit"]; ok && v > 0 {
		th.Limit, own = v, true
	}
	return th, own
}
