package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// The subtransaction experiment's table and sizes: a transaction held
// open with subtransSavepoints subtransactions that write (past the 64 a
// backend's cache holds) or with none, then subtransRows rows committed
// after it began, read subtransReads times a side, in subtransRounds
// alternating rounds.
const (
	subtransTable      = "pgmedic_subtrans_probe"
	subtransSavepoints = 70
	subtransRows       = 20000
	subtransReads      = 30
	subtransRounds     = 2
	// subtransCollectorWait: before 15 a backend sends its counters to the
	// statistics collector at most every 500 ms, and a reader accepts the
	// collector's file up to 500 ms old.
	subtransCollectorWait = 600 * time.Millisecond
)

// subtransReads proves a subtransaction-overflow finding where pgmedic
// may write (a twin, a lab database). One session holds a transaction
// open, as the long transaction on the target does; another commits rows
// after it began, so every one of them is newer than any snapshot's xmin;
// a third reads them. Once with the held transaction past 64
// subtransactions (70 subtransactions that each write a row: a PL/pgSQL block with an EXCEPTION clause, entered 70 times): every snapshot
// taken meanwhile is suboverflowed and each row read is looked up in
// pg_subtrans. Once with the same transaction without savepoints, as the
// fix leaves it: the snapshot lists it and no lookup is made. The
// lookups are pg_stat_slru's, counted across the reads (exact: one per
// row), and each read is timed. The table is pgmedic's own: the lookups
// are the snapshot's, whatever the rows.
func (e *Engine) subtransReads(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	if e.Workers == nil {
		f.Verification = model.NotRunBecause("holding a transaction with 70 subtransactions open while another session reads needs sessions and a table of pgmedic's, which it does not make on a target: check --twin runs it on a twin")
		return
	}
	conns, closeAll, err := e.openWorkers(ctx, 2)
	defer closeAll()
	if err != nil {
		f.Verification = model.NotRunBecause("opening sessions on the twin failed: " + envelope.Message(err))
		return
	}
	admin, holder := conns[0], conns[1]
	defer admin.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+subtransTable)
	var version int
	err = admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version)
	for _, q := range []string{"DROP TABLE IF EXISTS " + subtransTable,
		"CREATE TABLE " + subtransTable + " (id int NOT NULL) WITH (autovacuum_enabled = off)"} {
		if err == nil {
			_, err = admin.Exec(ctx, q)
		}
	}
	if err != nil {
		f.Verification = model.NotRunBecause("making the table on the twin failed: " + envelope.Message(err))
		return
	}
	var side [2]subtransSide // plain, overflowed
	for range subtransRounds {
		for i, overflow := range []bool{false, true} {
			if err := e.subtransSide(ctx, admin, holder, overflow, version, &side[i]); err != nil {
				holder.Exec(context.WithoutCancel(ctx), "ROLLBACK")
				f.Verification = model.NotRunBecause("the reads on the twin failed: " + envelope.Message(err))
				return
			}
		}
	}
	subtransJudge(f, side[0], side[1])
}

// subtransSide is what one side measured over its rounds.
type subtransSide struct {
	lookups int64
	ms      []float64
}

func (s subtransSide) perRead() float64 {
	if len(s.ms) == 0 {
		return 0
	}
	return float64(s.lookups) / float64(len(s.ms))
}

// subtransSide runs one round of one side: the held transaction, the
// rows after it, a fresh reader's timed reads and the lookups they made.
func (e *Engine) subtransSide(ctx context.Context, admin, holder Session, overflow bool, version int, s *subtransSide) error {
	// A PL/pgSQL block with an EXCEPTION clause is a subtransaction each
	// time it is entered, as a SAVEPOINT is; RELEASE (the block's end)
	// keeps its id in the transaction.
	hold := fmt.Sprintf("BEGIN; INSERT INTO %s VALUES (0);", subtransTable)
	if overflow {
		hold += fmt.Sprintf(" DO $$ BEGIN FOR i IN 1..%d LOOP BEGIN INSERT INTO %s VALUES (0); EXCEPTION WHEN unique_violation THEN NULL; END; END LOOP; END $$;",
			subtransSavepoints, subtransTable)
	}
	if _, err := holder.Exec(ctx, hold); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT g FROM generate_series(1, %d) g", subtransTable, subtransRows)); err != nil {
		return err
	}
	readers, closeReader, err := e.openWorkers(ctx, 1)
	defer closeReader()
	if err != nil {
		return err
	}
	reader := readers[0]
	read := "SELECT count(*) FROM " + subtransTable
	if _, err := reader.Exec(ctx, read); err != nil { // sets the rows' hint bits
		return err
	}
	before, err := e.subtransLookups(ctx, admin, reader, version)
	if err != nil {
		return err
	}
	for range subtransReads {
		ms, err := execMS(ctx, reader, read)
		if err != nil {
			return err
		}
		s.ms = append(s.ms, ms)
	}
	after, err := e.subtransLookups(ctx, admin, reader, version)
	if err != nil {
		return err
	}
	s.lookups += max(after-before, 0)
	for _, q := range []string{"ROLLBACK"} {
		if _, err := holder.Exec(ctx, q); err != nil {
			return err
		}
	}
	_, err = admin.Exec(ctx, "TRUNCATE "+subtransTable)
	return err
}

// subtransLookups reads pg_stat_slru's pg_subtrans lookups once the
// reader's own have reached it: from 15 the reader flushes them when it
// goes idle after pg_stat_force_next_flush(); before, it sends them to
// the statistics collector at the end of a statement at least 500 ms
// after its last, and the collector's file is read once it is newer than
// that.
func (e *Engine) subtransLookups(ctx context.Context, admin, reader Session, version int) (int64, error) {
	if version >= 150000 {
		if _, err := reader.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			return 0, err
		}
	} else {
		if _, err := reader.Exec(ctx, fmt.Sprintf("SELECT pg_sleep(%g)", subtransCollectorWait.Seconds())); err != nil {
			return 0, err
		}
		e.sleep(ctx, subtransCollectorWait)
	}
	var n int64
	err := admin.QueryRow(ctx, "SELECT coalesce(sum(blks_hit + blks_read), 0)::int8 FROM pg_stat_slru WHERE lower(name) IN ('subtrans', 'subtransaction')").Scan(&n)
	return n, err
}

// subtransJudge gives the verdict: confirmed when the reads under the
// overflowed transaction looked up about a row each and those under the
// plain one a tenth of that at most. The lookups are the two numbers:
// exact, whatever the machine's load. The reads' times go with them as
// evidence, the fastest of each side (a busy machine slows some reads,
// not the fastest): one reader on a twin whose pg_subtrans fits its
// buffers pays the lookups' CPU and no more, so the time says little of
// the target's cost, which the lookup rate and the waits sampled there
// measure (the finding's severity).
func subtransJudge(f *model.Finding, plain, overflowed subtransSide) {
	asIs, fixed := overflowed.perRead(), plain.perRead()
	fastAsIs, fastFixed := slices.Min(append([]float64{math.Inf(1)}, overflowed.ms...)), slices.Min(append([]float64{math.Inf(1)}, plain.ms...))
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "fastest read with the transaction past 64 subtransactions open (reproduction)", Value: model.Round(fastAsIs, 2), Unit: "ms"},
		model.Evidence{Label: "fastest read with that transaction holding none (reproduction)", Value: model.Round(fastFixed, 2), Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("reproduced on a table of pgmedic's: a transaction held open, %s rows committed after it began, and a session reading them %d times a side in %d alternating rounds; once with the held transaction past 64 subtransactions (%d that write: a PL/pgSQL block with EXCEPTION, entered in a loop), once with none; pg_subtrans lookups counted by pg_stat_slru across the reads",
			printable.Count(subtransRows), subtransReads, subtransRounds, subtransSavepoints),
		Before: &model.Measure{Value: model.Round(asIs, 0), Unit: fmt.Sprintf("pg_subtrans lookups per read of %s rows, transaction past 64 subtransactions", printable.Count(subtransRows))},
		After:  &model.Measure{Value: model.Round(fixed, 0), Unit: "pg_subtrans lookups per read, same transaction without them"}}
	if asIs < subtransRows/2 || fixed > asIs/10 {
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("the reads made %s lookups each with the overflowed transaction and %s without: its snapshots did not overflow here",
			printable.Count(asIs), printable.Count(fixed))
		f.Severity = model.Info
		return
	}
	f.Verification.Status = model.Confirmed
}
