package rules

import (
	"fmt"
	"math"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// A backend sending a large result waits on ClientWrite whenever the
// socket's buffers are full: for a client reading as fast as it can that
// is a few samples here and there, and for a client that does work per
// row (writes a CSV, renders a page) it is nearly every sample, yet the
// client is reading all along. What tells a client that stopped reading
// (a blocked event loop) from one that reads at its own pace is progress:
// a backend whose client reads wakes up to send the next rows and uses
// CPU; one whose client stopped sits in a single send() and uses none.
const (
	// writeStretchMinMS: a stretch of ClientWrite shorter than this is
	// a full buffer, not a stall.
	writeStretchMinMS = 1000
	// writeShareMin: the statement waited for its client in at least
	// this share of the samples it was seen in; below it the server, not
	// the client, was the slow side.
	writeShareMin = 0.5
	// writeIdleCPUMS: CPU the backend may use over a stretch and still
	// count as making no progress (reading its clock, a signal).
	writeIdleCPUMS = 0.5
)

// sending is what the samples say about one session's results going to
// its client: its longest unbroken stretch of ClientWrite within one
// statement, the share of that statement's samples spent there, and the
// CPU its process used over the stretch (cpuKnown for a server on this
// machine).
type sending struct {
	stretchMS   float64
	samples     int // ClientWrite samples of that statement
	stmtSamples int // samples of that statement, any state
	cpuKnown    bool
	cpuMS       float64
	// stoppedMS is the longest part of a stretch over which the backend
	// used no CPU: the client read nothing (cpuKnown only).
	stoppedMS float64
	query     string
}

// share is the statement's samples spent waiting for the client.
func (w sending) share() float64 {
	if w.stmtSamples == 0 {
		return 0
	}
	return float64(w.samples) / float64(w.stmtSamples)
}

// sendingTo walks the samples of one session in order. A statement's run
// ends when the session leaves the active state, its text changes or it
// has been active for less time than at the previous sample (a new
// statement).
func sendingTo(s *model.Snapshot, pid int) sending {
	var best, run sending
	var first, last, still *model.Backend
	var firstAt, lastAt, stillAt float64 // seconds since the window's start
	var prevState float64
	inStretch := false
	closeStretch := func() {
		if first == nil {
			return
		}
		d := (lastAt - firstAt) * 1000
		cpu, known := last.CPUMS-first.CPUMS, first.CPUMS > 0 && last.CPUMS > 0
		if d > run.stretchMS {
			run.stretchMS, run.cpuMS, run.cpuKnown = d, cpu, known
		}
		first, still, inStretch = nil, nil, false
	}
	endRun := func() {
		closeStretch()
		if run.stretchMS > best.stretchMS || (run.stretchMS == best.stretchMS && run.samples > best.samples) {
			best = run
		}
		best.stoppedMS = max(best.stoppedMS, run.stoppedMS)
		run = sending{}
	}
	start := s.Sampling.Samples[0].At
	for _, smp := range s.Sampling.Samples {
		var b *model.Backend
		for i := range smp.Backends {
			if smp.Backends[i].PID == pid {
				b = &smp.Backends[i]
				break
			}
		}
		if b == nil || b.State != "active" {
			endRun()
			continue
		}
		if run.stmtSamples > 0 && (b.Query != run.query || b.StateMS < prevState) {
			endRun()
		}
		prevState = b.StateMS
		run.query = b.Query
		run.stmtSamples++
		at := smp.At.Sub(start).Seconds()
		if b.Wait != "ClientWrite" {
			closeStretch()
			continue
		}
		run.samples++
		if !inStretch {
			first, firstAt, inStretch = b, at, true
		}
		last, lastAt = b, at
		// The part of the stretch since the backend last used CPU.
		switch {
		case b.CPUMS <= 0:
			still = nil
		case still == nil || b.CPUMS-still.CPUMS > writeIdleCPUMS:
			still, stillAt = b, at
		default:
			run.stoppedMS = max(run.stoppedMS, (at-stillAt)*1000)
		}
	}
	endRun()
	return best
}

// clientStall finds sessions whose time goes to the client: idle in a
// transaction waiting for the client's next command long after the server
// answered (ClientRead), or stuck sending results the client stopped
// reading (ClientWrite). Sessions the server found abandoned and bursts of
// rollbacks over the same window are evidence of the timeouts and retries
// that follow.
func clientStall(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if ok, skip := sampled(s, ClientStallID); !ok {
		return nil, skip
	}
	d := s.Sampling.Delta
	var out []model.Finding
	for pid, x := range sessions(s) {
		b := x.worst
		stalledRead := x.clientRead >= stallMinSamples && b.XactMS >= idleMinMS && b.XactMS >= stallRatio*math.Max(b.LastMS, 0.1)
		var w sending
		if !stalledRead && x.clientWrite >= stallMinSamples {
			w = sendingTo(s, pid)
		}
		stalledWrite := w.stretchMS >= writeStretchMinMS && w.share() >= writeShareMin
		if !stalledRead && !stalledWrite {
			continue
		}
		var title, side string
		sev := model.Warning
		if stalledRead {
			title = fmt.Sprintf("the database answered %s in %.1f ms; the client then kept the transaction open %s before its next command", who(b), b.LastMS, sec(b.XactMS))
			side = "the client: between its statements the session waited for the client (ClientRead) while the transaction stayed open"
		} else {
			title, side, sev = writeStall(b, w, d.SessionsAbandoned)
		}
		verification := model.NotRunBecause(fmt.Sprintf("observed in %d of %d samples: the server's own time against the transaction's. The fix is in the client's code (what it does between statements, how fast it reads results); a twin runs the statements, not the client, so no experiment there stands in for it", x.clientRead+x.clientWrite, len(s.Sampling.Samples)))
		if len(x.waiters) > 0 {
			title += fmt.Sprintf("; %s waited behind it", sessionsWord(len(x.waiters)))
			sev = model.Critical
			if stalledRead && x.idleMS >= idleMinMS && x.idleSamples > 0 {
				// The same session left idle in its transaction with
				// others waiting behind it: one problem, idle-in-
				// transaction's, which reproduces the chain; this names
				// the client's side of it.
				sev = model.Info
				title += " (see idle-in-transaction)"
				verification = model.NotRunBecause("the session is idle-in-transaction's finding, which reproduces the sessions waiting behind it with and without idle_in_transaction_session_timeout; what keeps the client from its next command is in its code")
			}
		}
		evs := []model.Evidence{
			ev("server time of its last statement", b.LastMS, "ms"),
			ev("transaction open", b.XactMS, "ms"),
			ev("samples waiting for the client to send (ClientRead, in a transaction)", float64(x.clientRead), ""),
			ev("samples waiting for the client to read (ClientWrite)", float64(x.clientWrite), ""),
		}
		if stalledWrite {
			evs = append(evs, ev("longest unbroken wait for the client to read", w.stretchMS, "ms"),
				ev("share of the statement's samples waiting for the client to read", 100*w.share(), "%"))
			if w.cpuKnown {
				evs = append(evs, ev("CPU the backend used over that wait (it sends rows when the client reads)", w.cpuMS, "ms"),
					ev("longest part of it with no CPU used: the client read nothing", w.stoppedMS, "ms"))
			}
		}
		evs = append(evs,
			ev("sessions the server found abandoned in the window", float64(d.SessionsAbandoned), ""),
			ev("transactions rolled back in the window", float64(d.Rollbacks), ""),
			ev("transactions committed in the window", float64(d.Commits), ""))
		out = append(out, model.Finding{
			Rule: ClientStallID, Severity: sev, Title: title,
			Object:       sessionObject(s, pid, b),
			Evidence:     evs,
			Impact:       model.Impact{Summary: "the slow side is " + side + ". A client that times out and retries a request the database already did duplicates its work (and its rows, without an idempotency key)"},
			Fix:          stallFix(s, b, stalledRead, math.Max(x.idleMS, b.XactMS-math.Max(b.LastMS, 0)), len(x.waiters) > 0),
			Verification: verification,
			Docs:         docsPath(ClientStallID),
		})
	}
	Sort(out)
	return out, nil
}

// stallFix is what the server can do about a client's stall; the rest is
// in the client's code. A client that stops between the statements of a
// transaction leaves the session idle in it:
// idle_in_transaction_session_timeout ends it, sized as idle-in-
// transaction sizes it from the time the session was seen idle (one
// above it would never fire) and set for the session's own role. A client
// that stops reading leaves its statement running: statement_timeout
// (which fires while the server waits to send) bounds it, and from 14
// client_connection_check_interval notices a client that went away
// while its statement runs.
func stallFix(s *model.Snapshot, b model.Backend, stalledRead bool, idleMS float64, waited bool) model.Fix {
	summary := "find what blocks the client between its statements (a blocked event loop, CPU work, a remote call inside the transaction); keep statement_timeout below the client's own timeout so the server gives up first; make retried writes idempotent (a key with ON CONFLICT DO NOTHING); retry with backoff and a budget"
	if stalledRead && b.User != "" {
		why, sql := idleTimeout(b.User, idleMS, waited)
		return model.Fix{Summary: summary + "; let the server end the transactions such a client leaves open: " + why, SQL: sql}
	}
	if pgversion.Of(s.Server.VersionNum).ClientCheck {
		return model.Fix{Summary: summary + "; let the server notice a client that went away while its statement runs (client_connection_check_interval, PostgreSQL 14 and later on Linux)",
			SQL: "ALTER SYSTEM SET client_connection_check_interval = '10s';\nSELECT pg_reload_conf();"}
	}
	return model.Fix{Summary: summary}
}

// writeStall says what a statement that waited for its client to read
// shows. A backend that used no CPU for a second or more of the stretch
// sent nothing: the client read nothing, or too little to make room in the
// socket's buffers (megabytes on a fast link). One that kept using CPU
// sent rows as the client read them: a client reading a large result at
// its own pace, not a stall. Without the backend's CPU time (a server on
// another host) the two look alike. None of them costs anyone but the
// client while nobody waits behind it, so it is said at info; it is a
// warning when the server found sessions abandoned over the window (the
// timeouts and retries that follow a client that stops reading), and
// critical when sessions waited behind it (the caller raises it).
func writeStall(b model.Backend, w sending, abandoned int64) (title, side string, sev model.Severity) {
	wait := sec(w.stretchMS)
	sev = model.Info
	if abandoned > 0 {
		sev = model.Warning
	}
	switch {
	case w.cpuKnown && w.stoppedMS >= writeStretchMinMS:
		return fmt.Sprintf("%s waited %s for its client to read its results (ClientWrite) and sent nothing for %s", who(b), wait, sec(w.stoppedMS)),
			"the client: the server had the results and the client did not read them (ClientWrite)", sev
	case w.cpuKnown:
		return fmt.Sprintf("%s read its results slower than the server sent them: %s of waiting to send (ClientWrite), the client reading all along", who(b), wait),
			"the client's reading: it kept reading, slower than the server sent (a large result read a row at a time; not a stall)", model.Info
	}
	return fmt.Sprintf("%s waited %s for its client to read the results (ClientWrite); whether the client kept reading is not known from here", who(b), wait),
		"the client: the server had the results and waited for the client to read them (ClientWrite); a client reading slowly and one that stopped look alike without the backend's CPU time (check run on the server's host measures it)", sev
}

// ClientStallID is the stable id of the rule.
const ClientStallID = "client-stall"

// Thresholds of client-stall (see docs/rules/client-stall.md).
const (
	stallMinSamples = 2    // a stall seen in at least this many ticks
	stallRatio      = 10.0 // transaction open at least 10x what the server spent
)

// clientStallLog: clients that went away while duplicate-key errors
// followed timeouts (retries of work the database had done).
func clientStallLog(in LogInput) []model.Finding {
	le := in.Events
	if le.ClientsLost == 0 || le.DuplicateKeys == 0 || le.StatementTimeouts+le.CancelledByClients == 0 {
		return nil
	}
	return []model.Finding{{Rule: ClientStallID, Severity: model.Warning,
		Title: fmt.Sprintf("clients went away %d times and %d duplicate-key errors followed %d timeouts and cancels: retries of work the database had done",
			le.ClientsLost, le.DuplicateKeys, le.StatementTimeouts+le.CancelledByClients),
		Object: logObject(in),
		Evidence: []model.Evidence{ev2("client connections lost", le.ClientsLost), ev2("duplicate-key errors", le.DuplicateKeys),
			ev2("statement timeouts", le.StatementTimeouts), ev2("statements cancelled by clients", le.CancelledByClients)},
		Impact:       model.Impact{Summary: "a client that times out and retries a write the database already did duplicates it; with a unique key, the retry fails instead"},
		Fix:          model.Fix{Summary: "keep statement_timeout below the client's timeout, make retried writes idempotent (ON CONFLICT DO NOTHING with a key), retry with backoff and a budget"},
		Verification: model.NotRunBecause("counted in the server log; the fix is in the client's code (its timeouts and retries), which no experiment on the database stands in for"),
		Docs:         docsPath(ClientStallID)}}
}
