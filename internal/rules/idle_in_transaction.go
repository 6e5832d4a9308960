package rules

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// IdleInTransactionID is the stable id of the rule.
const IdleInTransactionID = "idle-in-transaction"

// Thresholds of idle-in-transaction (see docs/rules/idle-in-transaction.md).
const (
	idleMinMS      = 1000 // idle in a transaction at least this long
	idleCriticalMS = 30000
)

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
// is what the reproduction sets; a session idle without waiters gets the
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
