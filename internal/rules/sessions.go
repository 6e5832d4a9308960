package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
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
