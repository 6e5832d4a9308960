package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// WraparoundID is the rule id of transaction-id (and multixact) ages
// closing on the server's limits.
const WraparoundID = "wraparound"

// Transaction ids are 32 bits: a row's xmin is compared with the next id
// modulo 2^31, so no row may be older than about 2.1 billion transactions
// unless VACUUM has frozen it. PostgreSQL warns 40 million before that
// limit and refuses new transaction ids 3 million before it (1 million
// before 16); anti-wraparound autovacuums start at autovacuum_freeze_max_age
// (200 million by default, per table when its reloptions set one lower).
// The same holds for multixact ids with autovacuum_multixact_freeze_max_age.
const (
	wrapStop           = math.MaxInt32 - 3_000_000
	wrapCriticalAge    = 1_000_000_000 // half-way: a vacuum that must catch up now reads every page of every table it froze least
	wrapOverdue        = 1.5           // a table at this many times its freeze_max_age: the anti-wraparound vacuum due long ago has not done its work
	wrapWarnDays       = 30
	wrapCriticalDays   = 7
	defaultFreezeMax   = 200_000_000
	defaultMxFreezeMax = 400_000_000
)

// settingInt reads an integer setting, or def when it is not there.
func settingInt(s *model.Snapshot, name string, def int64) int64 {
	if v := s.Settings[name].Float(); v > 0 {
		return int64(v)
	}
	return def
}

// wraparound finds this database's tables, and any database of the
// server, whose oldest unfrozen transaction ids (or multixacts) are far
// past the age at which anti-wraparound vacuums should have frozen them,
// or close to the limit at the rate this server consumes transaction ids,
// and what keeps freezing from advancing.
func wraparound(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	freezeMax := settingInt(s, "autovacuum_freeze_max_age", defaultFreezeMax)
	mxFreezeMax := settingInt(s, "autovacuum_multixact_freeze_max_age", defaultMxFreezeMax)
	rate := s.XIDs.Rate()
	var out []model.Finding
	judge := func(xidAge, mxAge, ownMax int64) (model.Severity, float64, bool) {
		eff := freezeMax
		if ownMax > 0 && ownMax < eff {
			eff = ownMax
		}
		days := math.Inf(1)
		if rate > 0 {
			days = float64(wrapStop-xidAge) / rate / 86400
		}
		// The days left count only once the anti-wraparound vacuum is
		// due: before that, autovacuum's freezing is what the rate meets.
		due := xidAge >= eff
		switch {
		case xidAge >= wrapCriticalAge || mxAge >= wrapCriticalAge || (due && days < wrapCriticalDays):
			return model.Critical, days, true
		case float64(xidAge) >= wrapOverdue*float64(eff) || float64(mxAge) >= wrapOverdue*float64(mxFreezeMax) || (due && days < wrapWarnDays):
			return model.Warning, days, true
		}
		return 0, days, false
	}
	holder := oldestHolder(s)
	for _, t := range s.Tables {
		sev, days, bad := judge(t.FrozenAge, t.MxidAge, t.FreezeMaxAge)
		if !bad {
			continue
		}
		eff := freezeMax
		if t.FreezeMaxAge > 0 && t.FreezeMaxAge < eff {
			eff = t.FreezeMaxAge
		}
		name := sqlparse.QuoteQualified(t.Schema, t.Name)
		f := model.Finding{Rule: WraparoundID, Severity: sev,
			Title: fmt.Sprintf("table %s has rows %s transactions old that VACUUM has not frozen: %.1fx the age (%s) at which an anti-wraparound vacuum should have frozen them",
				name, printable.Count(float64(t.FrozenAge)), float64(t.FrozenAge)/float64(eff), printable.Count(float64(eff))),
			Object:       model.Object{Kind: "table", Name: t.Schema + "." + t.Name, Database: s.Database},
			Evidence:     wrapEvidence(t.FrozenAge, t.MxidAge, eff, rate, days),
			Impact:       model.Impact{Summary: "at about 2.1 billion transactions the server stops assigning transaction ids to protect its data: every write fails until the oldest tables are vacuumed, in single-user mode if it comes to that"},
			Docs:         docsPath(WraparoundID),
			Verification: model.NotRunBecause("the ages are the catalog's (age(relfrozenxid), mxid_age(relminmxid)), and the rate is two readings of the next transaction id on the server's clock; check --twin runs the fix, VACUUM (FREEZE), on a copy of the table and times it"),
			Experiment:   &model.Experiment{Kind: model.ExpFreeze, Table: model.RelRef{Schema: t.Schema, Name: t.Name}},
		}
		if t.MxidAge > 0 && float64(t.MxidAge) >= wrapOverdue*float64(mxFreezeMax) {
			f.Title += fmt.Sprintf("; its multixacts are %s old", printable.Count(float64(t.MxidAge)))
		}
		why, fix := wrapCause(s, t, holder, eff)
		if why != "" {
			f.Title += "; " + why
		}
		f.Fix = model.Fix{Summary: fix + "; then freeze the table now rather than wait for autovacuum, and watch its progress in pg_stat_progress_vacuum",
			SQL: fmt.Sprintf("VACUUM (FREEZE, VERBOSE) %s;", name)}
		if holder != nil && holder.XminAge >= eff {
			f.Fix.SQL = horizonFix(s, *holder).SQL + "\n" + f.Fix.SQL
		}
		nameRaisedAge(&f, freezeMax, t.FreezeMaxAge, name, t.FrozenAge)
		out = append(out, f)
	}
	for _, d := range s.Databases {
		if sev, days, bad := judge(d.FrozenAge, d.MxidAge, 0); bad {
			out = append(out, databaseWrapFinding(s, d, sev, days, freezeMax, rate))
		}
	}
	var skips []model.Skip
	if f := memberSpace(s, mxFreezeMax); f != nil {
		out = append(out, *f)
	} else if sk, ok := s.Missing[model.SrcMembers]; ok {
		skips = append(skips, model.Skip{Rule: WraparoundID, Reason: "the multixact member space was not judged: " + sk.Reason, Fix: sk.Fix})
	}
	Sort(out)
	return out, skips
}

// databaseWrapFinding is wraparound for one database of the server, this
// one too: the limit is the server's, and a database's age
// (datfrozenxid) moves only once every relation in it is frozen, its
// system catalogs included. Those grow as old as the tables named apart
// (the same held horizon, the same raised freeze age), so freezing the
// named tables alone leaves this one's age where it was.
func databaseWrapFinding(s *model.Snapshot, d model.DatabaseAge, sev model.Severity, days float64, freezeMax int64, rate float64) model.Finding {
	title := fmt.Sprintf("database %s has rows %s transactions old that VACUUM has not frozen (its datfrozenxid): the server's wraparound limit counts every database", d.Name, printable.Count(float64(d.FrozenAge)))
	if d.Name == s.Database {
		title = fmt.Sprintf("database %s, the one checked, has rows %s transactions old that VACUUM has not frozen (its datfrozenxid): it moves only once every relation is frozen, the system catalogs included, not only the tables named apart", d.Name, printable.Count(float64(d.FrozenAge)))
	}
	f := model.Finding{Rule: WraparoundID, Severity: sev,
		Title:        title,
		Object:       model.Object{Kind: "database", Name: d.Name},
		Evidence:     wrapEvidence(d.FrozenAge, d.MxidAge, freezeMax, rate, days),
		Impact:       model.Impact{Summary: "at about 2.1 billion transactions the server stops assigning transaction ids, in every database"},
		Fix:          databaseFreezeFix(d, freezeMax, d.Name == s.Database),
		Docs:         docsPath(WraparoundID),
		Verification: model.NotRunBecause("nothing to run: the ages are the catalog's (pg_database.datfrozenxid), and the rate is two readings of the next transaction id"),
	}
	nameRaisedAge(&f, freezeMax, 0, "", d.FrozenAge)
	return f
}

func wrapEvidence(xidAge, mxAge, eff int64, rate, days float64) []model.Evidence {
	evs := []model.Evidence{
		ev("age of its oldest unfrozen transaction id", float64(xidAge), "transactions"),
		ev("age at which an anti-wraparound vacuum starts (autovacuum_freeze_max_age)", float64(eff), "transactions"),
		ev("transactions left before the server stops assigning them", float64(wrapStop-xidAge), ""),
		ev("age of its oldest multixact", float64(mxAge), "multixacts"),
	}
	if rate > 0 {
		evs = append(evs, ev("transaction ids consumed per second (measured across the sample)", rate, "/s"),
			ev("days left at that rate", days, "days"))
	}
	return evs
}

// oldestHolder is the oldest holder of this database's xmin horizon, or
// nil: freezing cannot pass it.
func oldestHolder(s *model.Snapshot) *model.XminHolder {
	var best *model.XminHolder
	for i, h := range s.Holders {
		if h.HoldsDatabase(s.Database) && (best == nil || h.XminAge > best.XminAge) {
			best = &s.Holders[i]
		}
	}
	return best
}

// wrapCause says what keeps a table's freezing from advancing, and the
// fix for it.
func wrapCause(s *model.Snapshot, t model.Table, h *model.XminHolder, eff int64) (why, fix string) {
	var parts []string
	fix = "let the anti-wraparound vacuum finish"
	if h != nil && h.XminAge >= eff {
		parts = append(parts, fmt.Sprintf("%s %s has held its snapshot for %s transactions, and VACUUM cannot freeze rows newer than it", holderWord(h.Kind), h.Name, printable.Count(float64(h.XminAge))))
		fix = fmt.Sprintf("release the %s %s first (the statement below; xmin-horizon says what it costs)", holderWord(h.Kind), h.Name)
	}
	if !t.AutovacuumEnabled {
		parts = append(parts, "autovacuum is off for this table (anti-wraparound vacuums still run, late and all at once)")
		if h == nil || h.XminAge < eff {
			fix = "turn autovacuum back on for the table (ALTER TABLE ... RESET (autovacuum_enabled))"
		}
	}
	if t.LastVacuum == nil {
		parts = append(parts, "no VACUUM of it is on record since the statistics were reset")
	}
	return strings.Join(parts, "; "), fix
}

func holderWord(kind string) string {
	switch kind {
	case model.HolderPrepared:
		return "prepared transaction"
	case model.HolderSlot:
		return "replication slot"
	case model.HolderStandby:
		return "standby"
	}
	return "session"
}

// databaseFreezeFix freezes a database's tables from a shell. Its
// --min-xid-age must be below the ages it is meant to bring down:
// vacuumdb skips every table younger than it, so the server's own
// autovacuum_freeze_max_age (up to 2 billion) can select nothing. The
// default freeze age (200 million), or the server's when lower, freezes
// every table that holds the database's age up. A database that accepts
// no connections (template0) cannot be reached by vacuumdb: connections
// are allowed for the freeze and refused again after it.
func databaseFreezeFix(d model.DatabaseAge, freezeMax int64, checked bool) model.Fix {
	minAge := min(freezeMax, defaultFreezeMax)
	db := sqlparse.QuoteIdent(d.Name)
	vacuum := fmt.Sprintf("vacuumdb --freeze --min-xid-age=%d --dbname=%s --verbose", minAge, db)
	if !d.AllowConn {
		return model.Fix{Summary: fmt.Sprintf("%s accepts no connections, so neither pgmedic nor vacuumdb reaches it, and autovacuum freezes it only past autovacuum_freeze_max_age: allow connections for the freeze and refuse them again after it", d.Name),
			SQL: fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS true;\n-- from a shell:\n%s\nALTER DATABASE %s WITH ALLOW_CONNECTIONS false;", db, vacuum, db)}
	}
	if checked {
		return model.Fix{Summary: fmt.Sprintf("once what holds the tables named apart back is gone, freeze every relation of %s older than %s transactions (the system catalogs too) with vacuumdb, oldest first", d.Name, printable.Count(float64(minAge))),
			SQL: "-- from a shell:\n" + vacuum}
	}
	return model.Fix{Summary: fmt.Sprintf("run pgmedic check on %s to name its oldest tables and what holds them back; freeze every table older than %s transactions with vacuumdb, oldest first", d.Name, printable.Count(float64(minAge))),
		SQL: "-- from a shell:\n" + vacuum}
}

// nameRaisedAge adds to a finding the raised freeze age that let its age
// (past the default freeze age) grow, and the statement that puts it back.
func nameRaisedAge(f *model.Finding, server, own int64, table string, age int64) {
	raised, sql := raisedFreezeAge(server, own, table)
	if raised == "" || age <= defaultFreezeMax {
		return
	}
	f.Title += "; " + raised
	f.Fix.Summary += "; and put the freeze age back, so that autovacuum freezes before the ages come this close"
	f.Fix.SQL += "\n" + sql
}

// raisedFreezeAge names a freeze age raised past PostgreSQL's default:
// autovacuum does not start an anti-wraparound vacuum of a table before
// its age passes autovacuum_freeze_max_age (or the table's own), so a
// server set to 2 billion lets every age grow to the limit unchecked. The
// fix sets it back (the server's needs a restart: it is read at start).
// table is the quoted table whose own setting raised it, "" for the
// server's.
func raisedFreezeAge(server, own int64, table string) (why, sql string) {
	switch {
	case own > defaultFreezeMax && table != "":
		return fmt.Sprintf("its own autovacuum_freeze_max_age = %s lets it wait that long (the default is %s)", printable.Count(float64(own)), printable.Count(defaultFreezeMax)),
			fmt.Sprintf("ALTER TABLE %s RESET (autovacuum_freeze_max_age);", table)
	case server > defaultFreezeMax && own <= 0:
		return fmt.Sprintf("autovacuum_freeze_max_age = %s lets the ages grow that far before autovacuum freezes anything (the default is %s)", printable.Count(float64(server)), printable.Count(defaultFreezeMax)),
			fmt.Sprintf("ALTER SYSTEM SET autovacuum_freeze_max_age = %d;  -- read at server start: takes effect at the next restart", int64(defaultFreezeMax))
	}
	return "", ""
}
