package rules

import (
	"fmt"
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
