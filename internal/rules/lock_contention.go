package rules

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// LockContentionID is the stable id of the rule.
const LockContentionID = "lock-contention"

// Thresholds of lock-contention (see docs/rules/lock-contention.md).
const (
	lockShareWarn  = 0.2 // lock waits as a share of active session-samples
	lockMinSamples = 3
)

// lockContention finds lock waits that take a large share of the sampled
// session time, and names the session at the head of the blocking chain at
// its worst moment.
func lockContention(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if ok, skip := sampled(s, LockContentionID); !ok {
		return nil, skip
	}
	// Stalls behind a truncation are short and repeated: they are judged
	// by how many were seen, not by their share of the time.
	if f, ok := truncationStalls(s); ok {
		return []model.Finding{f}, nil
	}
	busy, waiting, worst, worstAt := countLockWaits(s)
	if waiting < lockMinSamples || busy == 0 || float64(waiting)/float64(busy) < lockShareWarn {
		return nil, nil
	}
	smp := s.Sampling.Samples[worstAt]
	byPID := map[int]model.Backend{}
	blocks := map[int]int{}
	for _, b := range smp.Backends {
		byPID[b.PID] = b
		for _, p := range b.BlockedBy {
			blocks[p]++
		}
	}
	behind := queuedBehind(smp)
	// The head blocks others and waits for nobody.
	head, headWaiters := model.Backend{}, 0
	for pid, n := range blocks {
		if b, ok := byPID[pid]; ok && len(b.BlockedBy) == 0 && n > headWaiters {
			head, headWaiters = b, n
		}
	}
	share := float64(waiting) / float64(busy)
	sev := model.Warning
	if share >= 0.5 {
		sev = model.Critical
	}
	evidence := []model.Evidence{
		ev("session-samples waiting on a lock", float64(waiting), ""),
		ev("session-samples active or in a transaction", float64(busy), ""),
		ev("sessions waiting at the worst moment", float64(worst), ""),
		ev("sessions the head blocked directly", float64(headWaiters), ""),
	}
	if f, ok := ddlQueue(s, smp, byPID, behind); ok {
		f.Severity, f.Evidence = sev, append(evidence, f.Evidence...)
		f.Impact.Share = math.Min(share, 1)
		return []model.Finding{f}, nil
	}
	title := fmt.Sprintf("lock waits took %s of the sampled session time; at the worst moment %s waited", pct(share), sessionsWord(worst))
	headText := "the head of the chain was not visible (another database, or a role pgmedic may not see)"
	if headWaiters > 0 {
		headText = fmt.Sprintf("%s, %s for %s, running %q", who(head), head.State, sec(head.StateMS), printable.Shorten(s.Shown(head.Query), 100))
		title += fmt.Sprintf(" behind %s (%s)", who(head), head.State)
	}
	fix := model.Fix{Summary: chainFix(smp),
		SQL: fmt.Sprintf("-- the head of the chain, if it must go:\nSELECT pg_cancel_backend(%d); -- or pg_terminate_backend(%d)", head.PID, head.PID)}
	// A head no session list shows may be an autovacuum worker, which
	// the waiters' own rows name.
	var avAtHead *avHead
	if av, n := headOfWaiters(smp); headWaiters == 0 && n > 0 {
		avAtHead = &av
		headText = av.String()
		title += " behind " + av.String()
		if av.truncating() {
			fix = av.truncateFix()
		}
	}
	f := model.Finding{
		Rule: LockContentionID, Severity: sev, Title: title,
		Object:       model.Object{Kind: "database", Name: s.Database, Database: s.Database},
		Evidence:     evidence,
		Impact:       model.Impact{Summary: "the head of the chain: " + headText, Share: math.Min(share, 1)},
		Fix:          fix,
		Verification: model.NotRunBecause("observed while sampling; the head of the chain was running a statement, not idle: shortening its transaction is a change to the application, and no reproduction stands in for it"),
		Docs:         docsPath(LockContentionID),
	}
	whoseChain(s, &f, head, headWaiters, avAtHead, blocks, behind[head.PID], byPID)
	return []model.Finding{f}, nil
}

// whoseChain says whose problem a chain is by its head: a prepared
// transaction (ended only by COMMIT or ROLLBACK PREPARED), none visible,
// workers claiming one queue row (queue-claim-race's), a transaction its
// client left idle (idle-in-transaction's), or an idle head whose waiters
// can be replayed on a twin (held-lock's experiment). behind are the
// sessions queued behind the head; av, when set, the autovacuum worker at
// a head no session list shows.
func whoseChain(s *model.Snapshot, f *model.Finding, head model.Backend, headWaiters int, av *avHead, blocks map[int]int, behind map[int]bool, byPID map[int]model.Backend) {
	if gids := preparedHeads(s, blocks); headWaiters == 0 && len(gids) > 0 {
		// pg_blocking_pids names a prepared transaction's locks as pid
		// 0: no session holds them, and none will release them.
		f.Title += fmt.Sprintf(" behind prepared transaction %s: no session holds its locks, they stay until COMMIT PREPARED or ROLLBACK PREPARED", strings.Join(gids, ", "))
		f.Impact.Summary = "the head of the chain: prepared transaction " + strings.Join(gids, ", ") + ", which belongs to no session"
		f.Fix = horizonFix(s, model.XminHolder{Kind: model.HolderPrepared, Name: strings.Trim(gids[0], "'"), Database: s.Database})
		f.Verification = model.NotRunBecause("the head is a prepared transaction: ending it is the fix, and there is no wait to reproduce without it")
		if preparedReported(s) {
			f.Severity = model.Info
			f.Title += " (see xmin-horizon)"
		}
	} else if av != nil {
		// An autovacuum at the head: its truncation is the server's own
		// timing, which no copy reproduces.
		f.Verification = model.NotRunBecause("observed while sampling; the head of the chain was " + av.String() + ", whose timing no copy reproduces")
	} else if headWaiters == 0 {
		f.Fix.SQL = ""
		f.Verification = model.NotRunBecause("observed while sampling; the head of the chain was not visible, so there is nothing to reproduce")
	} else if claimChain(head, behind, byPID) {
		// Workers taking the same queue row: one problem, the claim
		// race, whose experiment measures the claim with SKIP LOCKED.
		f.Severity = model.Info
		f.Title += ": workers claiming the same queue row (see queue-claim-race)"
		f.Verification = model.NotRunBecause("the chain is the queue's claim race: its sessions wait for the row the head claimed with the same statement, and queue-claim-race's experiment measures the claim with FOR UPDATE SKIP LOCKED")
	} else if x, ok := sessions(s)[head.PID]; ok && strings.HasPrefix(head.State, "idle in transaction") && x.idleMS >= idleMinMS && x.idleSamples > 0 && len(x.waiters) > 0 {
		// The head is a transaction its client left idle: one problem,
		// idle-in-transaction's, which names the session and reproduces
		// the chain with idle_in_transaction_session_timeout.
		f.Severity = model.Info
		f.Title += ": its head is a transaction left idle (see idle-in-transaction)"
		f.Verification = model.NotRunBecause("the chain is idle-in-transaction's: its head is a transaction left idle, and that finding's experiment reproduces the chain with and without idle_in_transaction_session_timeout")
	} else if strings.HasPrefix(head.State, "idle in transaction") {
		if f.Experiment = heldLockExperiment(s, head, behind); f.Experiment == nil {
			f.Verification = model.NotRunBecause("observed while sampling; no statement waiting in the chain could be replayed on a twin")
		}
	}
}

// preparedHeads are this database's prepared transactions, quoted, when
// sessions were blocked by pid 0 (a prepared transaction's locks).
func preparedHeads(s *model.Snapshot, blocks map[int]int) []string {
	if blocks[0] == 0 {
		return nil
	}
	var gids []string
	for _, h := range s.Holders {
		if h.Kind == model.HolderPrepared && h.Database == s.Database {
			gids = append(gids, sqlparse.QuoteLiteral(h.Name))
		}
	}
	return gids
}

// preparedReported says whether xmin-horizon reports one of this
// database's prepared transactions: the chain behind it is then that
// finding's.
func preparedReported(s *model.Snapshot) bool {
	h := reportedHolder(s)
	return h != nil && h.Kind == model.HolderPrepared
}

// countLockWaits counts the database's session-samples that were busy
// (active or in a transaction) and those waiting for a lock (not one
// pgmedic caused), and finds the sample with the most waiters.
func countLockWaits(s *model.Snapshot) (busy, waiting, worst, worstAt int) {
	worstAt = -1
	for i, smp := range s.Sampling.Samples {
		n := 0
		for _, b := range smp.Backends {
			if b.Database != s.Database {
				continue
			}
			if b.State == "active" || strings.HasPrefix(b.State, "idle in transaction") {
				busy++
			}
			// Commits queued on the NOTIFY queue's lock are notify-lock's.
			if b.WaitType == "Lock" && !b.BlockedByPgmedic && !notifyWait(b) {
				waiting++
				n++
			}
		}
		if n > worst {
			worst, worstAt = n, i
		}
	}
	return busy, waiting, worst, worstAt
}

// chainFix is the advice for a lock chain no schema change heads: end the
// transaction at its head; for row locks, a consistent order and short
// transactions; for workers claiming rows (FOR UPDATE), SKIP LOCKED.
func chainFix(smp model.ActivitySample) string {
	fix := "end or shorten the transaction at the head of the chain (see idle-in-transaction when it sits idle)"
	rowLocks, claims := false, false
	for _, b := range smp.Backends {
		if b.WaitType == "Lock" && (b.Wait == "transactionid" || b.Wait == "tuple") {
			rowLocks = true
			q := strings.ToUpper(b.Query)
			claims = claims || strings.Contains(q, " FOR UPDATE") || strings.Contains(q, " FOR NO KEY UPDATE")
		}
	}
	if rowLocks {
		fix += "; take row locks in a consistent order and keep the transactions that hold them short"
	}
	if claims {
		fix += "; workers that claim rows from a queue should use FOR UPDATE SKIP LOCKED"
	}
	return fix
}

// queuedBehind is, for each session of one sample, every session that
// waits for it directly or through others. PostgreSQL's
// pg_blocking_pids names the sessions ahead in a lock's wait queue whose
// requests conflict, not only the holders: readers queued behind a
// waiting ALTER name the ALTER, and the ALTER names the holder.
func queuedBehind(smp model.ActivitySample) map[int]map[int]bool {
	blockers := map[int][]int{}
	for _, b := range smp.Backends {
		blockers[b.PID] = b.BlockedBy
	}
	out := map[int]map[int]bool{}
	for _, b := range smp.Backends {
		seen := map[int]bool{b.PID: true}
		up := append([]int(nil), b.BlockedBy...)
		for len(up) > 0 && len(seen) < 1000 {
			p := up[0]
			up = up[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			if out[p] == nil {
				out[p] = map[int]bool{}
			}
			out[p][b.PID] = true
			up = append(up, blockers[p]...)
		}
	}
	return out
}

// claimChain says whether a chain is workers claiming the same queue row:
// the head runs a claim that waits for locked rows (no SKIP LOCKED), and
// the sessions behind it run the same statement.
func claimChain(head model.Backend, behind map[int]bool, byPID map[int]model.Backend) bool {
	st, err := sqlparse.Parse(head.Query)
	if err != nil || len(behind) == 0 {
		return false
	}
	c := st.Shape().Claim
	if c == nil || c.Wait == sqlparse.WaitSkipLocked || c.Wait == sqlparse.WaitNoWait {
		return false
	}
	key, _ := sqlparse.Fingerprint(head.Query)
	same := 0
	for p := range behind {
		if fp, _ := sqlparse.Fingerprint(byPID[p].Query); fp == key {
			same++
		}
	}
	return 2*same >= len(behind)
}

// ddlQueue finds a schema change with sessions queued behind it: waiting
// for its lock (there the queue forms, whoever holds the lock it waits
// for) or holding it while it runs (a table rewrite). The finding names
// the statement, its lock, whom it blocks and what blocks it, with the
// fix for that statement and lock.
func ddlQueue(s *model.Snapshot, smp model.ActivitySample, byPID map[int]model.Backend, behind map[int]map[int]bool) (model.Finding, bool) {
	// A waiting schema change first: that is where the queue forms, even
	// when what it waits for is itself a schema change (a VACUUM, a
	// CREATE INDEX).
	var ddl model.Backend
	var d *sqlparse.DDL
	for _, waitingOnly := range []bool{true, false} {
		for _, b := range smp.Backends {
			if (waitingOnly && b.WaitType != "Lock") || len(behind[b.PID]) == 0 || (d != nil && len(behind[b.PID]) <= len(behind[ddl.PID])) {
				continue
			}
			st, err := sqlparse.Parse(b.Query)
			if err != nil {
				continue
			}
			if x := st.DDL(); x != nil {
				ddl, d = b, x
			}
		}
		if d != nil {
			break
		}
	}
	if d == nil {
		return model.Finding{}, false
	}
	waiting := ddl.WaitType == "Lock"
	mode, rel := migration.Lock(d), sqlparse.QuoteQualified(d.Table.Schema, d.Table.Name)
	if r, m, ok := strings.Cut(ddl.WaitsFor, " ("); ok && waiting {
		rel, mode = r, strings.TrimSuffix(m, ")")
	}
	var blockers []string
	av, byAutovacuum := autovacuumHead(ddl)
	for _, p := range ddl.BlockedBy {
		if b, ok := byPID[p]; ok {
			blockers = append(blockers, fmt.Sprintf("%s, %s for %s, running %q", who(b), b.State, sec(b.StateMS), printable.Shorten(s.Shown(b.Query), 80)))
		} else if byAutovacuum && av.PID == p {
			blockers = append(blockers, av.String())
		} else {
			blockers = append(blockers, fmt.Sprintf("pid %d (not visible to pgmedic's role)", p))
		}
	}
	queued := len(behind[ddl.PID])
	what := "every later statement that conflicts with it"
	if migration.BlocksReads(mode) {
		what = "every later statement on the table, reads included"
	}
	heads := pidsOf(ddl.BlockedBy)
	for i, p := range ddl.BlockedBy {
		if b, ok := byPID[p]; ok {
			heads[i] = fmt.Sprintf("%s running %q", who(b), printable.Shorten(s.Shown(b.Query), 60))
		} else if byAutovacuum && av.PID == p {
			heads[i] = av.String()
		}
	}
	summary, sql := ddlFix(d, ddl.Query)
	if byAutovacuum && av.Wraparound {
		more, freeze := av.wraparoundAdvice()
		summary, sql = summary+"; "+more, sql+"\n"+freeze
	}
	title := fmt.Sprintf("schema change %q has held %s on %s for %s; %s queued behind it", printable.Shorten(s.Shown(ddl.Query), 80), mode, rel, sec(ddl.StateMS), sessionsWord(queued))
	impact := fmt.Sprintf("the %s of %s holds %s while it runs, and %s waits behind it", d.Command, who(ddl), mode, what)
	if waiting {
		title = fmt.Sprintf("schema change %q waited %s for %s on %s behind %s; %s queued behind it", printable.Shorten(s.Shown(ddl.Query), 80), sec(ddl.StateMS), mode, rel,
			strings.Join(heads, ", "), sessionsWord(queued))
		impact = fmt.Sprintf("the %s of %s waits for %s, and %s waits behind it. It waits for %s", d.Command, who(ddl), mode, what, strings.Join(blockers, "; "))
		if len(ddl.BlockedBy) > 0 && !(byAutovacuum && av.Wraparound) {
			sql += fmt.Sprintf("\n-- what it waits for, if it must go:\nSELECT pg_cancel_backend(%d); -- or pg_terminate_backend(%d)", ddl.BlockedBy[0], ddl.BlockedBy[0])
		}
	}
	return model.Finding{
		Rule: LockContentionID, Title: title,
		Experiment: queueExperiment(d, ddl, waiting, byPID, behind),
		Object:     model.Object{Kind: "statement", Name: printable.Shorten(s.Shown(ddl.Query), 200), Role: ddl.User, Database: s.Database},
		Evidence: []model.Evidence{
			ev("sessions queued behind the schema change", float64(queued), ""),
			ev("the schema change has been running", ddl.StateMS, "ms"),
			ev("sessions it waits for", float64(len(ddl.BlockedBy)), ""),
		},
		Impact:       model.Impact{Summary: impact},
		Fix:          model.Fix{Summary: summary, SQL: sql},
		Verification: model.NotRunBecause("observed while sampling; no read queued behind the change that pgmedic could reproduce (check --twin reproduces a queue that has one, with and without lock_timeout)"),
		Docs:         docsPath(LockContentionID),
	}, true
}

// queueExperiment is the reproduction of what queues behind a schema change:
// a change that waits for its lock (lockQueueExperiment), or one that
// holds its lock while it runs and has a form that takes a weaker one
// (ddlHoldExperiment).
func queueExperiment(d *sqlparse.DDL, ddl model.Backend, waiting bool, byPID map[int]model.Backend, behind map[int]map[int]bool) *model.Experiment {
	if !waiting {
		if exp := ddlHoldExperiment(d, ddl, byPID, behind); exp != nil {
			return exp
		}
	}
	return lockQueueExperiment(d, ddl, byPID, behind)
}

// fixLocks are the lock a change's fixed form takes, for the changes that
// hold a lock blocking writes for as long as they run: CONCURRENTLY
// builds and rebuilds an index under SHARE UPDATE EXCLUSIVE, which
// blocks no read or write.
var fixLocks = map[string]string{"CREATE INDEX": "SHARE UPDATE EXCLUSIVE", "REINDEX": "SHARE UPDATE EXCLUSIVE"}

// ddlHoldExperiment is the reproduction of statements queued behind a
// change that holds its lock while it runs: the change's lock held, then
// its fixed form's, with one of the queued statements (a read or a
// write, run rolled back on the twin) in a loop. Nil when the change has
// no form with a weaker lock, or nothing it can reproduce queued.
func ddlHoldExperiment(d *sqlparse.DDL, ddl model.Backend, byPID map[int]model.Backend, behind map[int]map[int]bool) *model.Experiment {
	fix := fixLocks[d.Command]
	if fix == "" || d.Concurrently {
		return nil
	}
	held := strings.ToUpper(strings.Join(capitalised().FindAllString(strings.TrimSuffix(migration.Lock(d), "Lock"), -1), " "))
	for _, p := range slices.Sorted(maps.Keys(behind[ddl.PID])) {
		b, ok := byPID[p]
		if !ok || b.PID == ddl.PID {
			continue
		}
		st, err := sqlparse.Parse(b.Query)
		if err != nil || st.DDL() != nil {
			continue
		}
		switch st.Shape().Command {
		case "SELECT", "INSERT", "UPDATE", "DELETE":
			return &model.Experiment{Kind: model.ExpDDLHold, Query: ddl.Query, Table: model.RelRef{Schema: d.Table.Schema, Name: d.Table.Name},
				Waiter: b.Query, HeadLock: held, FixLock: fix}
		}
	}
	return nil
}

// lockQueueExperiment is the reproduction of a schema change's queue: the
// change as the sampler saw it, the lock its head held on the table, and
// one of the reads queued behind it (a SELECT, with its values). Without
// such a read there is nothing to time, and no experiment.
func lockQueueExperiment(d *sqlparse.DDL, ddl model.Backend, byPID map[int]model.Backend, behind map[int]map[int]bool) *model.Experiment {
	head := "ACCESS SHARE"
	if av, ok := autovacuumHead(ddl); ok {
		head = av.lockMode()
	}
	for _, p := range ddl.BlockedBy {
		if b, ok := byPID[p]; ok {
			if m := heldMode(b.Locks, d.Table.Name); m != "" {
				head = m
			}
		}
	}
	// A read with $n placeholders (a client's extended protocol) is bound
	// on the twin with values from the table's own rows.
	for _, p := range slices.Sorted(maps.Keys(behind[ddl.PID])) {
		b, ok := byPID[p]
		if !ok || b.PID == ddl.PID {
			continue
		}
		st, err := sqlparse.Parse(b.Query)
		if err != nil {
			continue
		}
		if ok, _ := st.SafeToAnalyze(); ok && st.Shape().Command == "SELECT" {
			return &model.Experiment{Kind: model.ExpLockQueue, Query: ddl.Query, Table: model.RelRef{Schema: d.Table.Schema, Name: d.Table.Name}, Waiter: b.Query, HeadLock: head}
		}
	}
	return nil
}

// lockContentionLog: lock waits past deadlock_timeout and deadlocks.
func lockContentionLog(in LogInput) []model.Finding {
	le := in.Events
	if le.Deadlocks == 0 && (le.LockWaits == 0 || le.LockWaitMS < 1000) {
		return nil
	}
	fix := "shorten the transactions that hold the locks (commit before other work), take row locks in a consistent order, use FOR UPDATE SKIP LOCKED for queues"
	impact := "sessions waited for locks held by others; the DETAIL lines name the processes holding them"
	if le.RelationLockWaits*2 > le.LockWaits && le.Deadlocks == 0 {
		// Most waits were for a relation's lock: a schema change waiting
		// for ACCESS EXCLUSIVE, and the sessions queued behind it.
		fix = "run schema changes with a short lock_timeout and retries (SET lock_timeout = '2s'), so a change that cannot get its lock gives up instead of queuing every statement on the table behind it; use the forms that take lighter locks (CREATE INDEX CONCURRENTLY, ADD CONSTRAINT ... NOT VALID then VALIDATE CONSTRAINT)"
		impact = "sessions waited for a relation's lock: a schema change waited for ACCESS EXCLUSIVE behind a transaction on the table, and every statement on the table queued behind the change; the DETAIL lines name the processes"
	}
	return []model.Finding{{Rule: LockContentionID, Severity: model.Warning,
		Title:  fmt.Sprintf("%d lock waits past deadlock_timeout (%d on a relation's lock) and %d deadlocks in the log", le.LockWaits, le.RelationLockWaits, le.Deadlocks),
		Object: logObject(in),
		Evidence: []model.Evidence{ev2("lock waits logged (log_lock_waits)", le.LockWaits), ev("lock wait reported", le.LockWaitMS, "ms"),
			ev2("deadlocks", le.Deadlocks)},
		Impact:       model.Impact{Summary: impact},
		Fix:          model.Fix{Summary: fix},
		Verification: loggedVerification, Docs: docsPath(LockContentionID)}}
}
