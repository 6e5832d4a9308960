package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// ownWrite is what one data-changing statement wrote, as the server
// counted it for the session that ran it.
type ownWrite struct {
	rows int64
	wal  float64 // bytes, full-page images included
	ms   float64 // the executor's time, from the server's clock
}

// walPerRow is the statement's WAL over the rows it changed.
func (w ownWrite) walPerRow() float64 {
	if w.rows == 0 {
		return 0
	}
	return w.wal / float64(w.rows)
}

// writeOf runs dml (an INSERT or UPDATE without RETURNING) under EXPLAIN
// (ANALYZE, WAL). The WAL position (pg_current_wal_insert_lsn) moves with
// every session's writes: autovacuum, a checkpoint's records, the
// application still running on a twin or in the lab. One of them writing
// during the measurement made an index look free (a lab run counted 885
// bytes a row without the index and 792 with it). EXPLAIN's WAL figures
// (PostgreSQL 13+) are this backend's alone: the records the statement
// inserted, its full-page images included. RETURNING 1 makes the
// ModifyTable node count the rows it changed; EXPLAIN discards them.
func writeOf(ctx context.Context, c envelope.Conn, dml string) (ownWrite, error) {
	var out string
	if err := c.QueryRow(ctx, envelope.Tag+"EXPLAIN (ANALYZE, WAL, TIMING OFF, FORMAT JSON) "+dml+" RETURNING 1").Scan(&out); err != nil {
		return ownWrite{}, err
	}
	ex, err := plan.ParseJSON([]byte(out))
	if err != nil {
		return ownWrite{}, fmt.Errorf("reading the EXPLAIN output: %w", err)
	}
	return ownWrite{rows: int64(ex.Plan.ActualRows * max(ex.Plan.ActualLoops, 1)), wal: float64(ex.Plan.WAL.Bytes), ms: ex.ExecutionMS}, nil
}

// msPerK is the statement's time per 1,000 rows.
func (w ownWrite) msPerK() float64 {
	if w.rows == 0 {
		return 0
	}
	return w.ms / float64(w.rows) * 1000
}
