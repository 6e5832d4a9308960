package rules

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Rule ids of the rules that read the sampled sessions.
const (
	IdleInTransactionID  = "idle-in-transaction"
	LockContentionID     = "lock-contention"
	ClientStallID        = "client-stall"
	ConnectionPressureID = "connection-pressure"
)

// Thresholds of the session rules.
const (
	idleMinMS       = 1000 // idle in a transaction at least this long
	idleCriticalMS  = 30000
	lockShareWarn   = 0.2 // lock waits as a share of active session-samples
	lockMinSamples  = 3
	stallMinSamples = 2    // a stall seen in at least this many ticks
	stallRatio      = 10.0 // transaction open at least 10x what the server spent
	churnPerSecond  = 10.0 // new sessions per second
	activePerCore   = 2.0  // active sessions per core
)

// session is what the samples say about one backend over the window.
type session struct {
	last        model.Backend // the latest sample of it
	worst       model.Backend // the sample where it had been in its state longest
	idleSamples int           // samples idle in a transaction
	idleMS      float64       // longest idle-in-transaction stretch seen
	clientRead  int           // samples idle in a transaction waiting for its client
	clientWrite int           // samples active, waiting for its client to read
	locks       map[string]bool
	waiters     map[int]bool // sessions seen waiting for it
}

// sessions folds the samples of the snapshot's database by pid.
func sessions(s *model.Snapshot) map[int]*session {
	out := map[int]*session{}
	get := func(b model.Backend) *session {
		x := out[b.PID]
		if x == nil {
			x = &session{locks: map[string]bool{}, waiters: map[int]bool{}}
			out[b.PID] = x
		}
		return x
	}
	for _, smp := range s.Sampling.Samples {
		for _, b := range smp.Backends {
			if b.Database != s.Database {
				continue
			}
			x := get(b)
			x.last = b
			if strings.HasPrefix(b.State, "idle in transaction") {
				x.idleSamples++
				if b.StateMS > x.idleMS {
					x.idleMS, x.worst = b.StateMS, b
				}
				if b.Wait == "ClientRead" {
					x.clientRead++
				}
			}
			if b.State == "active" && b.Wait == "ClientWrite" {
				x.clientWrite++
				if b.StateMS > x.worst.StateMS {
					x.worst = b
				}
			}
			for _, l := range b.Locks {
				x.locks[l] = true
			}
		}
		// A queue for a row forms behind the first waiter (it holds the
		// tuple lock), so pg_blocking_pids of the others names it, not
		// the session at the head: every session up the chain counts the
		// waiter.
		db := map[int]string{}
		for _, b := range smp.Backends {
			db[b.PID] = b.Database
		}
		for p, ws := range queuedBehind(smp) {
			for w := range ws {
				if db[w] == s.Database {
					get(model.Backend{PID: p}).waiters[w] = true
				}
			}
		}
	}
	return out
}

// sessionsWord is "1 session" or "n sessions".
func sessionsWord(n int) string {
	if n == 1 {
		return "1 session"
	}
	return fmt.Sprintf("%d sessions", n)
}

// sampled skips the session rules when nothing was sampled.
func sampled(s *model.Snapshot, id string) (bool, []model.Skip) {
	if s.Sampling != nil && len(s.Sampling.Samples) > 0 {
		return true, nil
	}
	return false, []model.Skip{{Rule: id, Reason: "the sessions were not sampled (check --sample 0)", Fix: "run check with --sample 10s while the problem happens"}}
}

func who(b model.Backend) string {
	s := fmt.Sprintf("pid %d", b.PID)
	var parts []string
	if b.App != "" {
		parts = append(parts, "application "+b.App)
	}
	if b.User != "" {
		parts = append(parts, "user "+b.User)
	}
	if b.Client != "" {
		parts = append(parts, "from "+b.Client)
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func sec(msec float64) string { return fmt.Sprintf("%.1f s", msec/1000) }

// idleInTransaction finds sessions that sat idle inside a transaction:
// every lock they took stays held until they commit, and every session
// that needs one of those rows or tables waits for the client, not the
// database.
func idleInTransaction(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if ok, skip := sampled(s, IdleInTransactionID); !ok {
		return nil, skip
	}
	var out []model.Finding
	for pid, x := range sessions(s) {
		if x.idleMS < idleMinMS || x.idleSamples == 0 {
			continue
		}
		b := x.worst
		sev := model.Info
		if len(x.waiters) > 0 {
			sev = model.Warning
			// The chain behind it is this finding's (lock-contention
			// defers to it): as severe as that chain's share of the time.
			busy, waiting, _, _ := countLockWaits(s)
			if len(x.waiters) >= 3 || x.idleMS >= idleCriticalMS || (busy > 0 && float64(waiting)/float64(busy) >= 0.5) {
				sev = model.Critical
			}
		}
		locks := slices.Sorted(maps.Keys(x.locks))
		title := fmt.Sprintf("%s sat idle in a transaction for %s", who(b), sec(x.idleMS))
		if len(locks) > 0 {
			title += " holding locks on " + strings.Join(locks, ", ")
		}
		if len(x.waiters) > 0 {
			title += fmt.Sprintf("; %s waited behind it", sessionsWord(len(x.waiters)))
		}
		role := b.User
		if role == "" {
			role = "the_application_role"
		}
		out = append(out, model.Finding{
			Rule: IdleInTransactionID, Severity: sev, Title: title,
			Object: sessionObject(s, pid, b),
			Evidence: []model.Evidence{
				ev("longest time idle in the transaction", x.idleMS, "ms"),
				ev("transaction open", b.XactMS, "ms"),
				ev("its last statement ran", b.LastMS, "ms"),
				ev("samples idle in the transaction", float64(x.idleSamples), ""),
				ev("sessions seen waiting for it", float64(len(x.waiters)), ""),
			},
			Impact:       model.Impact{Summary: "its locks stay held while the client does something else; sessions that need them wait for the client, not for the database"},
			Fix:          idleFix(role, x.idleMS, len(x.waiters) > 0),
			Verification: model.NotRunBecause(fmt.Sprintf("observed in %d of %d samples; no session waited behind it, so there is no wait to time: the fix is in the client's code (commit before other work), which no experiment on the database stands in for, and the timeout only ends transactions a client abandons", x.idleSamples, len(s.Sampling.Samples))),
			Docs:         docsPath(IdleInTransactionID),
		})
		if len(x.waiters) > 0 {
			f := &out[len(out)-1]
			if f.Experiment = heldLockExperiment(s, b, x.waiters); f.Experiment == nil {
				f.Verification = model.NotRunBecause(fmt.Sprintf("observed in %d of %d samples; no statement waiting behind it could be replayed on a twin", x.idleSamples, len(s.Sampling.Samples)))
			} else {
				f.Experiment.IdleMS, f.Experiment.TimeoutMS = x.idleMS, idleTimeoutFor(x.idleMS)
			}
		}
	}
	Sort(out)
	return out, nil
}

// idleTimeouts are the values idle_in_transaction_session_timeout is
// proposed at, as a person writes them.
var idleTimeouts = []float64{100, 200, 500, 1000, 2000, 5000, 10000, 30000}

// idleTimeoutFor is the idle_in_transaction_session_timeout that would
// have ended a transaction seen idle for idleMS: the largest round value
// at most half of it (so it fires on that stall with room to spare), at
// most 30 s, at least 100 ms. A timeout above the stalls measured (the
// customary 30 s against stalls of 1.6 s) would end none of them.
func idleTimeoutFor(idleMS float64) float64 {
	t := idleTimeouts[0]
	for _, v := range idleTimeouts {
		if v <= idleMS/2 {
			t = v
		}
	}
	return t
}

// timeoutText writes a timeout as a setting's value: '500ms', '2s'.
func timeoutText(ms float64) string {
	if ms >= 1000 && math.Mod(ms, 1000) == 0 {
		return fmt.Sprintf("'%.0fs'", ms/1000)
	}
	return fmt.Sprintf("'%.0fms'", ms)
}

// idleFix is the fix for a transaction left idle: commit before other
// work, and a server-side timeout below the stall measured, so that it
// would have ended this one. With sessions waiting behind it the value
// is what the rehearsal sets; a session idle without waiters gets the
// same, as a bound on what an abandoned transaction can hold.
func idleFix(role string, idleMS float64, waited bool) model.Fix {
	why, sql := idleTimeout(role, idleMS, waited)
	return model.Fix{Summary: "commit (or roll back) before the client does other work (network calls, computation, waiting on a queue); let the server end transactions a client abandons: " + why, SQL: sql}
}

// idleTimeout is the idle_in_transaction_session_timeout for role below
// a stall of idleMS, why that value, and the statement that sets it.
func idleTimeout(role string, idleMS float64, waited bool) (why, sql string) {
	t := idleTimeoutFor(idleMS)
	why = fmt.Sprintf("%s is below the %s it was seen idle, so it would have ended that transaction; keep it above the longest pause the application makes between the statements of a transaction on purpose", timeoutText(t), sec(idleMS))
	if !waited {
		why = fmt.Sprintf("%s is below the %s it was seen idle; keep it above the longest pause the application makes between the statements of a transaction on purpose", timeoutText(t), sec(idleMS))
	}
	return why, fmt.Sprintf("ALTER ROLE %s SET idle_in_transaction_session_timeout = %s;", sqlparse.QuoteIdent(role), timeoutText(t))
}

// lockContention finds lock waits that take a large share of the sampled
// session time, and names the session at the head of the blocking chain at
// its worst moment.
func lockContention(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if ok, skip := sampled(s, LockContentionID); !ok {
		return nil, skip
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
	f := model.Finding{
		Rule: LockContentionID, Severity: sev, Title: title,
		Object:   model.Object{Kind: "database", Name: s.Database, Database: s.Database},
		Evidence: evidence,
		Impact:   model.Impact{Summary: "the head of the chain: " + headText, Share: math.Min(share, 1)},
		Fix: model.Fix{Summary: chainFix(smp),
			SQL: fmt.Sprintf("-- the head of the chain, if it must go:\nSELECT pg_cancel_backend(%d); -- or pg_terminate_backend(%d)", head.PID, head.PID)},
		Verification: model.NotRunBecause("observed while sampling; the head of the chain was running a statement, not idle: shortening its transaction is a change to the application, and no rehearsal stands in for it"),
		Docs:         docsPath(LockContentionID),
	}
	whoseChain(s, &f, head, headWaiters, blocks, behind[head.PID], byPID)
	return []model.Finding{f}, nil
}

// whoseChain says whose problem a chain is by its head: a prepared
// transaction (ended only by COMMIT or ROLLBACK PREPARED), none visible,
// workers claiming one queue row (queue-claim-race's), a transaction its
// client left idle (idle-in-transaction's), or an idle head whose waiters
// can be replayed on a twin (held-lock's experiment). behind are the
// sessions queued behind the head.
func whoseChain(s *model.Snapshot, f *model.Finding, head model.Backend, headWaiters int, blocks map[int]int, behind map[int]bool, byPID map[int]model.Backend) {
	if gids := preparedHeads(s, blocks); headWaiters == 0 && len(gids) > 0 {
		// pg_blocking_pids names a prepared transaction's locks as pid
		// 0: no session holds them, and none will release them.
		f.Title += fmt.Sprintf(" behind prepared transaction %s: no session holds its locks, they stay until COMMIT PREPARED or ROLLBACK PREPARED", strings.Join(gids, ", "))
		f.Impact.Summary = "the head of the chain: prepared transaction " + strings.Join(gids, ", ") + ", which belongs to no session"
		f.Fix = horizonFix(s, model.XminHolder{Kind: model.HolderPrepared, Name: strings.Trim(gids[0], "'"), Database: s.Database})
		f.Verification = model.NotRunBecause("the head is a prepared transaction: ending it is the fix, and there is no wait to rehearse without it")
		if preparedReported(s) {
			f.Severity = model.Info
			f.Title += " (see xmin-horizon)"
		}
	} else if headWaiters == 0 {
		f.Fix.SQL = ""
		f.Verification = model.NotRunBecause("observed while sampling; the head of the chain was not visible, so there is nothing to rehearse")
	} else if claimChain(head, behind, byPID) {
		// Workers taking the same queue row: one problem, the claim
		// race, whose experiment measures the claim with SKIP LOCKED.
		f.Severity = model.Info
		f.Title += ": workers claiming the same queue row (see queue-claim-race)"
		f.Verification = model.NotRunBecause("the chain is the queue's claim race: its sessions wait for the row the head claimed with the same statement, and queue-claim-race's experiment measures the claim with FOR UPDATE SKIP LOCKED")
	} else if x, ok := sessions(s)[head.PID]; ok && strings.HasPrefix(head.State, "idle in transaction") && x.idleMS >= idleMinMS && x.idleSamples > 0 && len(x.waiters) > 0 {
		// The head is a transaction its client left idle: one problem,
		// idle-in-transaction's, which names the session and rehearses
		// the chain with idle_in_transaction_session_timeout.
		f.Severity = model.Info
		f.Title += ": its head is a transaction left idle (see idle-in-transaction)"
		f.Verification = model.NotRunBecause("the chain is idle-in-transaction's: its head is a transaction left idle, and that finding's experiment rehearses the chain with and without idle_in_transaction_session_timeout")
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
			if b.WaitType == "Lock" && !b.BlockedByPgmedic {
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
	for _, p := range ddl.BlockedBy {
		if b, ok := byPID[p]; ok {
			blockers = append(blockers, fmt.Sprintf("%s, %s for %s, running %q", who(b), b.State, sec(b.StateMS), printable.Shorten(s.Shown(b.Query), 80)))
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
		}
	}
	summary, sql := ddlFix(d, ddl.Query)
	title := fmt.Sprintf("schema change %q has held %s on %s for %s; %s queued behind it", printable.Shorten(s.Shown(ddl.Query), 80), mode, rel, sec(ddl.StateMS), sessionsWord(queued))
	impact := fmt.Sprintf("the %s of %s holds %s while it runs, and %s waits behind it", d.Command, who(ddl), mode, what)
	if waiting {
		title = fmt.Sprintf("schema change %q waited %s for %s on %s behind %s; %s queued behind it", printable.Shorten(s.Shown(ddl.Query), 80), sec(ddl.StateMS), mode, rel,
			strings.Join(heads, ", "), sessionsWord(queued))
		impact = fmt.Sprintf("the %s of %s waits for %s, and %s waits behind it. It waits for %s", d.Command, who(ddl), mode, what, strings.Join(blockers, "; "))
		if len(ddl.BlockedBy) > 0 {
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
		Verification: model.NotRunBecause("observed while sampling; no read queued behind the change that pgmedic could rehearse (check --twin rehearses a queue that has one, with and without lock_timeout)"),
		Docs:         docsPath(LockContentionID),
	}, true
}

// queueExperiment is the rehearsal of what queues behind a schema change:
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

// ddlHoldExperiment is the rehearsal of statements queued behind a
// change that holds its lock while it runs: the change's lock held, then
// its fixed form's, with one of the queued statements (a read or a
// write, run rolled back on the twin) in a loop. Nil when the change has
// no form with a weaker lock, or nothing it can rehearse queued.
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

// lockQueueExperiment is the rehearsal of a schema change's queue: the
// change as the sampler saw it, the lock its head held on the table, and
// one of the reads queued behind it (a SELECT, with its values). Without
// such a read there is nothing to time, and no experiment.
func lockQueueExperiment(d *sqlparse.DDL, ddl model.Backend, byPID map[int]model.Backend, behind map[int]map[int]bool) *model.Experiment {
	head := "ACCESS SHARE"
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

var capitalised = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Z][a-z]+`) })

// heldMode is the strongest lock a session's held-locks list names on a
// table ("public.orders (RowExclusiveLock)"), in LOCK TABLE's words.
func heldMode(locks []string, table string) string {
	order := []string{"AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock", "ShareLock",
		"ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
	best := -1
	for _, l := range locks {
		rel, mode, ok := strings.Cut(l, " (")
		if !ok || (rel != table && !strings.HasSuffix(rel, "."+table)) {
			continue
		}
		if i := slices.Index(order, strings.TrimSuffix(mode, ")")); i > best {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	// "RowExclusiveLock" -> "ROW EXCLUSIVE"
	words := capitalised().FindAllString(strings.TrimSuffix(order[best], "Lock"), -1)
	return strings.ToUpper(strings.Join(words, " "))
}

func pidsOf(pids []int) []string {
	out := make([]string, len(pids))
	for i, p := range pids {
		out[i] = fmt.Sprintf("pid %d", p)
	}
	return out
}

// runQueue is what the samples say about the sessions that wanted a core.
// A session counts only when it is active with no wait event: waiting
// for a lock, for its client, for I/O or WAL, or idle in a transaction,
// it does not compete for a core (and the first two have rules of their
// own).
//
// The figures are weighted by time, not counted by sample: each sample
// stands for the time until the next one. A sampler that had to wait for
// a saturated server took fewer samples inside a burst than outside it,
// and a count of samples would judge the burst by the quiet around it.
type runQueue struct {
	onCPU     float64 // sessions on CPU, mean over the window's time
	peak      int
	ticksOver int     // samples with more sessions on CPU than cores
	overShare float64 // share of the window's time with more sessions on CPU than cores
	waiting   float64 // active sessions that waited (lock, I/O, LWLock, client), mean over the time
	// coresGot is how many cores the sampled backends got over the window,
	// from their processes' CPU time (a server on pgmedic's machine); 0
	// when not measured.
	coresGot float64
}

// sampleWeights is how long each sample stands for: the time until the
// next one; the last stands for the interval asked for (or the mean of
// the others). Samples whose clock does not move (a test's) weigh alike.
func sampleWeights(sm *model.Sampling) []float64 {
	n := len(sm.Samples)
	w := make([]float64, n)
	total := 0.0
	for i := 0; i+1 < n; i++ {
		w[i] = max(sm.Samples[i+1].At.Sub(sm.Samples[i].At).Seconds(), 0)
		total += w[i]
	}
	switch {
	case n == 1 || total == 0:
		for i := range w {
			w[i] = 1
		}
	case sm.IntervalMS > 0:
		w[n-1] = min(sm.IntervalMS/1000, total/float64(n-1))
	default:
		w[n-1] = total / float64(n-1)
	}
	return w
}

// readRunQueue folds the samples of every database: the cores are shared.
func readRunQueue(s *model.Snapshot, cores int) runQueue {
	var q runQueue
	weights := sampleWeights(s.Sampling)
	type span struct {
		first, last float64
		seen        int
	}
	cpu := map[int]*span{}
	var on, waiting, over, total float64
	for i, smp := range s.Sampling.Samples {
		n, waits := 0, 0
		for _, b := range smp.Backends {
			if b.State == "active" {
				if b.WaitType == "" {
					n++
				} else {
					waits++
				}
			}
			if b.CPUMS > 0 {
				sp := cpu[b.PID]
				if sp == nil {
					sp = &span{first: b.CPUMS}
					cpu[b.PID] = sp
				}
				sp.last, sp.seen = b.CPUMS, sp.seen+1
			}
		}
		w := weights[i]
		on += w * float64(n)
		waiting += w * float64(waits)
		total += w
		q.peak = max(q.peak, n)
		if n > cores {
			q.ticksOver++
			over += w
		}
	}
	q.onCPU, q.waiting, q.overShare = on/total, waiting/total, over/total
	ticks := len(s.Sampling.Samples)
	window := s.Sampling.Samples[ticks-1].At.Sub(s.Sampling.Samples[0].At).Seconds()
	if window > 0 && len(cpu) > 0 {
		used := 0.0
		for _, sp := range cpu {
			if sp.seen >= 2 && sp.last >= sp.first {
				used += sp.last - sp.first
			}
		}
		q.coresGot = used / 1000 / window
	}
	return q
}

// Thresholds of the run queue: more sessions on CPU than cores in at
// least half the samples, and statements stretched to at least twice
// their CPU time (as long in the queue as at work; 4 times: critical).
const (
	stretchWarn     = 2.0
	stretchCritical = 4.0
)

// poolBasis says where a proposed pool size comes from.
func poolBasis(pool, cores int) string {
	if pool == cores {
		return fmt.Sprintf("one per core: no more than 2 x %d clients ran and they still queued for the cores, so the statements are CPU-bound", cores)
	}
	return fmt.Sprintf("2 x %d cores", cores)
}

// connectionPressure finds a real run queue (more sessions on CPU than
// the server has cores, and each getting measurably less than a core),
// connections near max_connections, and connection churn.
func connectionPressure(s *model.Snapshot) (found []model.Finding, skipped []model.Skip) {
	if ok, skip := sampled(s, ConnectionPressureID); !ok {
		return nil, skip
	}
	if why := s.Sampling.NoSessionCounts; why != "" {
		// The rest of the rule holds; only the churn is not judged.
		defer func() {
			skipped = append(skipped, model.Skip{Rule: ConnectionPressureID, Reason: why})
		}()
	}
	ticks := len(s.Sampling.Samples)
	avgTotal, churn := openAndChurn(s)
	cores := s.ServerCores
	if cores <= 0 {
		cores = 4
	}
	q := readRunQueue(s, cores)
	maxConn := s.Activity.MaxConnections
	j := judgeRunQueue(s, q, cores)
	why, sev := j.why, j.severity
	// Connections refused are seen only in the server's log; connections
	// held idle near the limit are why they are refused.
	h := heldConnections(s)
	refused := loggedRefusals(s)
	heldWhy, heldSev := h.why(maxConn, avgTotal, refused)
	why, sev = append(why, heldWhy...), max(sev, heldSev)
	if churn >= churnPerSecond {
		why = append(why, fmt.Sprintf("%.0f new sessions per second", churn))
		sev = max(sev, model.Warning)
	}
	if len(why) == 0 {
		return nil, nil
	}
	// Two server connections per core keep the cores busy while some
	// sessions wait on I/O. When no more clients than that ran and they
	// still queued for CPU, the sessions are CPU-bound: one per core.
	clients := max(workingSessions(q), int(math.Round(avgTotal)))
	pool := 2 * cores
	if clients <= pool && clients > cores && q.coresGot > 0 {
		pool = cores
	}
	f := model.Finding{
		Rule: ConnectionPressureID, Severity: sev,
		Title:  "connection pressure: " + strings.Join(why, "; "),
		Object: model.Object{Kind: "server", Name: s.Database, Database: s.Database},
		Evidence: []model.Evidence{
			ev("sessions on CPU (active, no wait event), average over the sampled time", q.onCPU, ""),
			ev("sessions on CPU at the peak", float64(q.peak), ""),
			ev("samples with more sessions on CPU than cores", float64(q.ticksOver), ""),
			ev("share of the sampled time with more sessions on CPU than cores", 100*q.overShare, "%"),
			ev("active sessions waiting (lock, I/O, LWLock, client), average: not counted", q.waiting, ""),
			ev("server cores", float64(cores), ""),
			ev("open connections, average", avgTotal, ""),
			ev("max_connections", float64(maxConn), ""),
			ev("new sessions per second", churn, ""),
		},
		Impact:       model.Impact{Summary: fmt.Sprintf("past about %d working sessions a %d-core server only queues them: each statement takes longer, clients time out and retry, and the retries add load (the cascade the UK dashboard went through)", pool, cores)},
		Fix:          model.Fix{Summary: fmt.Sprintf("put a pool in front (PgBouncer in transaction mode, or the application's pool) sized to about %d server connections (%s) with clients queueing in the pool; reuse connections instead of opening one per request; make the statements cheaper (see the other findings) before adding servers", pool, poolBasis(pool, cores))},
		Verification: j.verification,
		Docs:         docsPath(ConnectionPressureID),
	}
	if h.isHeld(maxConn) || refused > 0 {
		pool = h.shape(&f, s, refused, pool, cores, ticks)
	}
	// The replay on a twin: the clients as they ran, directly (or a new
	// session per request when they churned), against the same clients
	// through a pool of the proposed size (held sessions have their own,
	// above).
	if !h.isHeld(maxConn) && clients > pool {
		if f.Experiment = concurrencyExperiment(s, s.Database, clients, 0, pool, cores, churn >= churnPerSecond); f.Experiment == nil && f.Verification.Status == model.NotRun {
			f.Verification.Reason += "; none of the sampled statements can be replayed on a twin"
		}
	}
	if q.coresGot > 0 {
		f.Evidence = append(f.Evidence, ev("cores the sessions got (CPU time of their processes)", q.coresGot, ""),
			ev("wall time per unit of CPU time of the sessions on CPU", j.stretch, "x"))
	}
	behindPool(s, &f, q, pool, cores)
	return []model.Finding{f}, nil
}

// behindPool makes a connection-pressure finding pool-saturation's when
// the clients already go through PgBouncer and queue in its pool: the
// sessions the server runs are the pool's server connections, and what to
// change is the pool (its size, the statements that hold it). One
// problem, pool-saturation's, which measures the pool itself. When more
// sessions worked than the pool holds server connections, others connect
// directly (or through another pool) and the run queue is the server's
// own problem, so the finding stands.
func behindPool(s *model.Snapshot, f *model.Finding, q runQueue, pool, cores int) {
	k, a := saturatedPool(s)
	if a == nil {
		return
	}
	size := a.pool.SvActive + a.pool.SvUsed + a.pool.SvIdle
	if q.onCPU > float64(size)+0.5 {
		return
	}
	f.Severity = model.Info
	f.Title += fmt.Sprintf(" (the clients queue in PgBouncer's pool %s: see pool-saturation)", k)
	f.Fix = model.Fix{Summary: fmt.Sprintf("the clients already go through PgBouncer: its pool (%d server connections) is what the server runs; size it to about %d (%s) and make the statements that hold it cheaper (pool-saturation)", size, pool, poolBasis(pool, cores))}
	f.Experiment = nil
	f.Verification = model.NotRunBecause("the server's sessions are PgBouncer's server connections, whose queue pool-saturation's finding measures")
}

// saturatedPool is a PgBouncer pool of the checked database whose clients
// waited while every server connection was busy, as pool-saturation
// judges it; nil when none was sampled.
func saturatedPool(s *model.Snapshot) (string, *poolWindow) {
	if s.Sampling == nil || s.Sampling.PgBouncer == "" {
		return "", nil
	}
	pools, order := poolsOverWindow(s.Sampling.Pools)
	for _, k := range order {
		if a := pools[k]; a.full >= stallMinSamples && a.pool.Database == s.Database {
			return k, a
		}
	}
	return "", nil
}

// openAndChurn are the connections open on average over the samples and
// the new sessions per second over the window (0 without session
// counters).
func openAndChurn(s *model.Snapshot) (avgTotal, churn float64) {
	total := 0
	for _, smp := range s.Sampling.Samples {
		total += len(smp.Backends)
	}
	if s.Sampling.Seconds > 0 {
		churn = float64(s.Sampling.Delta.Sessions) / s.Sampling.Seconds
	}
	return float64(total) / float64(len(s.Sampling.Samples)), churn
}

// queueVerdict is what the run queue says: why it is a finding (nothing
// when it is not), how severe, how it was measured, and the stretch.
type queueVerdict struct {
	why          []string
	severity     model.Severity
	verification model.Verification
	stretch      float64
}

// judgeRunQueue decides whether the sessions on CPU form a real queue
// that slows each statement: measured from their processes' CPU time, or
// bounded by the known cores; with guessed cores it only informs.
func judgeRunQueue(s *model.Snapshot, q runQueue, cores int) queueVerdict {
	v := queueVerdict{verification: model.NotRunBecause("observed while sampling; a lab scenario measures goodput at both client counts")}
	if q.onCPU <= float64(cores) || q.overShare < 0.5 {
		return v
	}
	queue := fmt.Sprintf("%.1f sessions were on CPU on average (%d at the peak) on %d cores", q.onCPU, q.peak, cores)
	var why, how string
	switch {
	case q.coresGot > 0:
		v.stretch = q.onCPU / q.coresGot
		why = fmt.Sprintf("%s and got %.1f cores between them: each statement took %.1fx its CPU time", queue, q.coresGot, v.stretch)
		how = fmt.Sprintf("measured while sampling: %.1f sessions wanted a core and their processes got %.1f cores (CPU time in /proc)", q.onCPU, q.coresGot)
	case !s.CoresGuessed:
		// The backends' CPU time could not be read (a server in a
		// container, on another host), but the cores are known: N
		// sessions runnable on C cores get at most C/N of a core each.
		v.stretch = q.onCPU / float64(cores)
		why = fmt.Sprintf("%s: each got at most %.2f of a core, so each statement took at least %.1fx its CPU time (the backends' CPU time was not readable from here)", queue, 1/v.stretch, v.stretch)
		how = fmt.Sprintf("counted while sampling: %.1f sessions on CPU on %d cores", q.onCPU, cores)
	case q.onCPU > activePerCore*float64(cores):
		// A remote server whose cores are a guess: the queue is counted,
		// the slowdown is not known, so it is not a warning.
		v.why = []string{queue + "; the server's cores are a guess (pass --server-cores) and how much each session got was not measured"}
		return v
	default:
		return v
	}
	if v.stretch < stretchWarn {
		return v
	}
	v.why, v.severity = []string{why}, model.Warning
	if v.stretch >= stretchCritical {
		v.severity = model.Critical
	}
	v.verification = model.NotRunBecause(how + "; a lab scenario measures goodput at both client counts")
	return v
}

// PoolSaturationID is the rule id.
const PoolSaturationID = "pool-saturation"

// poolSaturation finds PgBouncer pools whose clients queue for a server
// connection while every one of them is busy: the pool is the bottleneck,
// and what keeps its connections busy (the slowest statements) is what to
// fix before the pool size.
func poolSaturation(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if s.Sampling != nil && s.Sampling.PgBouncer == "" && s.Sampling.BouncerError != "" {
		return nil, []model.Skip{{Rule: PoolSaturationID, Reason: "PgBouncer was not sampled: " + s.Sampling.BouncerError,
			Fix: "give --pgbouncer the admin console: postgres://USER@HOST:6432/pgbouncer with USER in admin_users or stats_users"}}
	}
	if s.Sampling == nil || s.Sampling.PgBouncer == "" {
		return nil, []model.Skip{{Rule: PoolSaturationID, Reason: "no PgBouncer was sampled", Fix: "pass --pgbouncer with the admin console's DSN when clients go through PgBouncer"}}
	}
	pools, order := poolsOverWindow(s.Sampling.Pools)
	var top *model.Statement
	if len(s.Statements) > 0 {
		top = &s.Statements[0]
	}
	var out []model.Finding
	for _, k := range order {
		a := pools[k]
		if a.full < stallMinSamples {
			continue
		}
		sev := model.Warning
		if a.maxWaitMS >= 1000 {
			sev = model.Critical
		}
		f := model.Finding{
			Rule: PoolSaturationID, Severity: sev,
			Title: fmt.Sprintf("PgBouncer pool %s: up to %d clients waited for a server connection while all %d were busy (longest wait %.0f ms)",
				k, a.maxWaiting, a.busy, a.maxWaitMS),
			Object: model.Object{Kind: "pool", Name: k, Database: a.pool.Database},
			Evidence: []model.Evidence{
				ev("samples with clients waiting and no idle server connection", float64(a.full), ""),
				ev("clients waiting, at most", float64(a.maxWaiting), ""),
				ev("longest wait (maxwait)", a.maxWaitMS, "ms"),
				ev("server connections in use while clients waited", float64(a.busy), ""),
			},
			Impact:       model.Impact{Summary: "requests queue in the pool before they reach PostgreSQL: client-side latency that no statement timing shows"},
			Fix:          model.Fix{Summary: "make the statements that hold the pool's connections cheaper first (they are what the queue waits for); then size the pool to the server's cores, not to the clients; keep transactions short in transaction mode"},
			Verification: model.NotRunBecause("observed in PgBouncer's SHOW POOLS while sampling"),
			Docs:         docsPath(PoolSaturationID),
		}
		if a.pool.Mode != "" {
			f.Evidence = append(f.Evidence, model.Evidence{Label: "pool mode: " + a.pool.Mode, Value: 1, Fact: true})
		}
		poolSizeExperiment(s, &f, a)
		for _, st := range s.Sampling.BouncerStats {
			if st.Database == a.pool.Database && st.Transactions > 0 {
				f.Evidence = append(f.Evidence, ev("mean wait for a server connection per transaction (SHOW STATS)", st.WaitMS/float64(st.Transactions), "ms"),
					ev("transactions served in the window", float64(st.Transactions), ""))
			}
		}
		if top != nil {
			f.Impact.Summary += fmt.Sprintf("; the statement with the most time is %q (mean %.1f ms over %d calls%s): see its findings",
				printable.Shorten(top.Query, 80), top.MeanExecMS(), top.Calls, jitNote(top))
		}
		out = append(out, f)
	}
	return out, nil
}

// poolWindow is one PgBouncer pool over the sampling window.
type poolWindow struct {
	pool               model.Pool // as last seen
	waitingTicks, full int        // ticks with clients waiting; and no idle server connection
	// busy is the most server connections in use while clients waited
	// with none idle: the pool's real size (the last tick may be after
	// the queue drained).
	busy                 int
	maxWaiting           int
	maxClients           int // clients active and waiting, at most
	maxWaitMS, firstWait float64
}

// poolsOverWindow folds SHOW POOLS' ticks by database/user pair, in the
// order the pools first appeared.
func poolsOverWindow(ticks []model.PoolSample) (map[string]*poolWindow, []string) {
	pools := map[string]*poolWindow{}
	var order []string
	for i, ps := range ticks {
		for _, p := range ps.Pools {
			k := p.Database + "/" + p.User
			a := pools[k]
			if a == nil {
				a = &poolWindow{}
				pools[k] = a
				order = append(order, k)
			}
			a.pool = p
			if p.ClWaiting > 0 {
				a.waitingTicks++
				if p.SvIdle == 0 {
					a.full++
					a.busy = max(a.busy, p.SvActive+p.SvUsed)
				}
			}
			a.maxWaiting = max(a.maxWaiting, p.ClWaiting)
			a.maxClients = max(a.maxClients, p.ClActive+p.ClWaiting)
			if i == 0 {
				a.firstWait = p.MaxWaitMS
			}
			a.maxWaitMS = math.Max(a.maxWaitMS, p.MaxWaitMS)
		}
	}
	return pools, order
}

// jitNote says how much of a statement's time JIT took, when it is a lot.
func jitNote(st *model.Statement) string {
	if st.TotalExecMS > 0 && st.JIT.TotalMS() >= 0.3*st.TotalExecMS {
		return fmt.Sprintf(", %.0f%% of it JIT compilation (jit-overhead)", 100*st.JIT.TotalMS()/st.TotalExecMS)
	}
	return ""
}

// sessionObject names a session by its pid and what it ran; the
// fingerprint of its statement, not its pid, is what names it from one
// run to the next.
func sessionObject(s *model.Snapshot, pid int, b model.Backend) model.Object {
	o := model.Object{Kind: "session", Name: fmt.Sprintf("pid %d: %s", pid, printable.Shorten(s.Shown(b.Query), 80)), Role: b.User, Database: s.Database}
	if strings.TrimSpace(b.Query) != "" {
		o.Fingerprint, _ = sqlparse.Fingerprint(b.Query)
	}
	return o
}
