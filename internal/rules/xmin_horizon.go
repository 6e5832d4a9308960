package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// XminHorizonID is the rule id of what holds the xmin horizon back.
const XminHorizonID = "xmin-horizon"

// Thresholds of xmin-horizon. A row version an UPDATE or DELETE leaves
// behind can be removed only once no transaction can still see it: one
// transaction that stays open (or a prepared one nobody finishes, a slot
// nobody reads, a standby's long query fed back) keeps every dead row of
// the database from the moment it began, and every VACUUM from then on
// scans them and removes none.
const (
	// horizonMinAge: fewer transactions than this since the holder began
	// and nothing died that it keeps.
	horizonMinAge = 1000
	// horizonSessionMin: a client's transaction shorter than this is a
	// long report or a batch, not a holder worth a finding.
	horizonSessionMin = time.Minute
	// horizonWarnDead: dead rows a VACUUM left behind since the holder
	// began that make it a warning, whatever holds them.
	horizonWarnDead = 10000
	// horizonWarnAge and horizonCriticalAge: transactions since the
	// holder began. At autovacuum_freeze_max_age (200M by default)
	// anti-wraparound vacuums start, and they cannot freeze past the
	// holder either.
	horizonWarnAge     = 1_000_000
	horizonCriticalAge = 100_000_000
	horizonCritDead    = 1_000_000
)

// retained is what a holder keeps from VACUUM in this database: the dead
// rows of the tables vacuumed after it began (pg_stat_user_tables'
// n_dead_tup after a VACUUM is what that VACUUM could not remove), and
// the table that holds most.
type retained struct {
	dead   int64
	tables int
	top    *model.Table
}

func retainedBy(s *model.Snapshot, h model.XminHolder) retained {
	var r retained
	for i, t := range s.Tables {
		if t.LastVacuum == nil || t.Dead == 0 || (h.Since != nil && t.LastVacuum.Before(*h.Since)) {
			continue
		}
		// A slot or a standby has no start the server keeps: only the
		// vacuums of the last hour count against it.
		if h.Since == nil && s.CollectedAt.Sub(*t.LastVacuum) > time.Hour {
			continue
		}
		r.dead += t.Dead
		r.tables++
		if r.top == nil || t.Dead > r.top.Dead {
			r.top = &s.Tables[i]
		}
	}
	return r
}

// holderMatters says whether a holder is worth a finding at all: old
// enough in transactions, and, for a client's transaction, in time (a
// prepared transaction is either being finished within milliseconds by
// its coordinator or left behind; a slot's xmin is held as long as its
// consumer lags or is gone).
func holderMatters(s *model.Snapshot, h model.XminHolder, r retained) bool {
	if h.XminAge < horizonMinAge && r.dead < horizonWarnDead {
		return false
	}
	switch h.Kind {
	case model.HolderSession:
		// Another role's session shows its xmin but not when its
		// transaction began (pg_read_all_stats): its age in transactions
		// must speak for it.
		if h.Since == nil {
			return h.XminAge >= horizonWarnAge || r.dead >= horizonWarnDead
		}
		return h.HeldFor(s.CollectedAt) >= horizonSessionMin
	case model.HolderSlot:
		return !h.CatalogOnly && (!h.Active || h.XminAge >= horizonWarnAge)
	case model.HolderStandby:
		return h.XminAge >= horizonWarnAge || r.dead >= horizonWarnDead
	}
	return true
}

// xminHorizon names what keeps VACUUM from removing this database's dead
// rows, with its age in time and in transactions, the dead rows vacuums
// left since it began, and the statement that releases it.
func xminHorizon(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	hidden, hiddenAge := 0, int64(0)
	for _, h := range s.Holders {
		if !h.HoldsDatabase(s.Database) {
			continue
		}
		r := retainedBy(s, h)
		if !holderMatters(s, h, r) {
			if h.Kind == model.HolderSession && h.Since == nil && h.XminAge >= horizonMinAge {
				hidden, hiddenAge = hidden+1, max(hiddenAge, h.XminAge)
			}
			continue
		}
		sev := model.Info
		abandoned := h.Kind == model.HolderPrepared || (h.Kind == model.HolderSlot && !h.Active) ||
			(h.Kind == model.HolderSession && strings.HasPrefix(h.State, "idle in transaction"))
		switch {
		case h.XminAge >= horizonCriticalAge || r.dead >= horizonCritDead:
			sev = model.Critical
		case abandoned || h.XminAge >= horizonWarnAge || r.dead >= horizonWarnDead:
			sev = model.Warning
		}
		f := model.Finding{
			Rule: XminHorizonID, Severity: sev, Title: horizonTitle(s, h, r),
			Object: horizonObject(s, h),
			Evidence: []model.Evidence{
				ev("transactions since the oldest it holds (age of its xmin)", float64(h.XminAge), ""),
			},
			Impact: model.Impact{Summary: "no VACUUM can remove a row version that died after it began: tables and indexes grow, scans read dead rows, and freezing cannot advance past it"},
			Fix:    horizonFix(s, h),
			Docs:   docsPath(XminHorizonID),
		}
		if d := h.HeldFor(s.CollectedAt); d > 0 {
			f.Evidence = append(f.Evidence, ev("held for", d.Seconds(), "s"))
		}
		if r.tables > 0 {
			f.Evidence = append(f.Evidence,
				ev("dead rows VACUUM left in tables it vacuumed since", float64(r.dead), "rows"),
				ev("tables vacuumed since, with dead rows left", float64(r.tables), ""))
		}
		if n := waitersOnPrepared(s); h.Kind == model.HolderPrepared && n > 0 {
			f.Evidence = append(f.Evidence, ev("sessions seen waiting for a prepared transaction's locks (most at once)", float64(n), ""))
			f.Impact.Summary += "; and the rows it locked stay locked: sessions queued behind it while check sampled"
			f.Title += fmt.Sprintf("; %s waited for its locks", sessionsWord(n))
		}
		if h.Kind == model.HolderSlot && h.RetainedWAL > 0 {
			f.Evidence = append(f.Evidence, ev("WAL the slot keeps on disk", float64(h.RetainedWAL)/(1<<20), "MB"))
		}
		if t := horizonTable(s, r); t != nil {
			f.Experiment = &model.Experiment{Kind: model.ExpHorizon, Table: model.RelRef{Schema: t.Schema, Name: t.Name}}
		} else {
			f.Verification = model.NotRunBecause("no table of this database has rows: there is nothing to update and vacuum on a twin")
		}
		out = append(out, f)
	}
	Sort(out)
	var skips []model.Skip
	if hidden > 0 {
		skips = append(skips, model.Skip{Rule: XminHorizonID,
			Reason: fmt.Sprintf("could not see since when %d sessions of other roles hold back the horizon (the oldest is %s transactions behind): pg_stat_activity hides their transaction's start from pgmedic's role", hidden, printable.Count(float64(hiddenAge))),
			Fix:    fmt.Sprintf("GRANT pg_read_all_stats TO %s;", sqlparse.QuoteIdent(orUnknown(s.User)))})
	}
	return out, skips
}

// reportedHolder is the oldest holder of this database's horizon that
// xmin-horizon reports (a prepared transaction first), or nil.
func reportedHolder(s *model.Snapshot) *model.XminHolder {
	var best *model.XminHolder
	for i, h := range s.Holders {
		if !h.HoldsDatabase(s.Database) || !holderMatters(s, h, retainedBy(s, h)) {
			continue
		}
		if best == nil || (h.Kind == model.HolderPrepared) != (best.Kind == model.HolderPrepared) && h.Kind == model.HolderPrepared ||
			(h.Kind == model.HolderPrepared) == (best.Kind == model.HolderPrepared) && h.XminAge > best.XminAge {
			best = &s.Holders[i]
		}
	}
	return best
}

// horizonTable is the table the experiment updates and vacuums: the one
// holding most of the dead rows the holder kept.
func horizonTable(s *model.Snapshot, r retained) *model.Table {
	if r.top != nil && r.top.Live > 0 {
		return r.top
	}
	// Else the table with the most updates and deletes, and where none
	// has any, the one with the most rows: the experiment updates its own
	// copy of them either way.
	var best *model.Table
	for i, t := range s.Tables {
		if t.Partitioned || t.Live == 0 {
			continue
		}
		if best == nil || t.Updated+t.Deleted > best.Updated+best.Deleted ||
			(t.Updated+t.Deleted == best.Updated+best.Deleted && t.Live > best.Live) {
			best = &s.Tables[i]
		}
	}
	return best
}

func horizonTitle(s *model.Snapshot, h model.XminHolder, r retained) string {
	var what string
	switch h.Kind {
	case model.HolderPrepared:
		what = fmt.Sprintf("prepared transaction %s, never committed nor rolled back,", sqlparse.QuoteLiteral(h.Name))
	case model.HolderSlot:
		state := "inactive"
		if h.Active {
			state = "active but behind"
		}
		what = fmt.Sprintf("replication slot %s (%s)", h.Name, state)
	case model.HolderStandby:
		what = fmt.Sprintf("standby %s (hot_standby_feedback)", h.Name)
	default:
		what = fmt.Sprintf("session pid %d (%s)", h.PID, orUnknown(h.State))
	}
	t := fmt.Sprintf("%s holds back VACUUM: its xmin is %s transactions old", what, printable.Count(float64(h.XminAge)))
	if d := h.HeldFor(s.CollectedAt); d > 0 {
		t += ", " + heldText(d)
	}
	if r.top != nil {
		t += fmt.Sprintf("; VACUUM left %s dead rows it could not remove (%s: %s)", printable.Count(float64(r.dead)), r.top.Name, printable.Count(float64(r.top.Dead)))
	}
	return t
}

func horizonObject(s *model.Snapshot, h model.XminHolder) model.Object {
	o := model.Object{Kind: holderWord(h.Kind), Name: h.Name, Role: h.User, Database: h.Database}
	if h.Kind == model.HolderSession {
		o.Name = fmt.Sprintf("pid %d: %s", h.PID, printable.Shorten(s.Shown(h.Query), 80))
		if strings.TrimSpace(h.Query) != "" {
			o.Fingerprint, _ = sqlparse.Fingerprint(h.Query)
		}
	}
	return o
}

// horizonFix names the statement that releases this holder, and what
// keeps the next one from forming.
func horizonFix(s *model.Snapshot, h model.XminHolder) model.Fix {
	switch h.Kind {
	case model.HolderPrepared:
		return model.Fix{Summary: fmt.Sprintf("finish the prepared transaction in database %s, as its owner (%s) or a superuser: COMMIT PREPARED if the transaction manager that prepared it recorded a commit, ROLLBACK PREPARED if it has no record of it; a server that uses no two-phase commit can set max_prepared_transactions = 0", h.Database, orUnknown(h.User)),
			SQL: fmt.Sprintf("ROLLBACK PREPARED %s;  -- or COMMIT PREPARED %s; run it connected to %s", sqlparse.QuoteLiteral(h.Name), sqlparse.QuoteLiteral(h.Name), h.Database)}
	case model.HolderSlot:
		sum := "drop the slot once its consumer is known to be gone (a standby rebuilt elsewhere, a CDC connector removed); bound what a slot may keep with max_slot_wal_keep_size (13+)"
		if h.Active {
			sum = "the slot's consumer is connected but behind: find why it does not confirm (a stalled CDC connector, a slow standby); drop the slot only if its consumer is not coming back"
		}
		return model.Fix{Summary: sum, SQL: fmt.Sprintf("SELECT pg_drop_replication_slot(%s);", sqlparse.QuoteLiteral(h.Name))}
	case model.HolderStandby:
		return model.Fix{Summary: "a long query on the standby is kept alive by hot_standby_feedback at the primary's cost: bound it on the standby (statement_timeout for its readers), or turn hot_standby_feedback off there and accept query conflicts",
			SQL: "-- on the standby:\nALTER SYSTEM SET hot_standby_feedback = off;  -- or a statement_timeout for its long readers\nSELECT pg_reload_conf();"}
	}
	role := h.User
	if role == "" {
		role = "the_application_role"
	}
	if strings.HasPrefix(h.State, "idle in transaction") {
		return model.Fix{Summary: "end the abandoned transaction, then let the server end the next one: idle_in_transaction_session_timeout for the role",
			SQL: fmt.Sprintf("SELECT pg_terminate_backend(%d);\nALTER ROLE %s SET idle_in_transaction_session_timeout = '5min';", h.PID, sqlparse.QuoteIdent(role))}
	}
	return model.Fix{Summary: "the transaction is still working: cancel it if it can be run again later or elsewhere (a replica without hot_standby_feedback), and bound the role's statements and transactions",
		SQL: fmt.Sprintf("SELECT pg_cancel_backend(%d);\nALTER ROLE %s SET statement_timeout = '15min';", h.PID, sqlparse.QuoteIdent(role))}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// heldText writes how long a holder has held the horizon: 45 s, 12 min,
// 3.2 h, 4.0 days.
func heldText(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.1f days", d.Hours()/24)
	case d >= 2*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	case d >= 2*time.Minute:
		return fmt.Sprintf("%.0f min", d.Minutes())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

// waitersOnPrepared is the most sessions of this database seen at once
// waiting for a prepared transaction's locks (pg_blocking_pids names
// their holder pid 0).
func waitersOnPrepared(s *model.Snapshot) int {
	if s.Sampling == nil {
		return 0
	}
	most := 0
	for _, smp := range s.Sampling.Samples {
		n := 0
		for _, b := range smp.Backends {
			if b.Database == s.Database && slices.Contains(b.BlockedBy, 0) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
