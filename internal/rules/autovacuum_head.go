package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
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
