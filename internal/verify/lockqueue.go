package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// The reproduction of a lock queue: a head holds its lock for queueHold,
// the schema change starts queueLag after it, and queueReaders sessions
// run the waiting read in a loop until the head has gone and the change
// is through. With the fix the change gives up after queueLockTimeout
// and tries again every queueRetry.
const (
	queueHold        = 1200 * time.Millisecond
	queueLag         = 100 * time.Millisecond
	queueReaders     = 3
	queueLockTimeout = 100 * time.Millisecond
	queueRetry       = 200 * time.Millisecond
)

// lockQueue proves a schema change's queue on a twin: the longest read
// while the change waits behind the head as written, against the same
// with lock_timeout and retries, which lets the reads through between
// attempts. The longest read, not a percentile: the readers run
// thousands of fast reads around the few the queue holds up, and those
// few are the incident. The change runs in a transaction that is rolled back, so the
// twin's table is the same for both sides.
func (e *Engine) lockQueue(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil || !e.InPlace {
		f.Verification = model.NotRunBecause("observed while sampling; check --twin reproduces the queue on a twin (a head holding the lock, the change, the reads behind it) with and without lock_timeout")
		return
	}
	if strings.Contains(strings.ToUpper(exp.Query), "CONCURRENTLY") {
		f.Verification = model.NotRunBecause("the change cannot run inside a transaction (CONCURRENTLY), so it cannot be reproduced and rolled back")
		return
	}
	table := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	read, why := e.forSessions(ctx, exp.Waiter, "pgmedic_wait")
	if why != "" {
		f.Verification = model.NotRunBecause("the waiting read: " + why)
		return
	}
	made, err := e.makeWhatItDrops(ctx, exp.Query)
	if err != nil {
		f.Verification = model.NotRunBecause("the reproduction on the twin failed: " + envelope.Message(err))
		return
	}
	undone, err := e.undoOnTwin(ctx, exp.Query)
	undone = made + undone
	if err != nil {
		f.Verification = model.NotRunBecause("the reproduction on the twin failed: " + envelope.Message(err))
		return
	}
	worst, reads, err := bothSides(func(retry bool) ([]float64, error) { return e.reproduce(ctx, exp, table, read, retry) })
	if err != nil {
		f.Verification = model.NotRunBecause("the reproduction on the twin failed: " + envelope.Message(err))
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "longest read while the change queues as written (reproduction)", Value: worst[0], Unit: "ms"},
		model.Evidence{Label: "longest read with lock_timeout and retries (reproduction)", Value: worst[1], Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%sreproduced: a session held %s on %s for %s as the head did, the change queued behind it, and %d sessions ran the waiting read in a loop (%d and %d reads); then the same with SET lock_timeout = '%s' and a retry every %s; the change rolled back each time",
			undone, exp.HeadLock, table, queueHold, queueReaders, reads[0], reads[1], queueLockTimeout, queueRetry),
		Parameters: read.params,
		Before:     &model.Measure{Value: worst[0], Unit: "ms longest read"}, After: &model.Measure{Value: worst[1], Unit: "ms longest read"}}
	judge(f, worst[0], worst[1])
}

// undoOnTwin takes the twin's table back to before the change when the
// change had gone through on the target by the time the twin copied it:
// the change is tried once (rolled back), and if it fails because what it
// adds already exists, what it added is dropped on the twin, so the
// reproduction runs the change as the target first ran it. It says what it
// did, "" when nothing was needed.
func (e *Engine) undoOnTwin(ctx context.Context, ddl string) (string, error) {
	conns, closeAll, err := e.openWorkers(ctx, 1)
	defer closeAll()
	if err != nil {
		return "", err
	}
	c := conns[0]
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return "", err
	}
	_, tried := c.Exec(ctx, ddl)
	c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	var pgErr *pgconn.PgError
	if !errors.As(tried, &pgErr) || !alreadyThere[pgErr.Code] {
		return "", nil // it runs, or fails for a reason the reproduction will report
	}
	st, err := sqlparse.Parse(ddl)
	if err != nil {
		return "", err
	}
	undo := st.Undo()
	if len(undo) == 0 {
		return "", fmt.Errorf("the change had gone through before the twin copied the table (%s), and pgmedic cannot take it back to reproduce it", pgErr.Message)
	}
	for _, u := range undo {
		if _, err := c.Exec(ctx, u); err != nil {
			return "", fmt.Errorf("taking the twin's table back to before the change (%s): %w", u, err)
		}
	}
	return fmt.Sprintf("the change had gone through on the target before the twin copied the table (%s), so the twin was taken back first (%s); then ", pgErr.Message, strings.Join(undo, "; ")), nil
}

// makeWhatItDrops puts on the twin the trigger a DROP TRIGGER drops when
// the twin lacks it (a twin copies a table's columns, constraints and
// indexes, not its triggers): without it DROP TRIGGER IF EXISTS only
// notices there is nothing to drop, and no queue forms. The trigger calls
// a function that does nothing. It says what it did, "" when nothing was
// needed.
func (e *Engine) makeWhatItDrops(ctx context.Context, ddl string) (string, error) {
	st, err := sqlparse.Parse(ddl)
	if err != nil {
		return "", nil // undoOnTwin and the reproduction report it
	}
	d := st.DDL()
	if d == nil || d.Command != "DROP TRIGGER" || d.Trigger == "" {
		return "", nil
	}
	conns, closeAll, err := e.openWorkers(ctx, 1)
	defer closeAll()
	if err != nil {
		return "", err
	}
	c, table := conns[0], sqlparse.QuoteQualified(d.Table.Schema, d.Table.Name)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2", table, d.Trigger).Scan(&n); err != nil || n > 0 {
		return "", err
	}
	for _, q := range []string{
		"CREATE OR REPLACE FUNCTION pgmedic_noop_trigger() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$",
		"CREATE TRIGGER " + sqlparse.QuoteIdent(d.Trigger) + " BEFORE UPDATE ON " + table + " FOR EACH ROW EXECUTE FUNCTION pgmedic_noop_trigger()",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("making the trigger the change drops on the twin: %w", err)
		}
	}
	return fmt.Sprintf("the twin's %s had no trigger %s (a twin copies no triggers), so one that does nothing was made for the change to drop; then ", table, d.Trigger), nil
}

// alreadyThere are the SQLSTATEs of a change that adds what exists:
// duplicate_column, duplicate_object (a constraint), duplicate_table (an
// index's name).
var alreadyThere = map[string]bool{"42701": true, "42710": true, "42P07": true}

// reproduce runs one side and returns the readers' latencies (ms).
func (e *Engine) reproduce(ctx context.Context, exp *model.Experiment, table string, read sessionStmt, retry bool) ([]float64, error) {
	conns, closeAll, err := e.openWorkers(ctx, 2+queueReaders)
	defer closeAll()
	if err != nil {
		return nil, err
	}
	head, change, readers := conns[0], conns[1], conns[2:]
	if err := prepareOn(ctx, readers, read.prepare); err != nil {
		return nil, fmt.Errorf("preparing the waiting read: %w", err)
	}
	if _, err := head.Exec(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	if _, err := head.Exec(ctx, "LOCK TABLE "+table+" IN "+exp.HeadLock+" MODE"); err != nil {
		head.Exec(ctx, "ROLLBACK")
		return nil, fmt.Errorf("taking the head's lock: %w", err)
	}
	finish := e.loopTimed(ctx, readers, func(ctx context.Context, c Session) (float64, error) {
		return execMS(ctx, c, read.run)
	})
	released := make(chan struct{})
	go func() {
		defer close(released)
		e.sleep(ctx, queueHold)
		head.Exec(context.WithoutCancel(ctx), "COMMIT")
	}()
	e.sleep(ctx, queueLag)
	changeErr := e.runChange(ctx, change, exp.Query, retry)
	<-released
	// The reads that waited are through once the change is rolled back.
	e.sleep(ctx, queueRetry)
	lat, readErr := finish()
	if changeErr != nil {
		return nil, fmt.Errorf("the change: %w", changeErr)
	}
	if readErr != nil {
		return nil, fmt.Errorf("the waiting read: %w", readErr)
	}
	return lat, nil
}

// runChange runs the schema change in a transaction it rolls back, as
// written or, with retry, under lock_timeout, trying again until it gets
// its lock.
func (e *Engine) runChange(ctx context.Context, c Session, ddl string, retry bool) error {
	for {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			return err
		}
		if retry {
			if _, err := c.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", queueLockTimeout.Milliseconds())); err != nil {
				c.Exec(ctx, "ROLLBACK")
				return err
			}
		}
		_, err := c.Exec(ctx, ddl)
		c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		var pgErr *pgconn.PgError
		if retry && errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			e.sleep(ctx, queueRetry)
			continue
		}
		return err
	}
}
