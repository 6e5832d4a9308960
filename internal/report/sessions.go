package report

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// sessionsText is the text report's section on the sampled sessions.
func sessionsText(b *strings.Builder, s *model.Sessions) {
	if s == nil {
		return
	}
	fmt.Fprintf(b, "\n== SESSIONS (sampled %d times over %.1f s; the sampler's own queries took %.0f ms) ==\n", s.Ticks, s.Seconds, s.OverheadMS)
	if s.BackedOff {
		b.WriteString("  the server answered slowly: the sampler slowed its ticks\n")
	}
	if s.Hidden != "" {
		fmt.Fprintf(b, "  %s\n", safe(s.Hidden))
	}
	if len(s.ByWait) == 0 {
		b.WriteString("  no session was active while sampled\n")
	}
	for i, l := range s.ByWait {
		if i == 5 {
			break
		}
		fmt.Fprintf(b, "  %-32s %5.2f average active sessions\n", safe(l.Key), l.AAS)
	}
	for i, l := range s.ByQuery {
		if i == 3 {
			break
		}
		fmt.Fprintf(b, "  %5.2f  %s\n", l.AAS, safe(l.Key))
	}
	for i, t := range s.Longest {
		if i == 3 {
			break
		}
		fmt.Fprintf(b, "  transaction open %.1f s: pid %d %s, %s\n", t.XactMS/1000, t.PID, safe(t.State), safe(printable.Cut(t.Query, 80)))
	}
	if s.PgBouncer != "" {
		fmt.Fprintf(b, "  %s sampled with them", safe(s.PgBouncer))
		for _, st := range s.BouncerStats {
			if st.Transactions > 0 {
				fmt.Fprintf(b, "; %s: %d transactions, %.1f ms mean wait for a server connection", safe(st.Database), st.Transactions, st.WaitMS/float64(st.Transactions))
			}
		}
		b.WriteString("\n")
	}
	for _, e := range s.Blocking {
		if len(e.BlockedBy) == 0 {
			fmt.Fprintf(b, "  blocking at the worst moment: pid %d (%s) %s\n", e.PID, safe(e.State), safe(e.Query))
		}
	}
	for _, e := range s.Blocking {
		if len(e.BlockedBy) > 0 {
			fmt.Fprintf(b, "    pid %d waits for %v: %s\n", e.PID, e.BlockedBy, safe(e.Query))
		}
	}
	if c := s.BouncerClients; c != nil {
		fmt.Fprintf(b, "  PgBouncer clients at the end: %d active, %d waiting (longest %.0f ms), %d idle\n", c.Active, c.Waiting, c.LongestWaitMS, c.Idle)
	}
	if s.BouncerError != "" {
		fmt.Fprintf(b, "  PgBouncer: %s\n", safe(s.BouncerError))
	}
	d := s.Delta
	fmt.Fprintf(b, "  over the window: %d new sessions, %d abandoned, %d commits, %d rollbacks, %d deadlocks\n",
		d.Sessions, d.SessionsAbandoned, d.Commits, d.Rollbacks, d.Deadlocks)
}
