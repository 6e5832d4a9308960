package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestCheckpointPressure: requested checkpoints with about max_wal_size's
// trigger of WAL between them are WAL's (warning; critical when many and
// under 30 s apart); requested ones with little WAL between (CHECKPOINT
// commands, DROP DATABASE) and timed ones are not; without pg_stat_wal
// (13) the rule says what it could not tell.
func TestCheckpointPressure(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	snap := func(timed, req int64, walMB float64, ago time.Duration, hasWAL bool) *model.Snapshot {
		r := now.Add(-ago)
		return &model.Snapshot{CollectedAt: now,
			Settings:    map[string]model.Setting{"max_wal_size": {Name: "max_wal_size", Value: "1024", Unit: "MB"}, "checkpoint_completion_target": {Value: "0.9"}},
			Tables:      []model.Table{{Schema: "public", Name: "events", RelPages: 100, Inserted: 9000}},
			Checkpoints: &model.Checkpoints{Timed: timed, Requested: req, Reset: &r, HasWAL: hasWAL, WALBytes: int64(walMB * (1 << 20)), FPI: 1000, WALReset: &r}}
	}
	for _, c := range []struct {
		name  string
		s     *model.Snapshot
		want  model.Severity // -1: none
		skips int
	}{
		{"WAL starts them", snap(10, 40, 50*500, 5*time.Hour, true), model.Warning, 0},
		{"WAL starts them every few seconds", snap(0, 200, 200*500, 15*time.Minute, true), model.Critical, 0},
		{"timed, mostly", snap(100, 20, 120*200, 10*time.Hour, true), -1, 0},
		{"requested with little WAL between: commands and drops", snap(2, 60, 62*20, 5*time.Hour, true), -1, 0},
		{"13: no WAL counted", snap(2, 60, 0, 5*time.Hour, false), -1, 1},
	} {
		fs, skips := checkpointPressure(c.s)
		if len(skips) != c.skips {
			t.Errorf("%s: skips %+v", c.name, skips)
		}
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want none, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Severity != c.want {
			t.Fatalf("%s: got %+v", c.name, fs)
		}
		f := fs[0]
		if !strings.Contains(f.Fix.SQL, "max_wal_size = '") || strings.Contains(f.Fix.SQL, "<size>") || f.Experiment == nil || f.Experiment.Kind != model.ExpCheckpointWAL {
			t.Errorf("%s: fix %q, experiment %+v", c.name, f.Fix.SQL, f.Experiment)
		}
	}
}

// TestCheckpointPressureSizesFromTheRate: 23.9 MB/s of WAL against a
// 15-minute checkpoint_timeout needs 21 GB between checkpoints, 40 GB of
// max_wal_size at a completion target of 0.9: the fix proposes that (48GB,
// rounded up), never a size under which WAL still starts checkpoints
// every 40 s.
func TestCheckpointPressureSizesFromTheRate(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := now.Add(-20 * time.Minute)
	window := 20 * 60.0
	wal := 23.9 * window * (1 << 20)
	s := &model.Snapshot{CollectedAt: now,
		Settings: map[string]model.Setting{"max_wal_size": {Name: "max_wal_size", Value: "1024", Unit: "MB"},
			"checkpoint_completion_target": {Value: "0.9"}, "checkpoint_timeout": {Value: "900", Unit: "s"}},
		Checkpoints: &model.Checkpoints{Timed: 0, Requested: 30, Reset: &r, HasWAL: true, WALBytes: int64(wal), WALReset: &r}}
	fs, _ := checkpointPressure(s)
	if len(fs) != 1 || !strings.Contains(fs[0].Fix.SQL, "max_wal_size = '48GB'") || !strings.Contains(fs[0].Fix.Summary, "checkpoint_timeout (15 min)") {
		t.Fatalf("%+v", fs)
	}
}

// TestCheckpointPressureSizesFromTheBurst: averaged over the two hours
// since a reset, WAL came at 0.5 MB/s; while pgmedic sampled, at 20 MB/s,
// the rate at which the checkpoints were requested. The size follows the
// burst (20 MB/s x 5 min x 1.9 = 11.1 GB: 12GB), and says so.
func TestCheckpointPressureSizesFromTheBurst(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := now.Add(-2 * time.Hour)
	s := &model.Snapshot{CollectedAt: now,
		Settings: map[string]model.Setting{"max_wal_size": {Name: "max_wal_size", Value: "64", Unit: "MB"},
			"checkpoint_completion_target": {Value: "0.9"}, "checkpoint_timeout": {Value: "300", Unit: "s"}},
		Checkpoints: &model.Checkpoints{Timed: 20, Requested: 60, Reset: &r, HasWAL: true, WALBytes: int64(0.5 * 7200 * (1 << 20)), WALReset: &r},
		Sampling:    &model.Sampling{Seconds: 20, Delta: model.DatabaseDelta{WALBytes: 20 * 20 * (1 << 20)}}}
	fs, _ := checkpointPressure(s)
	if len(fs) != 1 || !strings.Contains(fs[0].Fix.SQL, "max_wal_size = '12GB'") || !strings.Contains(fs[0].Fix.Summary, "while pgmedic sampled") {
		t.Fatalf("%+v", fs)
	}
	s.Sampling.Delta.WALBytes = 0 // an idle window: the average stands
	if fs, _ := checkpointPressure(s); len(fs) != 1 || !strings.Contains(fs[0].Fix.Summary, "since the reset") {
		t.Fatalf("%+v", fs)
	}
}
