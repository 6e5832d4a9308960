package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// primaryAt is a primary's reading at time at, its WAL at wal, with one
// async standby that sent, flushed and replayed up to the positions given.
func primaryAt(at float64, wal, sent, flushed, replayed int64) model.ReplicationReading {
	return model.ReplicationReading{At: at, WAL: wal, Standbys: []model.StandbyStatus{{PID: 77, Name: "replica-eu", State: "streaming", Sync: "async",
		Sent: sent, Written: flushed, Flushed: flushed, Replayed: replayed, WriteLagS: -1, FlushLagS: -1, ReplayLagS: -1}}}
}

func replSnapshot(r *model.Replication) *model.Snapshot {
	return &model.Snapshot{Database: "rides", User: "monitor", Replication: r,
		Settings: map[string]model.Setting{"max_standby_streaming_delay": {Value: "-1", Unit: "ms"}}}
}

// TestReplicationLag: a standby whose replay stalls across the sample, or
// far behind (and where: sending, flushing, replaying), slots that keep
// WAL or lost it; a standby's own view: paused, waiting for a query (named),
// cancelled queries; and nothing for standbys that keep up.
func TestReplicationLag(t *testing.T) {
	const g = 1 << 30
	for _, c := range []struct {
		name   string
		r      *model.Replication
		want   model.Severity // -1: no finding
		object string
		in     string
		fix    string
	}{
		{"replay stalled across the sample", &model.Replication{Readings: []model.ReplicationReading{
			primaryAt(0, 100<<20, 100<<20, 100<<20, 90<<20), primaryAt(2, 104<<20, 104<<20, 104<<20, 90<<20)}},
			model.Warning, "replica-eu", "stopped replaying", "max_standby_streaming_delay"},
		{"keeping up", &model.Replication{Readings: []model.ReplicationReading{
			primaryAt(0, 100<<20, 100<<20, 100<<20, 99<<20), primaryAt(2, 104<<20, 104<<20, 104<<20, 103<<20)}},
			-1, "", "", ""},
		{"behind, replaying, slowly", &model.Replication{Readings: []model.ReplicationReading{
			primaryAt(0, 10*g, 10*g, 10*g, 8*g), primaryAt(2, 10*g+4<<20, 10*g+4<<20, 10*g+4<<20, 8*g+1<<20)}},
			model.Warning, "replica-eu", "replaying it", "pg_cancel_backend"},
		{"far behind, not sent", &model.Replication{Readings: []model.ReplicationReading{primaryAt(0, 40*g, 20*g, 20*g, 20*g)}},
			model.Critical, "replica-eu", "sending it", "walsender"},
		{"behind in flushing", &model.Replication{Readings: []model.ReplicationReading{primaryAt(0, 3*g, 3*g, g, g)}},
			model.Warning, "replica-eu", "receiving it", "pg_stat_wal_receiver"},
		{"an idle primary, caught up", &model.Replication{Readings: []model.ReplicationReading{primaryAt(0, 5<<20, 5<<20, 5<<20, 5<<20), primaryAt(2, 5<<20, 5<<20, 5<<20, 5<<20)}},
			-1, "", "", ""},
		{"an inactive slot keeping 3 GB", &model.Replication{Readings: []model.ReplicationReading{{At: 1, WAL: 5 * g}},
			Slots: []model.ReplicationSlot{{Name: "old_replica", Type: "physical", Retained: 3 * g, WALStatus: "extended", SafeBytes: -1}}},
			model.Warning, "old_replica", "no consumer connected", "pg_drop_replication_slot('old_replica')"},
		{"a slot about to lose its WAL", &model.Replication{Readings: []model.ReplicationReading{{At: 1, WAL: 5 * g}},
			Slots: []model.ReplicationSlot{{Name: "cdc", Type: "logical", Active: true, Retained: 2 * g, WALStatus: "unreserved", SafeBytes: 0}}},
			model.Critical, "cdc", "unreserved", "max_slot_wal_keep_size"},
		{"a slot with an xmin: xmin-horizon's", &model.Replication{Readings: []model.ReplicationReading{{At: 1, WAL: 5 * g}},
			Slots: []model.ReplicationSlot{{Name: "old_replica", Type: "physical", Retained: 3 * g, HoldsXmin: true, SafeBytes: -1}}},
			-1, "", "", ""},
		{"a small slot", &model.Replication{Readings: []model.ReplicationReading{{At: 1, WAL: 5 * g}},
			Slots: []model.ReplicationSlot{{Name: "replica", Type: "physical", Active: true, Retained: 16 << 20, SafeBytes: -1}}},
			-1, "", "", ""},
		{"standby: replay paused", &model.Replication{InRecovery: true, Readings: []model.ReplicationReading{{At: 1, WAL: 9 << 20, Replayed: 1 << 20, Paused: true, Receiver: "streaming", ReplayDelayS: 90}}},
			model.Warning, "this standby", "paused", "pg_wal_replay_resume()"},
		{"standby: replay waits for a report", &model.Replication{InRecovery: true, Readings: []model.ReplicationReading{{At: 1, WAL: 9 << 20, Replayed: 1 << 20, Receiver: "streaming", ReplayDelayS: 30,
			StartupWait: "RecoveryConflictSnapshot", OldestQuery: []model.StandbyQuery{{PID: 4242, Query: "SELECT city, sum(fare_cents) FROM trips GROUP BY city", XactS: 31}}}}},
			model.Warning, "4242", "snapshot conflict", "pg_cancel_backend(4242)"},
		{"standby: caught up, primary idle", &model.Replication{InRecovery: true, Readings: []model.ReplicationReading{{At: 1, WAL: 9 << 20, Replayed: 9 << 20, Receiver: "streaming", ReplayDelayS: 3600}}},
			-1, "", "", ""},
		{"standby: not streaming", &model.Replication{InRecovery: true, Readings: []model.ReplicationReading{{At: 1, WAL: 9 << 20, Replayed: 9 << 20, ReplayDelayS: 30}}},
			model.Warning, "this standby", "not streaming", "primary_conninfo"},
		{"standby: queries cancelled during the sample", &model.Replication{InRecovery: true, Readings: []model.ReplicationReading{
			{At: 1, WAL: 9 << 20, Replayed: 9 << 20, Receiver: "streaming", Conflicts: model.ConflictCounts{Snapshot: 4}},
			{At: 11, WAL: 10 << 20, Replayed: 10 << 20, Receiver: "streaming", Conflicts: model.ConflictCounts{Snapshot: 7, Lock: 1}}}},
			model.Warning, "this standby", "4 queries on this standby were cancelled", "hot_standby_feedback = on"},
	} {
		fs, _ := replicationLag(replSnapshot(c.r))
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want no finding, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 {
			t.Errorf("%s: want one finding, got %d: %+v", c.name, len(fs), fs)
			continue
		}
		f := fs[0]
		if f.Severity != c.want || f.Object.Name != c.object || !strings.Contains(f.Title, c.in) || !strings.Contains(f.Fix.SQL, c.fix) {
			t.Errorf("%s: got %s %s %q\nfix %q", c.name, f.Severity, f.Object.Name, f.Title, f.Fix.SQL)
		}
	}
}

// TestReplicationLagHidden: standbys whose positions the role cannot see
// get the "could not see" line.
func TestReplicationLagHidden(t *testing.T) {
	r := &model.Replication{Readings: []model.ReplicationReading{{At: 1, WAL: 1 << 30, Standbys: []model.StandbyStatus{{PID: 7, Name: "replica-eu", Hidden: true}}}}}
	fs, skips := replicationLag(replSnapshot(r))
	if len(fs) != 0 || len(skips) != 1 || !strings.Contains(skips[0].Fix, "GRANT pg_read_all_stats TO monitor") {
		t.Errorf("findings %+v, skips %+v", fs, skips)
	}
	// On a standby: a receiver whose status is hidden is not "not
	// streaming".
	r = &model.Replication{InRecovery: true, Readings: []model.ReplicationReading{{At: 1, WAL: 9 << 20, Replayed: 9 << 20, Receiver: "hidden"}}}
	fs, skips = replicationLag(replSnapshot(r))
	if len(fs) != 0 || len(skips) != 1 || !strings.Contains(skips[0].Reason, "could not see whether this standby streams") {
		t.Errorf("standby, hidden: findings %+v, skips %+v", fs, skips)
	}
}
