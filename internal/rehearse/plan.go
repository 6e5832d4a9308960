package rehearse

import (
	"fmt"
	"time"

	"github.com/pgmedic/pgmedic/internal/migration"
)

// Written is the migration as written: every statement once, in order,
// transaction control included.
func Written(m *migration.Migration) Plan {
	p := Plan{Name: "as written"}
	for _, s := range m.Statements {
		p.Steps = append(p.Steps, migration.Step{SQL: s.SQL, Of: s.N, Written: true})
	}
	return p
}

// NeedsSafer says whether the migration has a statement whose safe form
// differs from it: one that stops the application's reads or writes, or
// rewrites or scans its table, or that the rehearsal saw queue the
// application.
func NeedsSafer(m *migration.Migration, written *Run) bool {
	for _, s := range m.Statements {
		if s.Risky {
			return true
		}
	}
	return written != nil && written.Worst() == Queued
}

// Safer is the migration's safe form (migration.Safer for each
// statement), with a lock_timeout and retry schedule chosen from the run
// as written:
//   - lock_timeout is twice the application's p99 before the migration
//     (a session that arrives behind a waiting attempt waits at most that
//     long more), at least 20 ms, and at most half of maxWait;
//   - the first pause is twice the lock_timeout, doubling to 2 s, so the
//     attempts leave the queue room to drain between them;
//   - attempts go on for three times the longest wait for a lock the
//     statements had as written (the transaction in the way, as the
//     workload runs it), at least 10 s and at most 2 min.
//
// facts reads the database the migration runs on (the twin's), for the
// steps that need the catalog (a column's type change through a new
// column); nil reads none.
func Safer(m *migration.Migration, written *Run, maxWait time.Duration, facts migration.Facts) Plan {
	rewrote := map[int]bool{}
	longest := 0.0
	base := 0.0
	if written != nil {
		for _, s := range written.Steps {
			rewrote[s.Of] = rewrote[s.Of] || s.Rewrote
			longest = max(longest, s.WaitedMS, s.QueuedMaxMS)
		}
		base = written.Before.P99
	}
	p := Plan{Name: "safe form"}
	for _, s := range m.Statements {
		p.Steps = append(p.Steps, migration.SaferWith(s, rewrote[s.N], facts)...)
	}
	lt := time.Duration(2*base*1000) * time.Microsecond
	if written == nil || written.Before.Calls == 0 {
		lt = maxWait / 2
	}
	lt = min(max(lt, 20*time.Millisecond), max(maxWait/2, 20*time.Millisecond)).Round(10 * time.Millisecond)
	p.LockTimeout, p.Pause = lt, 2*lt
	p.Budget = min(max(3*time.Duration(longest)*time.Millisecond, 10*time.Second), 2*time.Minute).Round(time.Second)
	if written != nil && written.Before.Calls > 0 {
		p.Why = fmt.Sprintf("lock_timeout %s: twice the application's p99 before the migration (%.1f ms), between 20 ms and half of --max-wait (%s); a pause of %s between attempts, doubling to 2 s; attempts for up to %s (three times the longest lock wait as written, %.0f ms, at least 10 s)",
			lt, base, maxWait, p.Pause, p.Budget, longest)
	} else {
		p.Why = fmt.Sprintf("lock_timeout %s: half of --max-wait (no traffic was captured to measure the application's latency); a pause of %s between attempts, doubling to 2 s; attempts for up to %s",
			lt, p.Pause, p.Budget)
	}
	return p
}
