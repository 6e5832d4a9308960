package rules

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// SubtransactionOverflowID is the stable id of the rule.
const SubtransactionOverflowID = "subtransaction-overflow"

// Every SAVEPOINT that writes (an ORM's nested transaction block, a
// PL/pgSQL block with an EXCEPTION clause) is a subtransaction with an id
// of its own. A backend lists up to 64 of them for other sessions'
// snapshots; past that its cache "overflows", and every snapshot taken
// while it runs (on a standby: while any transaction since the
// snapshot's xmin overflowed) is marked suboverflowed. Such a snapshot
// cannot tell a running subtransaction from a finished one by the lists,
// so each row version it checks whose transaction is newer than its xmin
// is looked up in pg_subtrans, a small SLRU (32 pages of buffers before
// 17) behind one lock. One long transaction keeps xmin old, so every
// recent row needs a lookup; once the ids span more pages than the
// buffers hold, the lookups read pages in under that lock and every
// session queues on it (SubtransSLRU, SubtransBuffer).
const (
	// subtransLookupsWarn: pg_subtrans lookups a second across the
	// sample. A server whose snapshots never overflow makes a few
	// thousand at most (a prototype of the lab's service at 10 savepoints
	// a transaction: 1,200 to 2,000); at 70 with a long transaction open,
	// 150,000 and more on two cores.
	subtransLookupsWarn = 20000.0
	// subtransReadsCritical: pages read in a second, lookups the buffers
	// missed: the point where GitLab's replicas fell over.
	subtransReadsCritical = 100.0
	// subtransWaitShare: SubtransSLRU/SubtransBuffer waits as a share of
	// the active session-samples that make it critical.
	subtransWaitShare = 0.1
	// subtransMinWaits: waits that make a finding whatever the lookups.
	subtransMinWaits = 3
)

// subtransWait says b waits for pg_subtrans: its SLRU's lock or a buffer
// being read in (SubtransControlLock before 13).
func subtransWait(b model.Backend) bool {
	return b.WaitType == "LWLock" && strings.HasPrefix(strings.ToLower(b.Wait), "subtrans")
}

// subtransactionOverflow finds snapshots made to look rows up in
// pg_subtrans: the lookup rate across the sample, the sessions waiting
// on it, and what causes it (the sessions past 64 subtransactions, the
// statements that take savepoints, the oldest transaction).
func subtransactionOverflow(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if ok, skip := sampled(s, SubtransactionOverflowID); !ok {
		return nil, skip
	}
	t := s.Subtrans
	rate, reads := t.LookupRate(), t.ReadRate()
	active, waiting, worst := 0, 0, 0
	for _, smp := range s.Sampling.Samples {
		n := 0
		for _, b := range smp.Backends {
			if b.State == "active" {
				active++
			}
			if subtransWait(b) {
				waiting++
				n++
			}
		}
		worst = max(worst, n)
	}
	share := 0.0
	if active > 0 {
		share = float64(waiting) / float64(active)
	}
	var title string
	over := overflowedSessions(s)
	switch long, standbys := over.longest(), streamingStandbys(s); {
	case rate >= subtransLookupsWarn:
		title = fmt.Sprintf("snapshots looked rows up in pg_subtrans %s times a second: a transaction past 64 subtransactions (savepoints, PL/pgSQL EXCEPTION blocks) made them overflow", printable.Count(rate))
	case waiting >= subtransMinWaits:
		title = fmt.Sprintf("sessions waited on pg_subtrans (SubtransSLRU, SubtransBuffer) for %s of the sampled session time", pct(share))
	case standbys > 0 && long != nil && long.XactMS >= subtransLongMS:
		// The primary's readers may be few; its standbys' are not. A
		// standby's snapshot stays suboverflowed while its xmin is at or
		// before the last transaction it saw overflow: for as long as
		// that transaction runs, or as long as an older one does.
		title = fmt.Sprintf("pid %d%s has a transaction past 64 subtransactions open for %s on a primary with %d streaming standby(s): every standby snapshot taken meanwhile looks each newer row up in pg_subtrans",
			long.PID, appSuffix(long.App), sec(long.XactMS), standbys)
	case standbys > 0 && long != nil && heldLong(s):
		h, _ := oldestSession(s)
		title = fmt.Sprintf("transactions past 64 subtransactions (%s) while pid %d%s has held a transaction open for %s, on a primary with %d streaming standby(s): the standbys' snapshots overflow for as long as it runs",
			sessionsWord(len(over.pids)), h.PID, appSuffix(h.App), h.HeldFor(s.CollectedAt).Round(time.Second), standbys)
	default:
		return nil, nil
	}
	sev := model.Warning
	if reads >= subtransReadsCritical || share >= subtransWaitShare && waiting >= subtransMinWaits {
		sev = model.Critical
	}
	f := model.Finding{
		Rule: SubtransactionOverflowID, Severity: sev, Title: title,
		Object: model.Object{Kind: "database", Name: s.Database, Database: s.Database},
		Evidence: []model.Evidence{
			ev("pg_subtrans lookups a second across the sample (pg_stat_slru)", math.Round(rate), ""),
			ev("pg_subtrans pages read in a second: lookups its buffers missed", math.Round(reads), ""),
			ev("session-samples waiting on SubtransSLRU or SubtransBuffer", float64(waiting), ""),
			ev("session-samples active", float64(active), ""),
		},
		Impact:     model.Impact{Share: math.Min(share, 1), Summary: subtransImpact(s, worst)},
		Fix:        subtransFix(s),
		Docs:       docsPath(SubtransactionOverflowID),
		Experiment: &model.Experiment{Kind: model.ExpSubtransReads},
	}
	f.Evidence = append(f.Evidence, subtransCauses(s, over)...)
	return []model.Finding{f}, nil
}

// subtransImpact says what the lookups cost and what check could not see.
func subtransImpact(s *model.Snapshot, worst int) string {
	var b strings.Builder
	b.WriteString("every read of rows written since the oldest snapshot's transaction began costs a pg_subtrans lookup per row version, under one lock shared by the whole server")
	if worst > 0 {
		fmt.Fprintf(&b, "; at the worst moment %s waited on it", sessionsWord(worst))
	}
	if n := streamingStandbys(s); n > 0 {
		fmt.Fprintf(&b, "; this primary streams to %d standby(s), whose snapshots stay overflowed for as long as the oldest transaction here runs: their readers pay more than this server's (check a standby to measure it)", n)
	}
	if s.Replication != nil && s.Replication.InRecovery {
		b.WriteString("; this is a standby: the transactions that overflow and the long one run on the primary, so check the primary to name them (a standby's snapshots overflow for as long as any transaction since their xmin did, which is why standbys suffer first)")
	}
	if s.Sampling.Hidden != "" {
		b.WriteString("; the sessions of other roles were hidden, and one of them may be the cause: " + s.Sampling.Hidden)
	}
	return b.String()
}

// subtransCauses are the facts that name the cause: the sessions seen
// past 64 subtransactions (16 and later), the statements that take
// savepoints, and the oldest open transaction.
func subtransCauses(s *model.Snapshot, over overflowed) []model.Evidence {
	var out []model.Evidence
	if pgversion.Of(s.Server.VersionNum).BackendSubxact {
		out = append(out, ev("session-samples past 64 subtransactions (pg_stat_get_backend_subxact)", float64(over.samples), ""),
			ev("sessions seen past 64 subtransactions", float64(len(over.pids)), ""))
		for i, pid := range over.pids {
			if i == 3 {
				break
			}
			o := over.last[pid]
			out = append(out, model.Evidence{Fact: true, Value: float64(o.PID),
				Label: fmt.Sprintf("past 64 subtransactions: pid %d%s, its transaction open %s: %s", o.PID, appSuffix(o.App), sec(max(o.XactMS, 0)), printable.Shorten(s.Shown(o.Query), 80))})
		}
	}
	calls, names := savepointCalls(s)
	if calls > 0 {
		out = append(out, ev("SAVEPOINT statements run (pg_stat_statements, since its reset)", float64(calls), ""))
		if len(names) > 0 {
			out = append(out, model.Evidence{Fact: true, Value: float64(len(names)), Label: "savepoint names: " + strings.Join(names, ", ")})
		}
	}
	// On a standby the sessions' xmins are their own snapshots, held back
	// by the primary's transactions: the oldest is a victim, not the cause.
	standby := s.Replication != nil && s.Replication.InRecovery
	if h, ok := oldestSession(s); ok && !standby {
		label := fmt.Sprintf("the oldest open transaction, whose start every snapshot's xmin stays behind: pid %d%s, %s transactions ago", h.PID, appSuffix(h.App), printable.Count(float64(h.XminAge)))
		if d := h.HeldFor(s.CollectedAt); d > 0 {
			label += ", open " + d.Round(time.Second).String()
		}
		out = append(out, model.Evidence{Fact: true, Value: float64(h.XminAge), Label: label})
	}
	return out
}

// subtransLongMS: a transaction past 64 subtransactions open this long
// keeps a standby's snapshots overflowed long enough to matter; and
// subtransHeldS: a transaction open this long keeps a standby's xmin
// behind every overflow since it began.
const (
	subtransLongMS = 1000
	subtransHeldS  = 10
)

// overflowed are the sessions the sampler saw past 64 subtransactions:
// their pids in the order first seen, each as last seen, and how many
// session-samples showed one.
type overflowed struct {
	pids    []int
	last    map[int]model.Backend
	samples int
}

func overflowedSessions(s *model.Snapshot) overflowed {
	o := overflowed{last: map[int]model.Backend{}}
	if s.Sampling == nil {
		return o
	}
	for _, smp := range s.Sampling.Samples {
		for _, b := range smp.Backends {
			if !b.Overflowed {
				continue
			}
			o.samples++
			if _, seen := o.last[b.PID]; !seen {
				o.pids = append(o.pids, b.PID)
			}
			o.last[b.PID] = b
		}
	}
	return o
}

// longest is the session seen past 64 whose transaction was open
// longest; nil when none was seen.
func (o overflowed) longest() *model.Backend {
	var best *model.Backend
	for _, pid := range o.pids {
		if b := o.last[pid]; best == nil || b.XactMS > best.XactMS {
			best = &b
		}
	}
	return best
}

// heldLong says a client transaction of this database has been open
// subtransHeldS or more.
func heldLong(s *model.Snapshot) bool {
	h, ok := oldestSession(s)
	return ok && h.HeldFor(s.CollectedAt) >= subtransHeldS*time.Second
}

// streamingStandbys counts the standbys streaming from this server at
// its last look.
func streamingStandbys(s *model.Snapshot) int {
	r := s.Replication
	if r == nil || r.InRecovery || len(r.Readings) == 0 {
		return 0
	}
	n := 0
	for _, st := range r.Readings[len(r.Readings)-1].Standbys {
		if st.State == "streaming" {
			n++
		}
	}
	return n
}

func appSuffix(app string) string {
	if app == "" {
		return ""
	}
	return " (application " + app + ")"
}

// oldestSession is the client transaction holding the oldest xmin or xid
// in this database: what keeps snapshots' xmin, and so the range of
// transactions looked up, old.
func oldestSession(s *model.Snapshot) (model.XminHolder, bool) {
	var best model.XminHolder
	found := false
	for _, h := range s.Holders {
		if h.Kind != model.HolderSession || !h.HoldsDatabase(s.Database) {
			continue
		}
		if !found || h.XminAge > best.XminAge {
			best, found = h, true
		}
	}
	return best, found
}

// savepointStmt is a SAVEPOINT statement as pg_stat_statements keeps it:
// by its text before 16 (one entry per savepoint name), with the name as
// a parameter from 16.
var savepointStmt = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^\s*savepoint\s+("[^"]+"|[^\s;]+)`) })

// savepointCalls sums the calls of the SAVEPOINT statements and names up
// to three of their savepoints.
func savepointCalls(s *model.Snapshot) (int64, []string) {
	var calls int64
	var names []string
	for _, st := range s.Statements {
		m := savepointStmt().FindStringSubmatch(st.Query)
		if m == nil {
			continue
		}
		calls += st.Calls
		if n := printable.Shorten(m[1], 40); !strings.HasPrefix(n, "$") && !slices.Contains(names, n) && len(names) < 3 {
			names = append(names, n)
		}
	}
	return calls, names
}

// subtransFix keeps transactions under 64 subtransactions, ends the long
// transaction and bounds the next one, and from 17 gives pg_subtrans more
// buffers while the code changes.
func subtransFix(s *model.Snapshot) model.Fix {
	db := sqlparse.QuoteIdent(s.Database)
	sql := fmt.Sprintf(`-- 1. In the application: keep each transaction under 64 subtransactions.
--    A nested transaction block of the ORM (Django atomic(), SQLAlchemy begin_nested(),
--    Rails requires_new, psycopg's nested conn.transaction()) and a PL/pgSQL block with
--    EXCEPTION take one each time they write, and RELEASE does not give it back:
--    take the savepoints out of loops and hot paths, or write the loop's rows in one statement.
-- 2. End the long transaction named in the evidence once its owner agrees, and bound the next:
-- SELECT pg_terminate_backend(<pid>);
ALTER DATABASE %s SET idle_in_transaction_session_timeout = '5min';`, db)
	summary := "keep each transaction under 64 subtransactions (no savepoints in loops or hot paths), and end long transactions, so snapshots stop overflowing and the lookups stop"
	if h := pgversion.Of(s.Server.VersionNum); h.SubtransBuffers {
		sql += `
-- 3. While the code changes: more pg_subtrans buffers (8 MB; a restart):
ALTER SYSTEM SET subtransaction_buffers = 1024;`
		summary += "; subtransaction_buffers gives the lookups more room meanwhile"
	}
	return model.Fix{Summary: summary, SQL: sql}
}
