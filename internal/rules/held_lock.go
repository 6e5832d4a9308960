package rules

import (
	"maps"
	"slices"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// heldLockExperiment is the reproduction of sessions waiting behind a
// transaction its client left idle: on a twin, a session does what the
// head did (its last statement, when it touches the waiters' table and
// can be replayed; otherwise the waiters' own statement, which takes the
// very locks they wait for) and sits idle, while sessions run a waiter's
// statement; then the same with idle_in_transaction_session_timeout on
// the head's session. nil when no waiter's statement can be replayed.
func heldLockExperiment(s *model.Snapshot, head model.Backend, waiters map[int]bool) *model.Experiment {
	if exp := changeBehind(s, head, waiters); exp != nil {
		return exp
	}
	for _, pid := range slices.Sorted(maps.Keys(waiters)) {
		w, ok := lastSeen(s, pid)
		if !ok || w.WaitType != "Lock" {
			continue
		}
		st, table, ok := replayable(s, w.Query)
		if !ok {
			continue
		}
		exp := &model.Experiment{Kind: model.ExpHeldLock, Table: table, Waiter: w.Query, QueryID: w.QueryID, Stmt: st}
		// A wait for the relation itself (not a row's transaction): the
		// head held a table lock, which LOCK TABLE takes again.
		if w.Wait == "relation" {
			exp.HeadLock = heldMode(head.Locks, table.Name)
		}
		if _, ht, ok := replayable(s, head.Query); ok && ht == table {
			exp.Query = head.Query
		}
		return exp
	}
	return nil
}

// changeBehind is the reproduction of a chain with a schema change in its
// middle: the idle head holds a lock the change needs, the change waits
// for it, and the application's statements queue behind the change
// (they would not wait for the head alone). The reproduction queues the
// change the same way; nil when no change waits directly for the head,
// or nothing behind it can be replayed.
func changeBehind(s *model.Snapshot, head model.Backend, waiters map[int]bool) *model.Experiment {
	for _, pid := range slices.Sorted(maps.Keys(waiters)) {
		c, ok := lastSeen(s, pid)
		if !ok || c.WaitType != "Lock" || !slices.Contains(c.BlockedBy, head.PID) {
			continue
		}
		cst, err := sqlparse.Parse(c.Query)
		if err != nil {
			continue
		}
		d := cst.DDL()
		if d == nil || d.Concurrently {
			continue
		}
		mode := heldMode(head.Locks, d.Table.Name)
		if mode == "" {
			mode = "ACCESS SHARE"
		}
		for _, wp := range slices.Sorted(maps.Keys(waiters)) {
			w, ok := lastSeen(s, wp)
			if !ok || w.PID == c.PID || w.WaitType != "Lock" {
				continue
			}
			if st, table, ok := replayable(s, w.Query); ok {
				return &model.Experiment{Kind: model.ExpHeldLock, Table: table, Waiter: w.Query, QueryID: w.QueryID, Stmt: st,
					HeadLock: mode, Change: c.Query}
			}
		}
	}
	return nil
}

// replayable says whether a statement seen in pg_stat_activity can be
// run on a twin in a transaction that is rolled back: a SELECT, INSERT,
// UPDATE or DELETE on a table of the snapshot that calls nothing acting
// outside the transaction. It returns the table it reads or writes first.
func replayable(s *model.Snapshot, q string) (*sqlparse.Statement, model.RelRef, bool) {
	st, err := sqlparse.Parse(q)
	if err != nil || st.SideEffect() != "" || !dml(st) {
		return nil, model.RelRef{}, false
	}
	for _, rel := range st.Relations() {
		if t := s.Table(model.RelRef{Schema: rel.Schema, Name: rel.Name}); t != nil {
			return st, model.RelRef{Schema: t.Schema, Name: t.Name}, true
		}
	}
	return nil, model.RelRef{}, false
}

// lastSeen is a session's latest sample.
func lastSeen(s *model.Snapshot, pid int) (model.Backend, bool) {
	for i := len(s.Sampling.Samples) - 1; i >= 0; i-- {
		for _, b := range s.Sampling.Samples[i].Backends {
			if b.PID == pid {
				return b, true
			}
		}
	}
	return model.Backend{}, false
}

// dml says whether a statement is a SELECT, INSERT, UPDATE or DELETE:
// what a reproduction or a replay on a twin runs (a write in a transaction
// it rolls back).
func dml(st *sqlparse.Statement) bool {
	switch st.Shape().Command {
	case "SELECT", "INSERT", "UPDATE", "DELETE":
		return true
	}
	return false
}
