package rules

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// The multixact member space is the third of the server's wraparound
// limits, beside transaction ids and multixact ids, and wraparound owns
// it for that reason: the same refused writes at the end, the same fix
// (freeze the tables holding the oldest multixacts). It runs out on its
// own schedule. autovacuum_multixact_freeze_max_age counts multixact ids,
// and a multixact of n lockers takes n member entries, so a workload of
// many concurrent lockers of the same rows (foreign-key checks of
// children inserted at once under one parent) fills the space while the
// ids' ages look harmless. PostgreSQL forces anti-wraparound vacuums once
// half the space is used (MULTIXACT_MEMBER_SAFE_THRESHOLD), vacuums every
// table holding multixacts at three quarters, and refuses new multixacts
// a couple of segments before the end.
const (
	membersEmergency = 0.5
	membersWarn      = 0.25
	// A rate needs some of the space used before it says anything: a
	// burst seen over a 10 s sample, on a server at 1%, is no forecast.
	membersRateFloor = 0.10
	membersStop      = model.MemberSpace - 2*32*model.MembersOfPage
	// autovacuum_multixact_freeze_max_age below this would have autovacuum
	// vacuuming a busy server's tables without pause.
	membersFreezeFloor = 10_000_000
)

// memberSpace is wraparound's finding for the member space, or nil.
func memberSpace(s *model.Snapshot, mxFreezeMax int64) *model.Finding {
	m := s.Members
	if m == nil || m.Used() <= 0 {
		return nil
	}
	used := float64(m.Used())
	share := used / model.MemberSpace
	rate := m.Rate()
	toHalf, toStop := math.Inf(1), math.Inf(1)
	if rate > 0 {
		toHalf = math.Max(0, model.MemberSpace*membersEmergency-used) / rate / 3600
		toStop = math.Max(0, membersStop-used) / rate / 3600
	}
	forecast := share >= membersRateFloor
	var sev model.Severity
	switch {
	case share >= membersEmergency, forecast && (toHalf < 24 || toStop < 7*24):
		sev = model.Critical
	case share >= membersWarn, forecast && toHalf < 7*24:
		sev = model.Warning
	default:
		return nil
	}
	oldestAge := oldestMultixactAge(s)
	title := fmt.Sprintf("the multixact member space is %.1f%% used (%s of %s member entries)", share*100, printable.Count(used), printable.Count(model.MemberSpace))
	if oldestAge > 0 {
		title += fmt.Sprintf(" while the oldest multixact is only %s multixacts old (autovacuum_multixact_freeze_max_age: %s)", printable.Count(float64(oldestAge)), printable.Count(float64(mxFreezeMax)))
	}
	switch {
	case share >= membersEmergency:
		title += ": PostgreSQL is already forcing anti-wraparound vacuums"
		if rate > 0 {
			title += fmt.Sprintf(", and at %s entries a second it refuses writes that need a multixact in %s", printable.Count(math.Round(rate)), hoursText(toStop))
		}
	case rate > 0:
		title += fmt.Sprintf(": at %s entries a second, emergency vacuums start in %s and writes that need a multixact are refused in %s", printable.Count(math.Round(rate)), hoursText(toHalf), hoursText(toStop))
	}
	evs := []model.Evidence{
		ev("member entries in use (oldest multixact to the next offset at the last checkpoint)", used, ""),
		ev("share of the member space (2^32 entries)", share*100, "%"),
		ev("share at which PostgreSQL forces anti-wraparound vacuums", membersEmergency*100, "%"),
		ev("age of the oldest multixact", float64(oldestAge), "multixacts"),
		{Label: "database holding the oldest multixact: " + m.OldestDatabase, Value: 1, Fact: true},
	}
	if !m.Checkpoint.IsZero() {
		evs = append(evs, model.Evidence{Label: "next offset read at the last checkpoint, " + m.Checkpoint.UTC().Format("2006-01-02 15:04:05 UTC"), Value: 1, Fact: true})
	}
	if oldestAge > 0 {
		evs = append(evs, ev("member entries per multixact, on average", used/float64(oldestAge), ""))
	}
	for _, st := range shareLockers(s, 3) {
		evs = append(evs, ev("calls of a statement that share-locks rows: "+printable.Cut(st.Query, 80), float64(st.Calls), ""))
	}
	if rate > 0 {
		evs = append(evs, ev("member entries consumed per second (pages started across the sample)", rate, "/s"),
			ev("hours to half the space", toHalf, "h"), ev("hours to refused writes", toStop, "h"))
	}
	why := "no copy can hold the member space (a twin's tables carry no multixacts), so nothing is run; "
	if rate > 0 {
		why += fmt.Sprintf("measured instead: %s member entries a second across %.0f s of sample (the member pages the server started, pg_stat_slru), which leaves %s to half the space and %s to refused writes", printable.Count(math.Round(rate)), m.Seconds, hoursText(toHalf), hoursText(toStop))
	} else if m.Seconds > 0 {
		why += fmt.Sprintf("no member page was started across the %.0f s sample: the space is not filling now", m.Seconds)
	} else {
		why += "its rate needs a sample of the sessions (check --sample 10s)"
	}
	return &model.Finding{Rule: WraparoundID, Severity: sev, Title: title,
		Object:       model.Object{Kind: "server", Name: "multixact member space"},
		Evidence:     evs,
		Impact:       model.Impact{Summary: "past half the space PostgreSQL vacuums every table holding old multixacts, whatever their size and the hour; at its end it refuses new multixacts, and foreign-key inserts, SELECT ... FOR SHARE and concurrent row locks fail with multixact \"members\" limit exceeded until those vacuums finish"},
		Fix:          membersFix(s, oldestAge, used, mxFreezeMax),
		Docs:         docsPath(WraparoundID),
		Verification: model.NotRunBecause(why),
	}
}

// oldestMultixactAge is the age of the server's oldest datminmxid: the
// member space is reclaimed only up to it.
func oldestMultixactAge(s *model.Snapshot) int64 {
	var age int64
	for _, d := range s.Databases {
		age = max(age, d.MxidAge)
	}
	return age
}

// membersFix frees the space. A multixact's members are reclaimed once
// no relation of any database refers to it, so the space held is that
// of the oldest datminmxid on the server: template0 and template1
// included, which autovacuum freezes only past
// autovacuum_multixact_freeze_max_age. keep is the multixact age that
// holds a quarter of the space at the members per multixact this server
// has shown: the tables of this database older than it are frozen first,
// then every database's (vacuumdb --all skips those that accept no
// connections: they are let in for it), and the freeze age is lowered to
// keep, unless that is below what a busy server can live with, where the
// writes themselves must take fewer locks.
func membersFix(s *model.Snapshot, oldestAge int64, used float64, mxFreezeMax int64) model.Fix {
	var sql []string
	for _, t := range oldestMultixactTables(s, 3) {
		sql = append(sql, fmt.Sprintf("VACUUM (FREEZE, VERBOSE) %s;", sqlparse.QuoteQualified(t.Schema, t.Name)))
	}
	summary := "freeze the tables holding the oldest multixacts first: their members are reclaimed only once no table of any database refers to them"
	if oldestAge <= 0 {
		return model.Fix{Summary: summary, SQL: strings.Join(sql, "\n")}
	}
	perMulti := used / float64(oldestAge)
	keep := max(int64(model.MemberSpace*membersWarn/perMulti), 1)
	var closed []string
	others := false
	for _, d := range s.Databases {
		if d.MxidAge < keep {
			continue
		}
		if !d.AllowConn {
			closed = append(closed, sqlparse.QuoteIdent(d.Name))
		} else if d.Name != s.Database {
			others = true
		}
	}
	if others || len(closed) > 0 {
		summary += fmt.Sprintf("; then every database's relations with multixacts over %s old (vacuumdb --all", printable.Count(float64(keep)))
		if len(closed) > 0 {
			summary += fmt.Sprintf(", with %s let in for it: it accepts no connections", strings.Join(closed, ", "))
		}
		summary += ")"
		var shell []string
		for _, d := range closed {
			shell = append(shell, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS true;", d))
		}
		shell = append(shell, fmt.Sprintf("-- from a shell:\nvacuumdb --all --freeze --min-mxid-age=%d --verbose", keep))
		for _, d := range closed {
			shell = append(shell, fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS false;", d))
		}
		sql = append(sql, shell...)
	}
	switch age := keep / 1_000_000 * 1_000_000; {
	case age >= mxFreezeMax:
	case age >= membersFreezeFloor:
		summary += fmt.Sprintf("; lower autovacuum_multixact_freeze_max_age to %s so that autovacuum reclaims the space while a quarter of it is used (at %s member entries per multixact)", printable.Count(float64(age)), printable.Count(math.Round(perMulti)))
		sql = append(sql, fmt.Sprintf("ALTER SYSTEM SET autovacuum_multixact_freeze_max_age = %d;  -- read at server start: takes effect at the next restart", age))
	default:
		summary += fmt.Sprintf("; at %s member entries per multixact no freeze age keeps the space under a quarter without vacuuming all the time, so fewer transactions must share-lock the same rows at once: %s", printable.Count(math.Round(perMulti)), fewerLockers)
		return model.Fix{Summary: summary, SQL: strings.Join(sql, "\n")}
	}
	summary += "; and have fewer transactions share-lock the same rows at once: " + fewerLockers
	return model.Fix{Summary: summary, SQL: strings.Join(sql, "\n")}
}

// fewerLockers is how a workload makes fewer multixacts.
const fewerLockers = "a parent's children inserted from one transaction rather than from many at the same moment (each insert's foreign-key check share-locks the parent), and FOR SHARE or FOR KEY SHARE only where the row must not change"

// shareLockRe finds a statement that share-locks the rows it reads.
var shareLockRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\bFOR\s+(KEY\s+)?SHARE\b`) })

// shareLockers are the n most called statements that share-lock rows
// (SELECT ... FOR SHARE, FOR KEY SHARE): each one that meets another
// locker of its row makes a multixact. The foreign-key checks of inserts
// do the same, and are not told apart here.
func shareLockers(s *model.Snapshot, n int) []model.Statement {
	var out []model.Statement
	for _, st := range s.Statements {
		if shareLockRe().MatchString(st.Query) {
			out = append(out, st)
		}
	}
	slices.SortStableFunc(out, func(a, b model.Statement) int { return cmp.Compare(b.Calls, a.Calls) })
	return out[:min(n, len(out))]
}

// oldestMultixactTables are this database's n tables with the oldest
// multixacts.
func oldestMultixactTables(s *model.Snapshot, n int) []model.Table {
	var out []model.Table
	for _, t := range s.Tables {
		if t.MxidAge > 0 {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b model.Table) int { return cmp.Compare(b.MxidAge, a.MxidAge) })
	return out[:min(n, len(out))]
}
