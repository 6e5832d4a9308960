package rules

import (
	"fmt"

	"github.com/pgmedic/pgmedic/internal/model"
)

// FromLogEvents judges what a server log counted with the session rules'
// ids: connection storms and "too many clients" (connection-pressure),
// lock waits and deadlocks (lock-contention), and clients that went away
// while duplicate-key errors followed timeouts (client-stall: retries of
// work the database had done).
func FromLogEvents(le model.LogEvents, database string) []model.Finding {
	var out []model.Finding
	obj := model.Object{Kind: "log", Name: database, Database: database}
	logged := model.NotRunBecause("counted in the server log")
	if le.TooManyClients > 0 || float64(le.PeakPerMinute)/60 >= churnPerSecond {
		sev := model.Warning
		title := fmt.Sprintf("connection storm: %d connections in the busiest minute (%.0f per second)", le.PeakPerMinute, float64(le.PeakPerMinute)/60)
		if le.TooManyClients > 0 {
			sev = model.Critical
			title = fmt.Sprintf("the server refused %d connections (too many clients already); %d in the busiest minute", le.TooManyClients, le.PeakPerMinute)
		}
		out = append(out, model.Finding{Rule: ConnectionPressureID, Severity: sev, Title: title, Object: obj,
			Evidence:     []model.Evidence{ev2("connections", le.Connections), ev2("connections in the busiest minute", le.PeakPerMinute), ev2("refused: too many clients", le.TooManyClients)},
			Impact:       model.Impact{Summary: "each new connection costs the server a process; a storm of them queues work and exhausts max_connections"},
			Fix:          model.Fix{Summary: "put a pool in front (PgBouncer in transaction mode, or the application's pool) and reuse connections; find what opens them (a retry loop, an autoscaler)"},
			Verification: logged, Docs: docsPath(ConnectionPressureID)})
	}
	if le.Deadlocks > 0 || (le.LockWaits > 0 && le.LockWaitMS >= 1000) {
		out = append(out, model.Finding{Rule: LockContentionID, Severity: model.Warning,
			Title:  fmt.Sprintf("%d lock waits past deadlock_timeout and %d deadlocks in the log", le.LockWaits, le.Deadlocks),
			Object: obj,
			Evidence: []model.Evidence{ev2("lock waits logged (log_lock_waits)", le.LockWaits), ev("lock wait reported", le.LockWaitMS, "ms"),
				ev2("deadlocks", le.Deadlocks)},
			Impact:       model.Impact{Summary: "sessions waited for locks held by others; the DETAIL lines name the processes holding them"},
			Fix:          model.Fix{Summary: "shorten the transactions that hold the locks (commit before other work), take row locks in a consistent order, use FOR UPDATE SKIP LOCKED for queues"},
			Verification: logged, Docs: docsPath(LockContentionID)})
	}
	if le.ClientsLost > 0 && le.DuplicateKeys > 0 && le.StatementTimeouts+le.CancelledByClients > 0 {
		out = append(out, model.Finding{Rule: ClientStallID, Severity: model.Warning,
			Title: fmt.Sprintf("clients went away %d times and %d duplicate-key errors followed %d timeouts and cancels: retries of work the database had done",
				le.ClientsLost, le.DuplicateKeys, le.StatementTimeouts+le.CancelledByClients),
			Object: obj,
			Evidence: []model.Evidence{ev2("client connections lost", le.ClientsLost), ev2("duplicate-key errors", le.DuplicateKeys),
				ev2("statement timeouts", le.StatementTimeouts), ev2("statements cancelled by clients", le.CancelledByClients)},
			Impact:       model.Impact{Summary: "a client that times out and retries a write the database already did duplicates it; with a unique key, the retry fails instead"},
			Fix:          model.Fix{Summary: "keep statement_timeout below the client's timeout, make retried writes idempotent (ON CONFLICT DO NOTHING with a key), retry with backoff and a budget"},
			Verification: logged, Docs: docsPath(ClientStallID)})
	}
	return out
}

func ev2(label string, n int64) model.Evidence {
	return model.Evidence{Label: label, Value: float64(n)}
}
