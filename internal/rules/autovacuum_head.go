package rules

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// avHead is an autovacuum worker at the head of a lock queue, as the
// sampler saw it among a waiting session's blockers (Backend.Autovacuum).
// The sampler lists client sessions only, so without it such a chain's
// head would be "not visible".
type avHead struct {
	PID        int
	Table      string
	Wraparound bool
	Phase      string
}

// autovacuumHead reads the worker a session waits for, if any.
func autovacuumHead(b model.Backend) (avHead, bool) {
	pid, rest, ok := strings.Cut(b.Autovacuum, " ")
	if !ok {
		return avHead{}, false
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return avHead{}, false
	}
	h := avHead{PID: n}
	if i := strings.LastIndex(rest, " ["); i >= 0 && strings.HasSuffix(rest, "]") {
		h.Phase = rest[i+2 : len(rest)-1]
		rest = rest[:i]
	}
	h.Table, _, h.Wraparound = model.ParseAutovacuumQuery(rest)
	return h, true
}

// truncating: VACUUM gives the empty pages at the table's end back to the
// file system, under ACCESS EXCLUSIVE, which no read gets past.
func (h avHead) truncating() bool { return h.Phase == "truncating heap" }

// lockMode is the lock the worker holds on its table, in LOCK TABLE's
// words: SHARE UPDATE EXCLUSIVE while it vacuums, ACCESS EXCLUSIVE while
// it truncates.
func (h avHead) lockMode() string {
	if h.truncating() {
		return "ACCESS EXCLUSIVE"
	}
	return "SHARE UPDATE EXCLUSIVE"
}

// String names the worker the way a DBA would look it up.
func (h avHead) String() string {
	what := "an autovacuum of " + h.Table
	switch {
	case h.Wraparound:
		what = "an autovacuum to prevent wraparound of " + h.Table + ", which does not give way to a lock request as an ordinary one does"
	case h.truncating():
		what = "an autovacuum truncating the empty end of " + h.Table + " under ACCESS EXCLUSIVE"
	}
	if h.Phase != "" {
		return fmt.Sprintf("%s (pid %d, %s)", what, h.PID, h.Phase)
	}
	return fmt.Sprintf("%s (pid %d)", what, h.PID)
}

// wraparoundAdvice is what to add to a schema change's fix when an
// autovacuum to prevent wraparound holds it up: cancelling it only
// starts it again, so the change waits its turn under a lock_timeout and
// the table is frozen ahead of the next one.
func (h avHead) wraparoundAdvice() (summary, sql string) {
	summary = "it waits for " + h.String() + ": cancelling that autovacuum only starts it again, so retry the change under lock_timeout until the run ends, and freeze the table at a quiet hour so that runs to prevent wraparound are rare and short (watch age(relfrozenxid) against autovacuum_freeze_max_age)"
	sql = fmt.Sprintf("-- at a quiet hour, before the next run to prevent wraparound:\nVACUUM (FREEZE, VERBOSE) %s;\n-- how close each table is:\nSELECT c.oid::regclass, age(c.relfrozenxid), current_setting('autovacuum_freeze_max_age') FROM pg_class c WHERE c.relkind IN ('r', 'm', 't') ORDER BY 2 DESC LIMIT 10;", h.Table)
	return summary, sql
}

// truncateFix stops VACUUM from truncating the table's end, which a busy
// table pays for with a stall of every session at each truncation; the
// empty pages stay in the file and are reused by later inserts.
func (h avHead) truncateFix() model.Fix {
	return model.Fix{
		Summary: "stop VACUUM from truncating this table: its empty end stays in the file for later rows to reuse, and no autovacuum takes ACCESS EXCLUSIVE on it again (a manual VACUUM (TRUNCATE) at a quiet hour gives the space back when it matters)",
		SQL:     fmt.Sprintf("ALTER TABLE %s SET (vacuum_truncate = false);\n-- at a quiet hour, when the space matters:\n-- VACUUM (TRUNCATE) %s;", h.Table, h.Table),
	}
}

// headOfWaiters is the autovacuum worker that most of a sample's waiting
// sessions wait for, if one does.
func headOfWaiters(smp model.ActivitySample) (avHead, int) {
	count := map[int]int{}
	heads := map[int]avHead{}
	for _, b := range smp.Backends {
		if h, ok := autovacuumHead(b); ok {
			count[h.PID]++
			heads[h.PID] = h
		}
	}
	best, n := avHead{}, 0
	for pid, c := range count {
		if c > n || (c == n && pid < best.PID) {
			best, n = heads[pid], c
		}
	}
	return best, n
}

// truncateMinWaits is how many session-samples must be seen waiting behind
// an autovacuum truncating one table. No share of the sampled time is
// asked for: the worker gives its lock up about 20 ms after a session
// queues for it (VACUUM_TRUNCATE_LOCK_CHECK_INTERVAL) and takes it again
// for the next stretch of the empty end, so each stall is short and a
// sampler sees only some of them, however often they hurt the clients.
const truncateMinWaits = 2

// truncationStalls are sessions seen queued behind an autovacuum that
// truncates the empty end of a table, or, where the sampler caught none,
// the truncations the server log counted on a table the sampled sessions
// were using: on a busy table every read and write of it stops for the
// length of each stretch, again and again until the end is gone, and
// again after the next retention delete. A stretch lasts tens of
// milliseconds on a table of megabytes, shorter than the sampler's tick;
// the log's count is what says it keeps happening. The table with the
// most waits (then the most truncations) is reported.
func truncationStalls(s *model.Snapshot) (model.Finding, bool) {
	by := map[string]*truncated{}
	at := func(table string) *truncated {
		x := by[table]
		if x == nil {
			x = &truncated{table: table}
			by[table] = x
		}
		return x
	}
	for _, smp := range s.Sampling.Samples {
		per := map[string]int{}
		for _, b := range smp.Backends {
			if b.Database != s.Database || b.WaitType != "Lock" {
				continue
			}
			h, ok := autovacuumHead(b)
			if !ok || !h.truncating() {
				continue
			}
			x := at(h.Table)
			x.head, x.waits, x.query = &h, x.waits+1, b.Query
			per[h.Table]++
		}
		for t, n := range per {
			by[t].samples++
			by[t].worst = max(by[t].worst, n)
		}
	}
	if s.Logged != nil {
		for _, t := range s.Logged.Tables {
			// The log names a table database.schema.table.
			// A table set vacuum_truncate = false since has the fix: the
			// log's truncations are its past.
			if name, ok := strings.CutPrefix(t.Table, s.Database+"."); ok && t.Truncations > 0 && !keepsEmptyEnd(s, name) {
				x := at(name)
				x.logged, x.pages = t.Truncations, t.PagesRemoved
			}
		}
	}
	var top *truncated
	for _, t := range slices.Sorted(maps.Keys(by)) {
		x := by[t]
		if x.waits < truncateMinWaits {
			if x.logged < truncateMinLogged {
				continue
			}
			if x.used, x.query = sessionsUsing(s, t); x.used < lockMinSamples {
				continue
			}
		}
		if top == nil || x.waits > top.waits || x.waits == top.waits && x.logged > top.logged {
			top = x
		}
	}
	if top == nil {
		return model.Finding{}, false
	}
	return top.finding(s), true
}

// truncateMinLogged is how many truncations of one table the log must
// count, when the sampler caught no wait behind one: one is a retention
// delete's aftermath, two is a pattern.
const truncateMinLogged = 2

// truncated is what was seen of one table's truncations: waits behind the
// autovacuum doing it (head, from the waiters' rows), the runs the log
// says gave pages back, and the sampled sessions that used the table.
type truncated struct {
	table                 string
	head                  *avHead
	waits, samples, worst int
	logged, pages         int64
	used                  int
	query                 string
}

func (x *truncated) finding(s *model.Snapshot) model.Finding {
	busy, _, _, _ := countLockWaits(s)
	share := float64(x.waits) / float64(max(busy, 1))
	sev := model.Warning
	if share >= 0.5 {
		sev = model.Critical
	}
	h := avHead{Table: x.table, Phase: "truncating heap"}
	var title string
	var evidence []model.Evidence
	if x.waits > 0 {
		h = *x.head
		title = fmt.Sprintf("sessions queued behind an autovacuum truncating the empty end of %s under ACCESS EXCLUSIVE: %d session-samples waited, in %d of %d samples, up to %s at once",
			x.table, x.waits, x.samples, len(s.Sampling.Samples), sessionsWord(x.worst))
		evidence = []model.Evidence{
			ev("session-samples waiting behind the truncation", float64(x.waits), ""),
			ev("samples that saw the truncation hold sessions up", float64(x.samples), ""),
			ev("sessions waiting at the worst moment", float64(x.worst), ""),
			ev("session-samples active or in a transaction", float64(busy), "")}
	} else {
		title = fmt.Sprintf("autovacuum truncated the empty end of %s %d times in the server log (%s pages), each time under ACCESS EXCLUSIVE on a table the sampled sessions were using (%d session-samples ran or had just run a statement on it); the sampler caught no stall, as each is shorter than its tick",
			x.table, x.logged, count(float64(x.pages)), x.used)
		evidence = []model.Evidence{ev("session-samples running a statement on the table, or idle under a second after one", float64(x.used), "")}
	}
	if x.logged > 0 {
		evidence = append(evidence, ev("autovacuum runs that truncated it (server log)", float64(x.logged), ""),
			ev("pages they gave back", float64(x.pages), ""))
	}
	if x.query != "" {
		evidence = append(evidence, model.Evidence{Label: "a statement that waits for it: " + printable.Shorten(s.Shown(x.query), 100), Value: 1, Fact: true})
	}
	schema, name, ok := strings.Cut(x.table, ".")
	if !ok {
		schema, name = "", x.table
	}
	return model.Finding{
		Rule: LockContentionID, Severity: sev, Title: title,
		Object:   model.Object{Kind: "table", Name: x.table, Database: s.Database},
		Evidence: evidence,
		Impact: model.Impact{Summary: "each stretch of the truncation stops every read and write of " + x.table + " until the worker lets go; the worker takes the lock again for the next stretch, and again after the next delete empties the end",
			Share: math.Min(share, 1)},
		Fix:          h.truncateFix(),
		Experiment:   &model.Experiment{Kind: model.ExpTruncateWaits, Table: model.RelRef{Schema: schema, Name: name}, Waiter: x.query, Clients: x.worst},
		Verification: model.NotRunBecause("observed while sampling; check --twin times reads against a VACUUM that truncates and one that does not"),
		Docs:         docsPath(LockContentionID),
	}
}

// sessionsUsing counts the session-samples whose statement names table
// (schema.table, or the table alone): running it, or idle less than a
// second after it (an application's short reads are mostly between
// statements when a sampler looks), and returns one of them.
func sessionsUsing(s *model.Snapshot, table string) (int, string) {
	_, bare, _ := strings.Cut(table, ".")
	n, query := 0, ""
	for _, smp := range s.Sampling.Samples {
		for _, b := range smp.Backends {
			if b.Database != s.Database || b.State != "active" && (b.State != "idle" || b.StateMS >= 1000) {
				continue
			}
			if names(b.Query, table) || bare != "" && names(b.Query, bare) {
				n++
				query = b.Query
			}
		}
	}
	return n, query
}

// names says whether a statement's text holds name as a word of its own.
func names(query, name string) bool {
	q, name := strings.ToLower(query), strings.ToLower(name)
	for i := 0; ; {
		j := strings.Index(q[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || !identChar(q[j-1])) && (end == len(q) || !identChar(q[end])) {
			return true
		}
		i = j + 1
	}
}

func identChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '$' || c >= 0x80
}

// keepsEmptyEnd says the snapshot's table schema.table is set
// vacuum_truncate = false.
func keepsEmptyEnd(s *model.Snapshot, table string) bool {
	schema, name, _ := strings.Cut(table, ".")
	t := s.Table(model.RelRef{Schema: schema, Name: name})
	return t != nil && t.KeepsEmptyEnd
}
