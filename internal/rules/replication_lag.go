package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ReplicationLagID is the rule id of standbys that fall behind, slots
// that keep WAL, and standbys whose replay waits or whose queries are
// cancelled.
const ReplicationLagID = "replication-lag"

const (
	mb = 1 << 20
	// A standby this far behind (bytes of WAL, or seconds of replay
	// lag) is a warning, and a critical at the second figure: a failover
	// then loses or waits for that much, and reads on it are that stale.
	replBehindWarn     = 1 << 30
	replBehindCritical = 16 << 30
	replLagWarnS       = 60
	replLagCriticalS   = 600
	// A stall: replay did not move across the sample while the primary
	// wrote at least replMovedBytes and the standby is replStallBytes
	// behind.
	replMovedBytes = 64 << 10
	replStallBytes = 1 << 20
	// A slot keeping this much WAL is a warning.
	slotRetainWarn = 1 << 30
)

// replicationLag judges replication from the server check reads: on a
// primary its standbys (how far behind each is, and where: sending,
// writing and flushing on the standby, or replaying) and its slots (the WAL
// each keeps, and whether it is about to be lost); on a standby its own
// replay (paused, waiting for a query, behind) and the queries recovery
// conflicts cancelled.
func replicationLag(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	r := s.Replication
	if r == nil || len(r.Readings) == 0 {
		return nil, nil
	}
	var out []model.Finding
	var skips []model.Skip
	if r.InRecovery {
		out = standbySide(s, r)
		if r.Readings[len(r.Readings)-1].Receiver == "hidden" {
			skips = append(skips, model.Skip{Rule: ReplicationLagID,
				Reason: "could not see whether this standby streams, what its replay waits for, nor the other roles' queries it may wait for: pg_stat_wal_receiver and pg_stat_activity hide them from pgmedic's role",
				Fix:    fmt.Sprintf("GRANT pg_read_all_stats TO %s;", sqlparse.QuoteIdent(orUnknown(s.User)))})
		}
	} else {
		var hidden int
		out, hidden = primarySide(s, r)
		if hidden > 0 {
			skips = append(skips, model.Skip{Rule: ReplicationLagID,
				Reason: fmt.Sprintf("could not see how far %s behind: pg_stat_replication hides their WAL positions from pgmedic's role", map[bool]string{true: "the standby is", false: fmt.Sprintf("%d standbys are", hidden)}[hidden == 1]),
				Fix:    fmt.Sprintf("GRANT pg_read_all_stats TO %s;", sqlparse.QuoteIdent(orUnknown(s.User)))})
		}
	}
	out = append(out, slotFindings(s, r)...)
	Sort(out)
	return out, skips
}

// primarySide is a finding per standby that is far behind or whose
// replay stalled across the sample; hidden counts those the role could
// not see.
func primarySide(s *model.Snapshot, r *model.Replication) ([]model.Finding, int) {
	first, last := r.Readings[0], r.Readings[len(r.Readings)-1]
	var out []model.Finding
	hidden := 0
	for _, st := range last.Standbys {
		if st.Hidden {
			hidden++
			continue
		}
		behind := last.WAL - st.Replayed
		var before *model.StandbyStatus
		for i, b := range first.Standbys {
			if len(r.Readings) > 1 && b.PID == st.PID && !b.Hidden {
				before = &first.Standbys[i]
			}
		}
		wrote := last.WAL - first.WAL
		stalled := before != nil && st.Replayed == before.Replayed && wrote >= replMovedBytes && behind >= replStallBytes
		sev := model.Severity(-1)
		switch {
		case behind >= replBehindCritical || st.ReplayLagS >= replLagCriticalS || stalled && behind >= replBehindWarn:
			sev = model.Critical
		case behind >= replBehindWarn || st.ReplayLagS >= replLagWarnS || stalled:
			sev = model.Warning
		}
		if sev < 0 {
			continue
		}
		out = append(out, standbyFinding(s, r, st, before, sev, behind, stalled))
	}
	return out, hidden
}

// standbyFinding says how far the standby is behind and where: WAL not
// yet sent (the primary's sender or the network), sent but not flushed
// (the network or the standby's disk), or flushed but not replayed
// (replay: a query it waits for, paused, or slower than the writes).
func standbyFinding(s *model.Snapshot, r *model.Replication, st model.StandbyStatus, before *model.StandbyStatus, sev model.Severity, behind int64, stalled bool) model.Finding {
	last := r.Readings[len(r.Readings)-1]
	unsent, unflushed, unreplayed := last.WAL-st.Sent, st.Sent-st.Flushed, st.Flushed-st.Replayed
	where := "replaying it: flushed on the standby but not applied"
	switch {
	case unsent >= max(unflushed, unreplayed):
		where = "sending it: the WAL has not left the primary (its WAL sender, or the network)"
	case unflushed >= unreplayed:
		where = "receiving it: sent but not flushed on the standby (the network, or the standby's disk)"
	}
	title := fmt.Sprintf("standby %s is %s behind the primary, in %s", st.Name, bytesText(behind), where)
	span := 0.0
	if len(r.Readings) > 1 {
		span = last.At - r.Readings[0].At
	}
	if stalled {
		title = fmt.Sprintf("standby %s stopped replaying: its replay position did not move in %.0f s while the primary wrote %s; it is %s behind",
			st.Name, span, bytesText(last.WAL-r.Readings[0].WAL), bytesText(behind))
	}
	evs := []model.Evidence{
		ev("WAL the standby has not replayed", model.Round(float64(behind)/mb, 2), "MB"),
		ev("of it not yet sent", model.Round(float64(max(unsent, 0))/mb, 2), "MB"),
		ev("sent, not yet flushed on the standby", model.Round(float64(max(unflushed, 0))/mb, 2), "MB"),
		ev("flushed, not yet replayed", model.Round(float64(max(unreplayed, 0))/mb, 2), "MB"),
	}
	if span > 0 {
		evs = append(evs, ev("WAL the primary wrote a second across the sample", model.Round(float64(last.WAL-r.Readings[0].WAL)/mb/span, 3), "MB/s"))
		if before != nil {
			evs = append(evs, ev("WAL the standby replayed a second across the sample", model.Round(float64(st.Replayed-before.Replayed)/mb/span, 3), "MB/s"))
		}
	}
	for _, l := range []struct {
		label string
		v     float64
	}{{"write lag (PostgreSQL's)", st.WriteLagS}, {"flush lag (PostgreSQL's)", st.FlushLagS}, {"replay lag (PostgreSQL's; it is measured only when replay moves)", st.ReplayLagS}} {
		if l.v >= 0 {
			evs = append(evs, ev(l.label, model.Round(l.v, 3), "s"))
		}
	}
	impact := "reads on the standby are that stale, a failover to it waits to replay it all (or loses what was not sent), and the primary keeps the WAL until it is through"
	if st.Sync == "sync" || st.Sync == "quorum" {
		impact = "it is a synchronous standby: commits on the primary wait for it; " + impact
		evs = append(evs, model.Evidence{Label: "synchronous standby (" + st.Sync + "): the primary's commits wait for it", Value: 1, Fact: true})
	}
	if st.State != "streaming" {
		evs = append(evs, model.Evidence{Label: "WAL sender state: " + st.State, Value: 1, Fact: true})
	}
	fix := model.Fix{Summary: "find what holds replay on the standby: a query it waits for (max_standby_streaming_delay = -1 lets one wait forever), replay paused, or a standby slower than the primary's writes; pgmedic check on the standby names the query",
		SQL: "-- on the standby:\nSELECT pg_is_wal_replay_paused();  -- true: SELECT pg_wal_replay_resume();\n" +
			"SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'startup';  -- RecoveryConflict*: replay waits for a query\n" +
			"SELECT pid, now() - xact_start AS open_for, left(query, 60) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL ORDER BY xact_start LIMIT 5;\n" +
			"SELECT pg_cancel_backend(<pid of the oldest>);\n" +
			"ALTER SYSTEM SET max_standby_streaming_delay = '30s';  -- the default: replay cancels a query that holds it longer\nSELECT pg_reload_conf();"}
	if !strings.HasPrefix(where, "replaying") {
		fix = model.Fix{Summary: "the WAL is not getting to the standby fast enough: check the network between them and the standby's disk (pg_stat_wal_receiver on the standby, the WAL sender's wait events here)",
			SQL: "SELECT pid, application_name, state, wait_event_type, wait_event FROM pg_stat_activity WHERE backend_type = 'walsender';\n-- on the standby:\nSELECT status, last_msg_receipt_time, latest_end_lsn FROM pg_stat_wal_receiver;"}
	}
	return model.Finding{Rule: ReplicationLagID, Severity: sev, Title: title,
		Object:       model.Object{Kind: "standby", Name: st.Name},
		Evidence:     evs,
		Impact:       model.Impact{Summary: impact},
		Fix:          fix,
		Docs:         docsPath(ReplicationLagID),
		Verification: model.NotRunBecause("nothing to run: the positions are the primary's WAL sender's, read at the start and the end of the sample on the server's clock"),
	}
}

// standbySide judges a standby's own replay: paused, waiting for a
// query, behind what it received, not streaming; and the queries recovery
// conflicts cancelled during the sample.
func standbySide(s *model.Snapshot, r *model.Replication) []model.Finding {
	first, last := r.Readings[0], r.Readings[len(r.Readings)-1]
	var out []model.Finding
	obj := model.Object{Kind: "standby", Name: "this standby", Database: s.Database}
	behind := last.WAL - last.Replayed
	lagging := behind > 0 && last.ReplayDelayS >= 0
	base := func(sev model.Severity, title string) model.Finding {
		return model.Finding{Rule: ReplicationLagID, Severity: sev, Title: title, Object: obj, Docs: docsPath(ReplicationLagID),
			Evidence: []model.Evidence{
				ev("WAL received, not yet replayed", model.Round(float64(max(behind, 0))/mb, 2), "MB"),
				ev("seconds since the last transaction replayed committed on the primary", model.Round(math.Max(last.ReplayDelayS, 0), 1), "s"),
			},
			Verification: model.NotRunBecause("nothing to run: the positions and counters are the standby's own, read at the start and the end of the sample")}
	}
	switch {
	case last.Paused:
		f := base(model.Warning, "replay is paused on this standby (pg_wal_replay_pause): it receives WAL and applies none")
		f.Impact = model.Impact{Summary: "its data stays as it was when replay was paused, and the WAL it receives piles up on its disk"}
		f.Fix = model.Fix{Summary: "resume replay", SQL: "SELECT pg_wal_replay_resume();"}
		out = append(out, f)
	case strings.HasPrefix(last.StartupWait, "RecoveryConflict") && behind > 0:
		what := strings.TrimPrefix(last.StartupWait, "RecoveryConflict")
		title := fmt.Sprintf("replay waits for queries on this standby (a %s conflict): %s received and not applied", strings.ToLower(what), bytesText(behind))
		f := base(model.Warning, title)
		if lagging && last.ReplayDelayS >= replLagWarnS {
			f.Severity = model.Critical
		}
		f.Impact = model.Impact{Summary: "every read on the standby sees data as old as the oldest query it waits for, and the primary's WAL piles up behind it"}
		fix := "SELECT pg_cancel_backend(<pid>);"
		if len(last.OldestQuery) > 0 {
			q := last.OldestQuery[0]
			f.Title += fmt.Sprintf("; the oldest snapshot is pid %d's, open %s: %s", q.PID, durationText(q.XactS), printable.Shorten(q.Query, 80))
			f.Object = model.Object{Kind: "session", Name: fmt.Sprint(q.PID), Database: s.Database}
			f.Evidence = append(f.Evidence, ev(fmt.Sprintf("seconds pid %d's transaction has been open", q.PID), math.Round(q.XactS), "s"))
			fix = fmt.Sprintf("SELECT pg_cancel_backend(%d);", q.PID)
		}
		if delay, ok := s.Settings["max_standby_streaming_delay"]; ok {
			label := "max_standby_streaming_delay = " + delay.Value + delay.Unit
			if delay.Value == "-1" {
				label = "max_standby_streaming_delay = -1: replay waits for a conflicting query as long as it runs"
			}
			f.Evidence = append(f.Evidence, model.Evidence{Label: label, Value: 1, Fact: true})
		}
		f.Fix = model.Fix{Summary: "end the query replay waits for, and bound how long replay waits (max_standby_streaming_delay: -1 waits forever); long reports belong on a replica that may lag, or need hot_standby_feedback (which moves the cost to the primary's VACUUM)",
			SQL: fix + "\nALTER SYSTEM SET max_standby_streaming_delay = '30s';\nSELECT pg_reload_conf();"}
		out = append(out, f)
	case lagging && (behind >= replBehindWarn || last.ReplayDelayS >= replLagWarnS && len(r.Readings) > 1 && last.Replayed == first.Replayed):
		f := base(model.Warning, fmt.Sprintf("this standby is %s behind what it received, its last replayed transaction %s old", bytesText(behind), durationText(last.ReplayDelayS)))
		f.Impact = model.Impact{Summary: "reads on the standby are that stale, and a failover to it waits for the replay"}
		f.Fix = model.Fix{Summary: "replay is slower than the primary's writes: look at what the startup process waits for and at the standby's I/O",
			SQL: "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE backend_type = 'startup';"}
		out = append(out, f)
	}
	if last.Receiver != "streaming" && last.Receiver != "hidden" && !last.Paused {
		status := last.Receiver
		if status == "" {
			status = "no WAL receiver at all"
		}
		f := base(model.Warning, "this standby is not streaming from its primary: "+status)
		f.Impact = model.Impact{Summary: "it replays only what it finds in its archive or pg_wal, and falls behind the primary by everything written since"}
		f.Fix = model.Fix{Summary: "check primary_conninfo, the primary's pg_hba.conf (a replication line) and max_wal_senders; the standby's log says why the receiver stopped",
			SQL: "SHOW primary_conninfo;\nSELECT * FROM pg_stat_wal_receiver;"}
		out = append(out, f)
	}
	if len(r.Readings) > 1 {
		d := last.Conflicts.Total() - first.Conflicts.Total()
		if d > 0 {
			f := base(model.Warning, fmt.Sprintf("%d queries on this standby were cancelled by recovery conflicts during the sample (%s since the statistics were reset)", d, conflictText(last.Conflicts)))
			f.Evidence = append(f.Evidence, ev("queries cancelled during the sample", float64(d), ""))
			f.Impact = model.Impact{Summary: "the application's reads on the standby fail with \"canceling statement due to conflict with recovery\" and are retried or lost"}
			f.Fix = model.Fix{Summary: "snapshot conflicts: VACUUM on the primary removed rows the standby's queries still saw; turn on hot_standby_feedback (the primary then keeps those rows, more bloat there) or raise max_standby_streaming_delay (staler reads); lock conflicts: the primary's ACCESS EXCLUSIVE locks (TRUNCATE, DDL, VACUUM truncating the table's end)",
				SQL: "ALTER SYSTEM SET hot_standby_feedback = on;\nSELECT pg_reload_conf();"}
			out = append(out, f)
		}
	}
	return out
}

// slotFindings are the slots that keep much WAL, or are about to lose
// (or have lost) what their consumer needs; a slot that keeps an xmin
// holding VACUUM back is xmin-horizon's, which names it with its WAL.
func slotFindings(s *model.Snapshot, r *model.Replication) []model.Finding {
	var out []model.Finding
	for _, sl := range r.Slots {
		if sl.HoldsXmin && !sl.Active && sl.WALStatus != "lost" {
			continue
		}
		var sev model.Severity = -1
		var title string
		switch {
		case sl.WALStatus == "lost":
			sev, title = model.Warning, fmt.Sprintf("replication slot %s has lost the WAL its consumer needs (wal_status = lost): it can never catch up, and the slot only takes space", sl.Name)
		case sl.WALStatus == "unreserved":
			sev, title = model.Critical, fmt.Sprintf("replication slot %s keeps %s of WAL past max_slot_wal_keep_size (wal_status = unreserved): the next checkpoint may remove what its consumer needs", sl.Name, bytesText(sl.Retained))
		case sl.Retained >= slotRetainWarn && !sl.Active:
			sev, title = model.Warning, fmt.Sprintf("replication slot %s has no consumer connected and keeps %s of WAL on the primary's disk", sl.Name, bytesText(sl.Retained))
		case sl.Retained >= slotRetainWarn:
			sev, title = model.Warning, fmt.Sprintf("replication slot %s keeps %s of WAL: its consumer is that far behind", sl.Name, bytesText(sl.Retained))
		}
		if sev < 0 {
			continue
		}
		evs := []model.Evidence{ev("WAL the slot keeps", model.Round(float64(sl.Retained)/mb, 1), "MB"),
			{Label: fmt.Sprintf("%s slot, %s", sl.Type, map[bool]string{true: "a consumer connected", false: "no consumer connected"}[sl.Active]), Value: 1, Fact: true}}
		if sl.SafeBytes >= 0 {
			evs = append(evs, ev("WAL that may still be written before the slot is lost", model.Round(float64(sl.SafeBytes)/mb, 1), "MB"))
		}
		fix := model.Fix{Summary: "drop the slot if nothing will consume it again (a standby or subscriber that is gone); else bring its consumer back, and cap what any slot may keep (max_slot_wal_keep_size)",
			SQL: fmt.Sprintf("SELECT pg_drop_replication_slot(%s);\n-- or cap it: ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf();", sqlparse.QuoteLiteral(sl.Name))}
		if sl.Active && sl.WALStatus != "lost" {
			fix.Summary = "its consumer is behind: see what holds it (the standby's replay, the subscriber's apply); cap what a slot may keep so the primary's disk does not fill"
			fix.SQL = "SELECT pid, application_name, state, sent_lsn, replay_lsn FROM pg_stat_replication;\nALTER SYSTEM SET max_slot_wal_keep_size = '50GB';\nSELECT pg_reload_conf();"
		}
		out = append(out, model.Finding{Rule: ReplicationLagID, Severity: sev, Title: title,
			Object:       model.Object{Kind: "replication slot", Name: sl.Name},
			Evidence:     evs,
			Impact:       model.Impact{Summary: "the primary cannot remove that WAL: pg_wal grows until the disk is full, and then the server stops"},
			Fix:          fix,
			Docs:         docsPath(ReplicationLagID),
			Verification: model.NotRunBecause("nothing to run: the WAL kept is pg_replication_slots' restart_lsn against the server's WAL position"),
		})
	}
	return out
}

func bytesText(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(b)/(1<<30))
	case b >= mb:
		return fmt.Sprintf("%.1f MB", float64(b)/mb)
	}
	return fmt.Sprintf("%d kB", b>>10)
}

func conflictText(c model.ConflictCounts) string {
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{{c.Snapshot, "snapshot"}, {c.Lock, "lock"}, {c.BufferPin, "buffer pin"}, {c.Deadlock, "deadlock"}, {c.Tablespace, "tablespace"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
