package rules

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
)

// heldShare is the share of the open connections that must sit idle (no
// transaction open) for them to count as held: connections an
// application keeps open for requests that come now and then.
const heldShare = 0.5

// held is what the samples say about the connections clients kept open:
// at the sample with the most connections, how many there were, how many
// sat idle and for how long since their last statement, and who held
// them; over the window, the most sessions busy (active or in a
// transaction) at once.
type held struct {
	peak, idle   int
	hidden       int // of them, sessions of other roles whose state pgmedic's role may not see
	idleMedianMS float64
	busyPeak     int
	holders      string // the application and role holding most of the idle ones
}

// heldConnections reads the samples: every database's sessions count, as
// they do against max_connections.
func heldConnections(s *model.Snapshot) held {
	var h held
	for _, smp := range s.Sampling.Samples {
		busy := 0
		for _, b := range smp.Backends {
			if b.State == "active" || strings.HasPrefix(b.State, "idle in transaction") {
				busy++
			}
		}
		h.busyPeak = max(h.busyPeak, busy)
		if len(smp.Backends) <= h.peak {
			continue
		}
		h.peak = len(smp.Backends)
		var idle []float64
		by := map[string]int{}
		h.hidden = 0
		for _, b := range smp.Backends {
			if b.State == "" {
				h.hidden++
			}
			if b.State == "idle" {
				idle = append(idle, b.StateMS)
				by[holderOf(b)]++
			}
		}
		slices.Sort(idle)
		h.idle, h.idleMedianMS = len(idle), model.Percentile(idle, 0.5)
		h.holders = ""
		if len(by) > 0 {
			top := slices.MaxFunc(slices.Sorted(maps.Keys(by)), func(a, b string) int { return by[a] - by[b] })
			h.holders = fmt.Sprintf("%s (%d of them)", top, by[top])
		}
	}
	return h
}

// holderOf names who holds a connection: its application and role.
func holderOf(b model.Backend) string {
	var parts []string
	if b.App != "" {
		parts = append(parts, "application "+b.App)
	}
	if b.User != "" {
		parts = append(parts, "role "+b.User)
	}
	if len(parts) == 0 {
		return "sessions pgmedic's role may not see"
	}
	return strings.Join(parts, ", ")
}

// isHeld says whether the connections are held idle near the server's
// limit: at the peak, at least 80% of max_connections were open and at
// least half of them idle.
func (h held) isHeld(maxConn int) bool {
	return maxConn > 0 && float64(h.peak) >= 0.8*float64(maxConn) && float64(h.idle) >= heldShare*float64(h.peak)
}

// clientSlots are the connections max_connections leaves to ordinary
// roles: superuser_reserved_connections, and from 16 on
// reserved_connections, are kept for others.
func clientSlots(s *model.Snapshot) int {
	n := s.Activity.MaxConnections
	for _, name := range []string{"superuser_reserved_connections", "reserved_connections"} {
		if v, err := strconv.Atoi(s.Settings[name].Value); err == nil {
			n -= v
		}
	}
	return max(n, 1)
}

// thinkMS is how long a held client sits idle between its statements: a
// sample lands at a random point of an idle stretch, so the median time
// idle so far is about half a stretch.
func (h held) thinkMS() float64 { return 2 * h.idleMedianMS }

// heldFix is the advice for connections held idle until the server
// refuses new ones: a pooler that keeps the clients' connections and
// lends them a few server connections, sized by what was busy at once.
func heldFix(h held, pool, slots int, refused int64) string {
	clients := h.peak + int(min(refused, int64(h.peak)))
	more := ""
	if refused > 0 {
		more = ", and more were refused"
	}
	busy := fmt.Sprintf("at most %s busy at once while sampling", sessionsWord(h.busyPeak))
	if h.busyPeak == 0 {
		busy = "no session was caught busy while sampling: their statements are short"
	}
	return fmt.Sprintf("put PgBouncer in transaction mode in front of the server and point the clients at it: they keep their connections open to PgBouncer (max_client_conn = %d or more: %d were open at the peak%s), which lends them default_pool_size = %d server connections (%s; max_connections leaves %d to ordinary roles); or give each application instance a pool of its own that closes idle connections, sized so that all instances together stay under that. Find what opens connections and leaves them idle (one per worker or thread, an autoscaler adding instances)",
		2*clients, h.peak, more, pool, busy, slots)
}

// heldExperiment is the replay of held connections on a twin: clients
// that each hold a session, more of them than the server admits, against
// the same clients through a pool.
func heldExperiment(s *model.Snapshot, h held, pool, cores int) *model.Experiment {
	mix := sessionMix(s, s.Database, func(b model.Backend) bool { return b.State == "active" || b.State == "idle" })
	if len(mix) == 0 {
		return nil
	}
	return &model.Experiment{Kind: model.ExpHeldSessions, Mix: mix, Clients: h.peak, Pool: pool, Cores: cores,
		Slots: clientSlots(s), ThinkMS: model.Round(h.thinkMS(), 1), Table: mixTable(s, mix)}
}

// loggedRefusals are the connections the server's log says it refused
// (0 when check read no log).
func loggedRefusals(s *model.Snapshot) int64 {
	if s.Logged == nil {
		return 0
	}
	return s.Logged.TooManyClients
}

// why is what the held connections and the log's refusals add to
// connection-pressure's title, and the severity they give it: any
// refusal is critical, connections held idle near the limit a warning,
// and connections near the limit whose state pgmedic may not see a
// warning that says so.
func (h held) why(maxConn int, avgTotal float64, refused int64) ([]string, model.Severity) {
	var why []string
	sev := model.Info
	if refused > 0 {
		why = append(why, fmt.Sprintf("the server refused %d connections in the log read (SQLSTATE 53300: too many clients, or only reserved slots left)", refused))
		sev = model.Critical
	}
	switch {
	case h.isHeld(maxConn):
		why = append(why, fmt.Sprintf("%d of max_connections=%d connections were open at the peak and %d of them sat idle (a median %s since their last statement), held by %s",
			h.peak, maxConn, h.idle, sec(h.idleMedianMS), h.holders))
		sev = max(sev, model.Warning)
	case maxConn > 0 && avgTotal >= 0.8*float64(maxConn):
		open := fmt.Sprintf("%.0f of max_connections=%d connections were open", avgTotal, maxConn)
		if 2*h.hidden >= h.peak {
			open += fmt.Sprintf(" (%d of them other roles' sessions, whose state pgmedic's role may not see: GRANT pg_read_all_stats shows whether they sat idle)", h.hidden)
		}
		why = append(why, open)
		sev = max(sev, model.Warning)
	}
	return why, sev
}

// shape makes connection-pressure's finding about held connections and
// refusals: their evidence, impact and fix (a pooler and its size), and,
// when the sessions were held idle, the replay of them on a twin. It
// returns the pool size, within the slots left to ordinary roles.
func (h held) shape(f *model.Finding, s *model.Snapshot, refused int64, pool, cores, ticks int) int {
	slots := clientSlots(s)
	pool = min(pool, max(slots-1, 1))
	f.Evidence = append(f.Evidence,
		ev2("connections refused in the log (SQLSTATE 53300)", refused),
		ev("connections open at the peak", float64(h.peak), ""),
		ev("of them idle, outside a transaction", float64(h.idle), ""),
		ev("median time idle since their last statement", h.idleMedianMS, "ms"),
		ev("most sessions busy at once (active or in a transaction)", float64(h.busyPeak), ""),
		ev("connections max_connections leaves to ordinary roles", float64(slots), ""))
	f.Impact.Summary = "every connection a client holds open is a server process and one of max_connections' slots, busy or not: clients that keep theirs idle fill the slots, and past them the server refuses new connections outright (the request fails at once, and clients that retry add to the storm)"
	f.Fix.Summary = heldFix(h, pool, slots, refused)
	if !h.isHeld(s.Activity.MaxConnections) {
		f.Fix.Summary += fmt.Sprintf("; when it happened the refusals were in the log, not in the %d samples: check --sample while it happens measures the pool on a twin", ticks)
		return pool
	}
	if f.Experiment = heldExperiment(s, h, pool, cores); f.Experiment == nil {
		f.Verification = model.NotRunBecause("observed while sampling; none of the statements the held sessions ran can be replayed on a twin")
	} else {
		f.Verification = model.NotRunBecause("observed while sampling")
	}
	return pool
}
