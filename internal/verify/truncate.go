package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// The truncation experiment's table: truncateHead rows that stay, then
// truncateTail rows deleted, which leave the end of the file empty. With
// fillfactor 10 each row of 700 bytes has a page of its own, so the empty
// end is 10,000 pages (80 MB, far past the 1,000 pages VACUUM truncates
// from) written by 10,000 inserts: VACUUM holds its lock for the tens of
// milliseconds it takes to read that end backwards, as it does on a
// production table's longer end. Its autovacuum is off, so that only the
// experiment's VACUUM runs on it.
const (
	truncateTable      = "pgmedic_truncate_probe"
	truncateHead       = 1000
	truncateTail       = 10000
	truncateMaxReaders = 8
	// truncateLeadIn is how long the reads run before and after VACUUM.
	truncateLeadIn = 300 * time.Millisecond
	// truncateWaitMS is the readers' lock_timeout: a read the table's
	// lock holds up longer is refused, and counted.
	truncateWaitMS = 1
)

// truncateWaits proves a truncation's stalls where pgmedic may write (a
// twin, a lab database): sessions read a table with an empty end while
// VACUUM (TRUNCATE false) cleans it, as vacuum_truncate = false would
// leave it, and then while VACUUM truncates that end, as autovacuum did on
// the target. VACUUM without truncation takes SHARE UPDATE EXCLUSIVE,
// which no read waits for; truncating takes ACCESS EXCLUSIVE, which every
// one does. Each read runs under lock_timeout = 1ms, so a read that the
// table's lock holds up is refused (SQLSTATE 55P03) and counted: an exact
// count, where a session polling pg_locks misses waits shorter than its
// poll on a busy machine. (Refused readers leave the queue, so VACUUM
// sees no waiter and truncates in one stretch: the count is of reads
// that met the lock, not of a real queue's length.) The table is
// pgmedic's own: the waits are the lock's, whatever the statement.
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
		model.Evidence{Label: fmt.Sprintf("reads held up by the table's lock past %d ms while VACUUM truncated (reproduction)", truncateWaitMS), Value: float64(asIs.refused)},
		model.Evidence{Label: "the same while VACUUM (TRUNCATE false) ran (reproduction)", Value: float64(fixed.refused)})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("reproduced on a table of pgmedic's (%d rows, one a page, then %d deleted from its end): %d sessions read it in a loop, each read under lock_timeout = %dms, while VACUUM (TRUNCATE false) ran (%s, %d reads), then while VACUUM truncated its empty end from %d to %d pages (%s, %d reads)",
			truncateHead+truncateTail, truncateTail, readers, truncateWaitMS, printable.MS(fixed.tookMS), fixed.reads, asIs.pagesBefore, asIs.pagesAfter, printable.MS(asIs.tookMS), asIs.reads),
		Before: &model.Measure{Value: float64(asIs.refused), Unit: "reads held up by the lock, VACUUM truncating"},
		After:  &model.Measure{Value: float64(fixed.refused), Unit: "reads held up by the lock, VACUUM (TRUNCATE false)"}}
	switch {
	case asIs.pagesAfter >= asIs.pagesBefore:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("VACUUM did not truncate the table here (%d pages before and after): no read met its lock", asIs.pagesBefore)
		f.Severity = model.Info
	case asIs.refused > fixed.refused:
		f.Verification.Status = model.Confirmed
	default:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("no read met the truncation's lock here (%d against %d): its hold was shorter than the gaps between reads", asIs.refused, fixed.refused)
		f.Severity = model.Info
	}
}

// truncateSide is one VACUUM with the reads around it.
type truncateSide struct {
	refused, reads          int
	tookMS                  float64
	pagesBefore, pagesAfter int64
}

// truncateSetup makes the table and empties its end.
func truncateSetup(ctx context.Context, c Session) error {
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + truncateTable,
		"CREATE TABLE " + truncateTable + " (id bigint PRIMARY KEY, payload text NOT NULL) WITH (autovacuum_enabled = off, fillfactor = 10)",
		fmt.Sprintf("INSERT INTO %s SELECT g, repeat(md5(g::text), 22) FROM generate_series(1, %d) g", truncateTable, truncateHead+truncateTail),
		fmt.Sprintf("DELETE FROM %s WHERE id > %d", truncateTable, truncateHead),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// truncateSide runs one VACUUM of the table, truncating its end or not,
// with n readers reading it, each read refused when the table's lock
// holds it up past truncateWaitMS. The first side (TRUNCATE false) also
// removes the deleted rows, so the second only truncates: the lock it
// takes is the only difference between them.
func (e *Engine) truncateSide(ctx context.Context, admin Session, n int, truncate bool) (truncateSide, error) {
	var s truncateSide
	// Sessions of their own on each side: a replayed session's loop runs
	// to the end of its recording.
	readers, closeAll, err := e.openWorkers(ctx, n)
	defer closeAll()
	if err != nil {
		return s, err
	}
	for _, r := range readers {
		if _, err := r.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", truncateWaitMS)); err != nil {
			return s, err
		}
	}
	pages := "SELECT pg_relation_size('" + truncateTable + "') / 8192"
	if err := admin.QueryRow(ctx, pages).Scan(&s.pagesBefore); err != nil {
		return s, err
	}
	read := fmt.Sprintf("SELECT payload FROM %s WHERE id = %d", truncateTable, truncateHead/2)
	// A refused read is counted as -1 ms: the loop goes on.
	finishReads := e.loopTimed(ctx, readers, func(ctx context.Context, c Session) (float64, error) {
		ms, err := execMS(ctx, c, read)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			return -1, nil
		}
		return ms, err
	})
	e.sleep(ctx, truncateLeadIn)
	vacuum := "VACUUM (TRUNCATE false) " + truncateTable
	if truncate {
		vacuum = "VACUUM (TRUNCATE true) " + truncateTable
	}
	// Timed as its own call (as recorded, in a replay): the readers'
	// replayed calls advance the engine's clock meanwhile.
	var vacErr error
	s.tookMS, vacErr = execMS(ctx, admin, vacuum)
	e.sleep(ctx, truncateLeadIn)
	lat, readErr := finishReads()
	for _, err := range []error{vacErr, readErr} {
		if err != nil {
			return s, err
		}
	}
	for _, ms := range lat {
		if ms < 0 {
			s.refused++
		}
	}
	s.reads = len(lat)
	return s, admin.QueryRow(ctx, pages).Scan(&s.pagesAfter)
}
