package rules

import (
	"fmt"
	"math"
	"regexp"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// CheckpointPressureID is the rule that reads the checkpointer's log
// lines: checkpoints started by WAL volume, not by checkpoint_timeout.
const CheckpointPressureID = "checkpoint-pressure"

// Thresholds of the log rules.
const (
	ckptMinByWAL        = 2     // WAL-started checkpoints before it is a pattern
	ckptCriticalWarns   = 10    // "too frequently" warnings ...
	ckptCriticalSeconds = 30.0  // ... with checkpoints this close together
	stuckMinRows        = 10000 // dead rows vacuum could not remove
	stuckMinShare       = 0.1   // ... as a share of the table's rows
	defaultCkptTimeoutS = 300.0 // checkpoint_timeout's default
	completionTarget    = 0.9   // checkpoint_completion_target's default
)

// LogInput is what a server log gives the rules: the events it counted
// (connections, lock waits, checkpoints, autovacuum runs) and the scans
// of its executed plans whose row estimates were far off. The plans
// themselves go through the plan rules (RunPlan).
type LogInput struct {
	Events       model.LogEvents
	Misestimates []LogMisestimate
	// Name is what the findings' object is called ("the server log").
	Name string
}

var loggedVerification = model.NotRunBecause("counted in the server log")

func logObject(in LogInput) model.Object {
	return model.Object{Kind: "log", Name: in.Name, Database: in.Name}
}

// connectionPressureLog: connection storms and "too many clients".
func connectionPressureLog(in LogInput) []model.Finding {
	le := in.Events
	if le.TooManyClients == 0 && float64(le.PeakPerMinute)/60 < churnPerSecond {
		return nil
	}
	sev := model.Warning
	title := fmt.Sprintf("connection storm: %d connections in the busiest minute (%.0f per second)", le.PeakPerMinute, float64(le.PeakPerMinute)/60)
	if le.TooManyClients > 0 {
		sev = model.Critical
		title = fmt.Sprintf("the server refused %d connections (too many clients already); %d in the busiest minute", le.TooManyClients, le.PeakPerMinute)
	}
	return []model.Finding{{Rule: ConnectionPressureID, Severity: sev, Title: title, Object: logObject(in),
		Evidence:     []model.Evidence{ev2("connections", le.Connections), ev2("connections in the busiest minute", le.PeakPerMinute), ev2("refused: too many clients", le.TooManyClients)},
		Impact:       model.Impact{Summary: "each new connection costs the server a process; a storm of them queues work and exhausts max_connections"},
		Fix:          model.Fix{Summary: "put a pool in front (PgBouncer in transaction mode, or the application's pool) and reuse connections; find what opens them (a retry loop, an autoscaler)"},
		Verification: model.NotRunBecause("counted in the server log; a log that also holds the sessions' statements (log_min_duration_statement = 0, log_connections) measures the pool: pgmedic replay LOG --dsn DSN --pool N replays them on a copy as they connected and through a pool of N"),
		Docs:         docsPath(ConnectionPressureID)}}
}

// poolSaturationLog: clients PgBouncer closed after they waited longer
// than query_wait_timeout for a server connection. Each is a request that
// failed without reaching the database: the pool was full for that long.
func poolSaturationLog(in LogInput) []model.Finding {
	le := in.Events
	if le.PoolWaitTimeouts == 0 {
		return nil
	}
	sev := model.Warning
	if le.PoolWaitTimeouts >= 10 {
		sev = model.Critical
	}
	return []model.Finding{{Rule: PoolSaturationID, Severity: sev,
		Title:  fmt.Sprintf("PgBouncer closed %d clients that waited longer than query_wait_timeout for a server connection", le.PoolWaitTimeouts),
		Object: logObject(in),
		Evidence: []model.Evidence{ev2("clients closed: query_wait_timeout", le.PoolWaitTimeouts), ev2("logins", le.PoolLogins),
			ev("the log's span", math.Round(le.Seconds), "s")},
		Impact:       model.Impact{Summary: "every server connection of the pool stayed busy longer than the clients would wait: their requests failed without reaching PostgreSQL, and clients that retry add to the queue"},
		Fix:          model.Fix{Summary: "find what holds the server connections (slow statements, transactions left open, in SHOW POOLS and pg_stat_activity); make those cheaper first, then size the pool to the server's cores (2 x cores) rather than to the clients; check --pgbouncer samples the pools while it happens"},
		Verification: model.NotRunBecause("counted in PgBouncer's log, which does not say what the server connections ran; check --pgbouncer --twin, while it happens, samples the pools and replays the sampled statements through a pool of the proposed size"),
		Docs:         docsPath(PoolSaturationID)}}
}

// lockContentionLog: lock waits past deadlock_timeout and deadlocks.
func lockContentionLog(in LogInput) []model.Finding {
	le := in.Events
	if le.Deadlocks == 0 && (le.LockWaits == 0 || le.LockWaitMS < 1000) {
		return nil
	}
	fix := "shorten the transactions that hold the locks (commit before other work), take row locks in a consistent order, use FOR UPDATE SKIP LOCKED for queues"
	impact := "sessions waited for locks held by others; the DETAIL lines name the processes holding them"
	if le.RelationLockWaits*2 > le.LockWaits && le.Deadlocks == 0 {
		// Most waits were for a relation's lock: a schema change waiting
		// for ACCESS EXCLUSIVE, and the sessions queued behind it.
		fix = "run schema changes with a short lock_timeout and retries (SET lock_timeout = '2s'), so a change that cannot get its lock gives up instead of queuing every statement on the table behind it; use the forms that take lighter locks (CREATE INDEX CONCURRENTLY, ADD CONSTRAINT ... NOT VALID then VALIDATE CONSTRAINT)"
		impact = "sessions waited for a relation's lock: a schema change waited for ACCESS EXCLUSIVE behind a transaction on the table, and every statement on the table queued behind the change; the DETAIL lines name the processes"
	}
	return []model.Finding{{Rule: LockContentionID, Severity: model.Warning,
		Title:  fmt.Sprintf("%d lock waits past deadlock_timeout (%d on a relation's lock) and %d deadlocks in the log", le.LockWaits, le.RelationLockWaits, le.Deadlocks),
		Object: logObject(in),
		Evidence: []model.Evidence{ev2("lock waits logged (log_lock_waits)", le.LockWaits), ev("lock wait reported", le.LockWaitMS, "ms"),
			ev2("deadlocks", le.Deadlocks)},
		Impact:       model.Impact{Summary: impact},
		Fix:          model.Fix{Summary: fix},
		Verification: loggedVerification, Docs: docsPath(LockContentionID)}}
}

// clientStallLog: clients that went away while duplicate-key errors
// followed timeouts (retries of work the database had done).
func clientStallLog(in LogInput) []model.Finding {
	le := in.Events
	if le.ClientsLost == 0 || le.DuplicateKeys == 0 || le.StatementTimeouts+le.CancelledByClients == 0 {
		return nil
	}
	return []model.Finding{{Rule: ClientStallID, Severity: model.Warning,
		Title: fmt.Sprintf("clients went away %d times and %d duplicate-key errors followed %d timeouts and cancels: retries of work the database had done",
			le.ClientsLost, le.DuplicateKeys, le.StatementTimeouts+le.CancelledByClients),
		Object: logObject(in),
		Evidence: []model.Evidence{ev2("client connections lost", le.ClientsLost), ev2("duplicate-key errors", le.DuplicateKeys),
			ev2("statement timeouts", le.StatementTimeouts), ev2("statements cancelled by clients", le.CancelledByClients)},
		Impact:       model.Impact{Summary: "a client that times out and retries a write the database already did duplicates it; with a unique key, the retry fails instead"},
		Fix:          model.Fix{Summary: "keep statement_timeout below the client's timeout, make retried writes idempotent (ON CONFLICT DO NOTHING with a key), retry with backoff and a budget"},
		Verification: model.NotRunBecause("counted in the server log; the fix is in the client's code (its timeouts and retries), which no experiment on the database stands in for"),
		Docs:         docsPath(ClientStallID)}}
}

// checkpointPressureLog: checkpoints that WAL volume forces.
func checkpointPressureLog(in LogInput) []model.Finding {
	le := in.Events
	if le.CheckpointsTooFrequent > 0 || (le.CheckpointsByWAL >= ckptMinByWAL && le.CheckpointsByWAL >= le.CheckpointsByTime) {
		return []model.Finding{checkpointFinding(le, loggedVerification)}
	}
	return nil
}

// tableBloatLog: dead rows vacuum found but could not remove because a
// snapshot still saw them.
func tableBloatLog(in LogInput) []model.Finding {
	var out []model.Finding
	for _, t := range in.Events.Tables {
		if t.NotRemovable < stuckMinRows || float64(t.NotRemovable) < stuckMinShare*float64(t.RemainAt) {
			continue
		}
		sev, cleared := model.Warning, ""
		if t.LastNotRemovable == 0 {
			sev, cleared = model.Info, "; a later run removed them, so what held them had gone by the end of the log"
		}
		out = append(out, model.Finding{Rule: TableBloatID, Severity: sev,
			Title:  fmt.Sprintf("autovacuum could not remove %s dead rows of %s: a snapshot still saw them%s", count(float64(t.NotRemovable)), t.Table, cleared),
			Object: model.Object{Kind: "table (log)", Name: t.Table},
			Evidence: []model.Evidence{ev("dead rows not yet removable, most in one run", float64(t.NotRemovable), "rows"), ev("rows in the table then", float64(t.RemainAt), "rows"),
				ev("dead rows not yet removable, last run", float64(t.LastNotRemovable), "rows"), ev2("autovacuum runs", t.Vacuums), ev("dead rows removed", float64(t.Removed), "rows")},
			Impact: model.Impact{Summary: "vacuum ran and left the dead rows: the table and its indexes grow, scans read the dead versions, and every run repeats the work"},
			Fix: model.Fix{Summary: "find what holds the xmin horizon back: a long transaction or a session idle in one (end it; set idle_in_transaction_session_timeout), a replication slot or a standby with hot_standby_feedback, a forgotten prepared transaction",
				SQL: "SELECT pid, state, now() - xact_start AS open_for, backend_xmin FROM pg_stat_activity WHERE backend_xmin IS NOT NULL ORDER BY age(backend_xmin) DESC LIMIT 5;\n" +
					"SELECT slot_name, xmin, catalog_xmin FROM pg_replication_slots;\nSELECT gid, prepared FROM pg_prepared_xacts;"},
			Verification: loggedVerification, Docs: docsPath(TableBloatID)})
	}
	return out
}

// CheckpointExperiment gives a checkpoint-pressure finding from the log
// its experiment when check also read the database: the table with the
// most rows written (inserted, updated, deleted) since the statistics
// were reset, whose pages a write after each checkpoint logs whole again.
// The finding is left as it is when no table has had writes.
func CheckpointExperiment(s *model.Snapshot, f *model.Finding) {
	if f.Rule != CheckpointPressureID || s == nil {
		return
	}
	var best *model.Table
	for i := range s.Tables {
		t := &s.Tables[i]
		if t.Partitioned || (t.RelPages == 0 && t.HeapBytes == 0) {
			continue
		}
		if w := t.Inserted + t.Updated + t.Deleted; w > 0 && (best == nil || w > best.Inserted+best.Updated+best.Deleted) {
			best = t
		}
	}
	if best == nil {
		return
	}
	f.Experiment = &model.Experiment{Kind: model.ExpCheckpointWAL, Table: model.RelRef{Schema: best.Schema, Name: best.Name}}
	counted := "counted in the server log"
	if f.Object.Kind == "server" {
		counted = "counted by the server (its checkpoint and WAL statistics)"
	}
	f.Verification = model.NotRunBecause(counted + "; check --twin measures, on a copy of " + best.Schema + "." + best.Name + " (the table with the most writes), the WAL a batch of its updates writes right after a checkpoint and with none between")
}

// checkpointFinding says how often WAL volume started checkpoints and how
// large max_wal_size would need to be for checkpoint_timeout to start
// them instead.
func checkpointFinding(le model.LogEvents, logged model.Verification) model.Finding {
	sev := model.Warning
	if le.CheckpointsTooFrequent >= ckptCriticalWarns && le.CheckpointMedianIntervalS > 0 && le.CheckpointMedianIntervalS < ckptCriticalSeconds {
		sev = model.Critical
	}
	all := le.CheckpointsByWAL + le.CheckpointsByTime
	title := fmt.Sprintf("%d of %d checkpoints were started by WAL volume", le.CheckpointsByWAL, all)
	if le.CheckpointMedianIntervalS > 0 {
		title += fmt.Sprintf(", a median %s apart", seconds(le.CheckpointMedianIntervalS))
	}
	title += ": max_wal_size is small for this write rate"
	f := model.Finding{Rule: CheckpointPressureID, Severity: sev, Title: title,
		Object: model.Object{Kind: "server (log)", Name: "checkpointer"},
		Evidence: []model.Evidence{ev2("checkpoints started by WAL volume", le.CheckpointsByWAL), ev2("started by checkpoint_timeout", le.CheckpointsByTime),
			ev2("\"checkpoints are occurring too frequently\" warnings", le.CheckpointsTooFrequent),
			ev("median time between checkpoints", le.CheckpointMedianIntervalS, "s"), ev("mean WAL between checkpoints", le.CheckpointMeanDistanceKB/1024, "MB"),
			ev("WAL written", le.WALKBPerSecond/1024, "MB/s")},
		Impact: model.Impact{Summary: "each checkpoint writes every dirty page, and the first change to a page after it writes the whole page to WAL again (full_page_writes): close checkpoints multiply both writes and WAL"},
		Fix: model.Fix{Summary: "raise max_wal_size so that checkpoint_timeout, not WAL volume, starts checkpoints; if the writes are a bulk load, batch it or raise max_wal_size for its duration",
			SQL: "ALTER SYSTEM SET max_wal_size = '<size>';\nSELECT pg_reload_conf();"},
		Verification: logged, Docs: docsPath(CheckpointPressureID)}
	if le.WALKBPerSecond > 0 && le.CheckpointMeanDistanceKB > 0 {
		// A log does not say the server's settings: PostgreSQL's
		// defaults, and the fix says so.
		proposeMaxWAL(&f, le.CheckpointMeanDistanceKB*(1+completionTarget), le.CheckpointMeanDistanceKB, le.WALKBPerSecond, defaultCkptTimeoutS, completionTarget, "the log's checkpoints wrote")
		f.Fix.Summary += " (sized for the default checkpoint_timeout of 5 min: check with --dsn to size it for the server's own)"
	}
	return f
}

// proposeMaxWAL writes the fix of a checkpoint-pressure finding. A
// checkpoint starts when the WAL since the last one reaches max_wal_size
// / (1 + checkpoint_completion_target), so nowKB is the setting (read, or
// worked out from the distance). For checkpoint_timeout (the server's,
// timeoutS) to start them instead, max_wal_size must hold a whole
// timeout's WAL at the rate measured, times (1 + target): the size
// follows from the rate and the server's own settings, rounded up, never
// down (23.9 MB/s against a 15-minute timeout is some 40 GB, and the 1 GB
// a default-minded fix would give is a checkpoint every 40 s).
func proposeMaxWAL(f *model.Finding, nowKB, distanceKB, rateKBps, timeoutS, target float64, seen string) {
	needKB := rateKBps * timeoutS * (1 + target)
	sizeKB := walSizeUp(math.Max(needKB, 2*nowKB))
	size := walSizeText(sizeKB)
	every := sizeKB / (1 + target) / math.Max(rateKBps, 1)
	f.Fix.Summary = fmt.Sprintf("raise max_wal_size from about %s (a checkpoint every %.0f MB of WAL) to %s: at the %.1f MB/s %s, a checkpoint then starts every %s of WAL, %s, so checkpoint_timeout (%s) starts them; pg_wal may hold up to that much, so its disk needs the room; if the writes are a bulk load, batch it or raise max_wal_size for its duration",
		aboutSize(nowKB), distanceKB/1024, size, rateKBps/1024, seen, amount(sizeKB/(1+target)), heldText(time.Duration(every*float64(time.Second))), heldText(time.Duration(timeoutS*float64(time.Second))))
	f.Fix.SQL = fmt.Sprintf("ALTER SYSTEM SET max_wal_size = '%s';\nSELECT pg_reload_conf();", size)
}

// walSizeUp rounds kilobytes up to the next size of the series 32MB,
// 48MB, 64MB, 96MB, ... (a power of two or one and a half times one, so
// that rounding up costs at most half again; at least 32MB, the smallest
// max_wal_size PostgreSQL accepts).
func walSizeUp(kb float64) float64 {
	mb := math.Max(32, kb/1024)
	p := math.Pow(2, math.Floor(math.Log2(mb)))
	switch {
	case mb <= p:
		return 1024 * p
	case mb <= 1.5*p:
		return 1024 * 1.5 * p
	}
	return 1024 * 2 * p
}

// walSizeText writes kilobytes as a size setting: whole GB from a GB up
// when it is one, else MB.
func walSizeText(kb float64) string {
	mb := math.Max(1, math.Round(kb/1024))
	if mb >= 1024 && math.Mod(mb, 1024) == 0 {
		return fmt.Sprintf("%.0fGB", mb/1024)
	}
	return fmt.Sprintf("%.0fMB", mb)
}

// amount writes a quantity of WAL: MB below a GB, GB to a tenth above.
func amount(kb float64) string {
	if kb < 1024*1024 {
		return fmt.Sprintf("%.0f MB", kb/1024)
	}
	return fmt.Sprintf("%.1f GB", kb/1024/1024)
}

// aboutSize writes an estimated size rounded to the nearest power of two,
// in MB or GB.
func aboutSize(kb float64) string {
	mb := math.Max(1, math.Pow(2, math.Round(math.Log2(math.Max(kb, 1)/1024))))
	return walSizeText(mb * 1024)
}

// checkpointSettings are the server's checkpoint_timeout (seconds) and
// checkpoint_completion_target, or their defaults when not read.
func checkpointSettings(s *model.Snapshot) (timeoutS, target float64) {
	timeoutS, target = defaultCkptTimeoutS, completionTarget
	if s == nil {
		return timeoutS, target
	}
	if v, ok := s.Settings["checkpoint_timeout"]; ok && v.Float() > 0 {
		timeoutS = v.Float()
		if v.Unit == "min" {
			timeoutS *= 60
		}
	}
	if v, ok := s.Settings["checkpoint_completion_target"]; ok && v.Float() > 0 {
		target = v.Float()
	}
	return timeoutS, target
}

func seconds(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

// LogMisestimate is an executed plan's scan whose row estimate was far
// off, with what the log says about the table's autoanalyze runs.
type LogMisestimate struct {
	Table       string // the scanned relation, as the plan names it
	Node        string
	Factor      float64 // estimate off by this factor, either way
	Estimated   float64
	Actual      float64
	Fingerprint string
	Query       string
	// Analyzes is the autoanalyze runs of the table the log shows, and
	// LogHours the span the log covers.
	Analyzes int64
	LogHours float64
	// Unlogged says the log holds no autovacuum or autoanalyze run of any
	// table (log_autovacuum_min_duration is -1, or above every run): that
	// the table's Analyzes is 0 then says nothing.
	Unlogged bool
	// Generic says the scan's conditions hold parameters ($1): a
	// prepared statement's generic plan, estimated without the values.
	Generic bool
}

// paramRef finds a parameter symbol in a plan's condition: a generic
// plan prints $1 where a custom plan prints the value.
var paramRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\d+\b`) })

// ScanMisestimates are the scans of a plan whose row estimate was off by
// misestimateFactor or more (at least misestimateMinRows on the larger
// side), leaving out filters with a cast on the column (implicit-cast's)
// and scans a Limit stopped early.
func ScanMisestimates(e *plan.Explain) []LogMisestimate {
	var out []LogMisestimate
	all, parent := nodes(e)
	for _, n := range all {
		fig := n.Figures
		if n.RelationName == "" || fig.Misestimate < misestimateFactor || math.Max(n.PlanRows, n.ActualRows) < misestimateMinRows {
			continue
		}
		if len(findCasts(n.Filter, "")) > 0 || (!fig.Under && stoppedEarly(n, parent)) {
			continue
		}
		table := n.RelationName
		if n.Schema != "" {
			table = n.Schema + "." + table
		}
		generic := false
		for _, cond := range []string{n.Filter, n.IndexCond, n.RecheckCond} {
			generic = generic || paramRef().MatchString(cond)
		}
		out = append(out, LogMisestimate{Table: table, Node: fmt.Sprintf("node #%d %s", fig.ID, n.Label()), Factor: fig.Misestimate,
			Estimated: n.PlanRows * math.Max(n.ActualLoops, 1), Actual: fig.TotalRows, Generic: generic})
	}
	return out
}

// staleStatisticsLog is stale-statistics from the log: a scan in an
// executed plan estimated far off, of a table autoanalyze did not analyze
// while the log ran. (A misestimate with fresh statistics is the plan
// rule misestimate's to explain: correlated columns, functions.) A scan
// whose condition holds a parameter is a generic plan's: the planner
// estimated it without the value, from an average over the column, so on
// skewed data it is far off for the common values however fresh the
// statistics are, and ANALYZE changes nothing.
func staleStatisticsLog(in LogInput) []model.Finding {
	var out []model.Finding
	seen := map[string]bool{}
	for _, m := range in.Misestimates {
		if m.Analyzes > 0 || m.Generic || m.Factor < misestimateFactor || seen[m.Table] {
			continue
		}
		seen[m.Table] = true
		sev, title := model.Warning, fmt.Sprintf("%s estimated %s rows and read %s (%.0fx off), and autoanalyze did not analyze %s in the %s the log covers",
			m.Node, count(m.Estimated), count(m.Actual), m.Factor, m.Table, span(m.LogHours))
		if m.Unlogged {
			sev, title = model.Info, fmt.Sprintf("%s estimated %s rows and read %s (%.0fx off); the log records no autoanalyze run of any table (log_autovacuum_min_duration), so whether %s's statistics are stale is not known",
				m.Node, count(m.Estimated), count(m.Actual), m.Factor, m.Table)
		}
		out = append(out, model.Finding{Rule: StaleStatisticsID, Severity: sev,
			Title:  title,
			Object: model.Object{Kind: "statement (log)", Name: printable.Shorten(m.Query, 80), QueryID: m.Fingerprint, Fingerprint: m.Fingerprint},
			Evidence: []model.Evidence{ev("rows estimated", m.Estimated, "rows"), ev("rows read", m.Actual, "rows"), ev("estimate off by", m.Factor, "x"),
				ev2("autoanalyze runs of the table in the log", m.Analyzes)},
			Impact: model.Impact{Summary: "plans are chosen from the statistics: a row count off by this much picks the wrong join and scan methods"},
			Fix: model.Fix{Summary: "analyze the table now, and if it changes fast lower its autovacuum_analyze_scale_factor so autoanalyze keeps up (or ANALYZE after bulk loads)",
				SQL: fmt.Sprintf("ANALYZE %s;", m.Table)},
			Verification: model.NotRunBecause("read from the executed plan and the log; check --dsn re-plans the statement after ANALYZE in the lab"),
			Docs:         docsPath(StaleStatisticsID)})
	}
	return out
}

// span says a log's length in hours, or minutes under one.
func span(hours float64) string {
	if hours < 1 {
		return fmt.Sprintf("%.0f minutes", math.Max(1, hours*60))
	}
	return fmt.Sprintf("%.1f hours", hours)
}

func ev2(label string, n int64) model.Evidence {
	return model.Evidence{Label: label, Value: float64(n)}
}
