package rules

import (
	"fmt"
	"math"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// ckptMinShareOfTrigger: the WAL between checkpoints must be at least
// this share of what starts one (max_wal_size / (1 + completion target))
// for the requested checkpoints to be WAL's. A CHECKPOINT command, a base
// backup or a DROP DATABASE also counts as requested, with little WAL
// between them.
const ckptMinShareOfTrigger = 0.5

// ckptResetSkew: the two counters' resets may differ by this much and
// still describe the same window.
const ckptResetSkew = 10 * time.Minute

// checkpointPressure judges the checkpointer's counters since they were
// reset: requested checkpoints at least as many as timed ones, with
// about max_wal_size's trigger of WAL between them, are checkpoints WAL
// volume started. A managed server whose log pgmedic cannot read is
// judged the same way as one whose log it reads.
func checkpointPressure(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	c := s.Checkpoints
	if c == nil || c.Requested < ckptMinByWAL || c.Requested < c.Timed {
		return nil, nil
	}
	skip := func(why string) ([]model.Finding, []model.Skip) {
		return nil, []model.Skip{{Rule: CheckpointPressureID, Reason: why, Fix: "give the server log with --log: its checkpoint lines say what started each one"}}
	}
	if !c.HasWAL {
		return skip(fmt.Sprintf("%d of %d checkpoints were requested, but the WAL between them is not counted before PostgreSQL 14 (pg_stat_wal), so WAL volume cannot be told from CHECKPOINT commands and backups", c.Requested, c.Requested+c.Timed))
	}
	if c.Reset == nil || c.WALReset == nil || c.Reset.Sub(*c.WALReset).Abs() > ckptResetSkew {
		return skip("the checkpoint counters and pg_stat_wal were reset at different times: their figures do not cover the same window")
	}
	window := s.CollectedAt.Sub(*c.Reset).Seconds()
	maxWAL, ok := s.SettingKB("max_wal_size")
	if window <= 0 || !ok {
		return nil, nil
	}
	timeoutS, target := checkpointSettings(s)
	total := c.Requested + c.Timed
	distKB := float64(c.WALBytes) / 1024 / float64(total)
	triggerKB := maxWAL / (1 + target)
	if distKB < ckptMinShareOfTrigger*triggerKB {
		return nil, nil
	}
	interval := window / float64(total)
	sev := model.Warning
	if c.Requested >= ckptCriticalWarns && interval < ckptCriticalSeconds {
		sev = model.Critical
	}
	f := model.Finding{Rule: CheckpointPressureID, Severity: sev,
		Title: fmt.Sprintf("%d of %d checkpoints since the statistics were reset %s ago were requested, a mean %.0f MB of WAL and %s apart: WAL volume starts them, max_wal_size is small for this write rate",
			c.Requested, total, heldText(time.Duration(window*float64(time.Second))), distKB/1024, seconds(interval)),
		Object: model.Object{Kind: "server", Name: "checkpointer"},
		Evidence: []model.Evidence{ev2("checkpoints requested (WAL volume, CHECKPOINT, backups)", c.Requested), ev2("checkpoints started by checkpoint_timeout", c.Timed),
			ev("mean WAL between checkpoints", distKB/1024, "MB"), ev("WAL that starts a checkpoint (max_wal_size / (1 + checkpoint_completion_target))", triggerKB/1024, "MB"),
			ev("mean time between checkpoints", interval, "s"), ev("WAL written", float64(c.WALBytes)/(1<<20)/window, "MB/s"),
			ev("full-page images, share of the WAL records' pages", fpiShare(c), "%")},
		Impact:       model.Impact{Summary: "each checkpoint writes every dirty page, and the first change to a page after it writes the whole page to WAL again (full_page_writes): close checkpoints multiply both writes and WAL"},
		Verification: model.NotRunBecause("counted by the server (pg_stat_bgwriter or pg_stat_checkpointer, and pg_stat_wal); check --twin measures the WAL a batch of the busiest table's updates writes right after a checkpoint and with none between"),
		Docs:         docsPath(CheckpointPressureID)}
	rateKBps, seen := float64(c.WALBytes)/1024/window, "this server wrote since the reset"
	if sm := s.Sampling; sm != nil && sm.Seconds > 0 && float64(sm.Delta.WALBytes)/1024/sm.Seconds > rateKBps {
		// Requested checkpoints come in the bursts of writes, which the
		// average since a reset (hours, idle nights included) dilutes:
		// the size follows the rate measured now when it is higher.
		rateKBps, seen = float64(sm.Delta.WALBytes)/1024/sm.Seconds, fmt.Sprintf("it wrote while pgmedic sampled (%s)", seconds(sm.Seconds))
		f.Evidence = append(f.Evidence, ev("WAL written while pgmedic sampled", rateKBps/1024, "MB/s"))
	}
	proposeMaxWAL(&f, maxWAL, distKB, rateKBps, timeoutS, target, seen)
	CheckpointExperiment(s, &f)
	return []model.Finding{f}, nil
}

// fpiShare is the full-page images against the checkpoints' WAL, as a
// percentage of WAL bytes they would be at 8 kB each (a rough share: an
// image is compressed or holes are cut out of it).
func fpiShare(c *model.Checkpoints) float64 {
	if c.WALBytes == 0 {
		return 0
	}
	return min(100, 100*float64(c.FPI)*8192/float64(c.WALBytes))
}

// CheckpointPressureID is the rule that reads the checkpointer's log
// lines: checkpoints started by WAL volume, not by checkpoint_timeout.
const CheckpointPressureID = "checkpoint-pressure"

// Thresholds of checkpoint-pressure (see docs/rules/checkpoint-pressure.md).
const (
	ckptMinByWAL        = 2     // WAL-started checkpoints before it is a pattern
	ckptCriticalWarns   = 10    // "too frequently" warnings ...
	ckptCriticalSeconds = 30.0  // ... with checkpoints this close together
	defaultCkptTimeoutS = 300.0 // checkpoint_timeout's default
	completionTarget    = 0.9   // checkpoint_completion_target's default
)

// checkpointPressureLog: checkpoints that WAL volume forces.
func checkpointPressureLog(in LogInput) []model.Finding {
	le := in.Events
	if le.CheckpointsTooFrequent > 0 || (le.CheckpointsByWAL >= ckptMinByWAL && le.CheckpointsByWAL >= le.CheckpointsByTime) {
		return []model.Finding{checkpointFinding(le, loggedVerification)}
	}
	return nil
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
