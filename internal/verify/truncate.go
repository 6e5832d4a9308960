package verify

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// The truncation experiment's table: truncateHead rows that stay, then
// truncateTail rows deleted, which leave the end of the file empty (about
// 3,700 pages of 8 kB, a stretch a truncating VACUUM takes in one or two
// holds of its lock). Its autovacuum is off, so that only the
// experiment's VACUUM runs on it.
const (
	truncateTable      = "pgmedic_truncate_probe"
	truncateHead       = 20000
	truncateTail       = 400000
	truncateMaxReaders = 8
	// truncateLeadIn is how long the reads run before and after VACUUM.
	truncateLeadIn = 300 * time.Millisecond
)

// truncateWaits proves a truncation's stalls where pgmedic may write (a
// twin, a lab database): sessions read a table with an empty end while
// VACUUM (TRUNCATE false) cleans it, as vacuum_truncate = false would
// leave it, and then while VACUUM truncates that end, as autovacuum did on
// the target. A further session counts, every few milliseconds, the
// sessions waiting for the table's lock. VACUUM without truncation takes
// SHARE UPDATE EXCLUSIVE, which no read or write waits for; truncating
// takes ACCESS EXCLUSIVE, which every one does. The table is pgmedic's
// own: the waits are the lock's, whatever the statement that reads.
func (e *Engine) truncateWaits(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil {
		f.Verification = model.NotRunBecause("reading a table while VACUUM truncates it needs concurrent sessions and a table of pgmedic's, which it does not make on a target: check --twin runs it on a twin")
		return
	}
	readers := min(max(exp.Clients, 4), truncateMaxReaders)
	conns, closeAll, err := e.openWorkers(ctx, 1)
	defer closeAll()
	if err != nil {
		f.Verification = model.NotRunBecause("opening sessions on the twin failed: " + envelope.Message(err))
		return
	}
	admin := conns[0]
	defer admin.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+truncateTable)
	if err := truncateSetup(ctx, admin); err != nil {
		f.Verification = model.NotRunBecause("making the table with an empty end on the twin failed: " + envelope.Message(err))
		return
	}
	var side [2]truncateSide
	for i, truncate := range []bool{false, true} {
		if side[i], err = e.truncateSide(ctx, admin, readers, truncate); err != nil {
			f.Verification = model.NotRunBecause("the VACUUM with reads on the twin failed: " + envelope.Message(err))
			return
		}
	}
	fixed, asIs := side[0], side[1]
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "sessions seen waiting for the table's lock while VACUUM truncated (reproduction)", Value: float64(asIs.waits)},
		model.Evidence{Label: "the same while VACUUM (TRUNCATE false) ran (reproduction)", Value: float64(fixed.waits)},
		model.Evidence{Label: "longest read while VACUUM truncated (reproduction)", Value: asIs.longest, Unit: "ms"},
		model.Evidence{Label: "longest read while VACUUM (TRUNCATE false) ran (reproduction)", Value: fixed.longest, Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("reproduced on a table of pgmedic's (%d rows, then %d deleted from its end): %d sessions read it in a loop while VACUUM (TRUNCATE false) ran (%s, %d reads, %d polls of pg_locks), then while VACUUM truncated its empty end from %d to %d pages (%s, %d reads, %d polls)",
			truncateHead+truncateTail, truncateTail, readers, printable.MS(fixed.tookMS), fixed.reads, fixed.polls, asIs.pagesBefore, asIs.pagesAfter, printable.MS(asIs.tookMS), asIs.reads, asIs.polls),
		Before: &model.Measure{Value: float64(asIs.waits), Unit: "sessions seen waiting, VACUUM truncating"},
		After:  &model.Measure{Value: float64(fixed.waits), Unit: "sessions seen waiting, VACUUM (TRUNCATE false)"}}
	switch {
	case asIs.pagesAfter >= asIs.pagesBefore:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("VACUUM did not truncate the table here (%d pages before and after): the reads queued for nothing", asIs.pagesBefore)
		f.Severity = model.Info
	case asIs.waits > fixed.waits:
		f.Verification.Status = model.Confirmed
	default:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("no read was seen waiting behind the truncation here (%d against %d): its holds of the lock were shorter than a poll, or no read came during them", asIs.waits, fixed.waits)
		f.Severity = model.Info
	}
}

// truncateSide is one VACUUM with the reads around it.
type truncateSide struct {
	waits, polls, reads     int
	longest, tookMS         float64
	pagesBefore, pagesAfter int64
}

// truncateSetup makes the table and empties its end.
func truncateSetup(ctx context.Context, c Session) error {
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + truncateTable,
		"CREATE TABLE " + truncateTable + " (id bigint PRIMARY KEY, payload text NOT NULL) WITH (autovacuum_enabled = off)",
		fmt.Sprintf("INSERT INTO %s SELECT g, md5(g::text) FROM generate_series(1, %d) g", truncateTable, truncateHead+truncateTail),
		fmt.Sprintf("DELETE FROM %s WHERE id > %d", truncateTable, truncateHead),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// truncateSide runs one VACUUM of the table, truncating its end or not,
// with n readers reading it and a poller counting the sessions that
// wait for its lock. The first side (TRUNCATE false) also removes the deleted
// rows, so the second only truncates: the lock it takes is the only
// difference between them.
func (e *Engine) truncateSide(ctx context.Context, admin Session, n int, truncate bool) (truncateSide, error) {
	var s truncateSide
	// Sessions of their own on each side: a replayed session's loop runs
	// to the end of its recording.
	conns, closeAll, err := e.openWorkers(ctx, 1+n)
	defer closeAll()
	if err != nil {
		return s, err
	}
	poller, readers := conns[0], conns[1:]
	pages := "SELECT pg_relation_size('" + truncateTable + "') / 8192"
	if err := admin.QueryRow(ctx, pages).Scan(&s.pagesBefore); err != nil {
		return s, err
	}
	read := fmt.Sprintf("SELECT payload FROM %s WHERE id = %d", truncateTable, truncateHead/2)
	finishReads := e.loopTimed(ctx, readers, func(ctx context.Context, c Session) (float64, error) { return execMS(ctx, c, read) })
	waiting := "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND relation = '" + truncateTable + "'::regclass AND NOT granted"
	finishPolls := e.loopTimed(ctx, []Session{poller}, func(ctx context.Context, c Session) (float64, error) {
		var n int
		err := c.QueryRow(ctx, waiting).Scan(&n)
		return float64(n), err
	})
	e.sleep(ctx, truncateLeadIn)
	vacuum := "VACUUM (TRUNCATE false) " + truncateTable
	if truncate {
		vacuum = "VACUUM (TRUNCATE true) " + truncateTable
	}
	start := e.now()
	_, vacErr := admin.Exec(ctx, vacuum)
	s.tookMS = float64(e.now().Sub(start).Microseconds()) / 1000
	e.sleep(ctx, truncateLeadIn)
	polls, pollErr := finishPolls()
	lat, readErr := finishReads()
	for _, err := range []error{vacErr, pollErr, readErr} {
		if err != nil {
			return s, err
		}
	}
	for _, n := range polls {
		s.waits += int(n)
	}
	s.polls, s.reads = len(polls), len(lat)
	if len(lat) > 0 {
		s.longest = model.Round(slices.Max(lat), 1)
	}
	return s, admin.QueryRow(ctx, pages).Scan(&s.pagesAfter)
}
