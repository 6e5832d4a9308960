package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// horizonRows is how many of the table's rows the experiment copies and
// updates: enough that the dead rows are counted, not guessed, few enough
// for two VACUUMs in a second.
const horizonRows = 5000

// horizonStatsWait bounds the wait for the statistics a VACUUM reports
// (a server flushes a backend's counters within a second or so; on 13 and
// 14 a collector process receives them). A machine slower than this says
// so instead of a wrong count.
const horizonStatsWait = 15 * time.Second

// vacuumHorizon counts what a held snapshot costs VACUUM. On a twin (or
// a lab database) rows of the table are copied into a table of its own;
// one session opens a REPEATABLE READ transaction and reads it, as the
// holder's transaction did; another updates every row once, commits, and
// runs VACUUM, which must keep every old version the open snapshot can
// still see. The holder ends; the same update and VACUUM again. The dead
// rows each VACUUM reported it could not remove (n_dead_tup as VACUUM
// leaves it) are the two figures: with the horizon held, and released.
func (e *Engine) vacuumHorizon(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.Lab || e.Workers == nil {
		f.Verification = model.NotRunBecause("measuring it updates rows and runs VACUUM, which pgmedic does not do on a target: check --twin counts what VACUUM can remove on a copy of " + exp.Table.Name + " with a snapshot held and without")
		return
	}
	conns, closeAll, err := e.openWorkers(ctx, 2)
	defer closeAll()
	if err != nil {
		f.Verification = model.NotRunBecause("opening sessions for the experiment: " + envelope.Message(err))
		return
	}
	holder, worker := conns[0], conns[1]
	rel := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	// A table of pgmedic's own, committed (VACUUM cannot run inside a
	// transaction, and the rows an aborted update leaves are removable
	// whatever the horizon), dropped at the end.
	if _, err := worker.Exec(ctx, fmt.Sprintf("CREATE TABLE pgmedic_horizon AS SELECT *, 0 AS pgmedic_n FROM %s LIMIT %d", rel, horizonRows)); err != nil {
		f.Verification = model.NotRunBecause("copying rows of the table failed: " + envelope.Message(err))
		return
	}
	defer worker.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS pgmedic_horizon")
	var held, released horizonSide
	if held, err = horizonRound(ctx, holder, worker, true); err == nil {
		released, err = horizonRound(ctx, nil, worker, false)
	}
	if err != nil {
		f.Verification = model.NotRunBecause("updating and vacuuming the copy failed: " + envelope.Message(err))
		return
	}
	if held.updated == 0 {
		f.Verification = model.NotRunBecause("the table has no rows to copy and update")
		return
	}
	// Another holder of the experiment's own database (the one the
	// finding names, when the experiment runs on the lab database itself)
	// keeps the rows on both sides: then nothing here measures the fix.
	if released.left*2 > released.updated {
		f.Verification = model.NotRunBecause(fmt.Sprintf("with no snapshot of the experiment's held, VACUUM still left %d dead rows after updating %d: something else holds this database's horizon (the holder itself, when the experiment runs on its database); run check --twin", released.left, released.updated))
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "dead rows VACUUM could not remove, snapshot held (measured)", Value: float64(held.left), Unit: "rows"},
		model.Evidence{Label: "dead rows VACUUM could not remove, none held (measured)", Value: float64(released.left), Unit: "rows"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%d rows of %s copied into a table of their own; every row updated once and VACUUM run while another session held a REPEATABLE READ snapshot taken before the update, then again with no snapshot held; the dead rows VACUUM reported it could not remove (n_dead_tup after it)", held.updated, rel),
		Before: &model.Measure{Value: float64(held.left), Unit: "dead rows left by VACUUM, horizon held"},
		After:  &model.Measure{Value: float64(released.left), Unit: "dead rows left by VACUUM, horizon released"}}
	judge(f, float64(held.left), float64(released.left))
}

// horizonSide is one round: the rows the update changed and the dead
// rows the VACUUM after it could not remove.
type horizonSide struct {
	updated, left int64
}

// horizonRound updates every row of the copy once and vacuums it; with
// hold, holder keeps a snapshot taken before the update until the VACUUM
// has reported.
func horizonRound(ctx context.Context, holder, worker Session, hold bool) (horizonSide, error) {
	var side horizonSide
	if hold {
		if _, err := holder.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return side, err
		}
		defer holder.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		if _, err := holder.Exec(ctx, "SELECT count(*) FROM pgmedic_horizon"); err != nil {
			return side, err
		}
	}
	var updates, vacuums int64
	if err := worker.QueryRow(ctx, "SELECT pg_stat_get_tuples_updated('pgmedic_horizon'::regclass), pg_stat_get_vacuum_count('pgmedic_horizon'::regclass)").Scan(&updates, &vacuums); err != nil {
		return side, err
	}
	tag, err := worker.Exec(ctx, "UPDATE pgmedic_horizon SET pgmedic_n = pgmedic_n + 1")
	if err != nil {
		return side, err
	}
	side.updated = tag.RowsAffected()
	// The update's counters must reach the statistics before VACUUM
	// reports its own, or they would be added on top of VACUUM's count.
	if err := statsReached(ctx, worker, "pg_stat_get_tuples_updated('pgmedic_horizon'::regclass)", updates+side.updated); err != nil {
		return side, err
	}
	if _, err := worker.Exec(ctx, "VACUUM pgmedic_horizon"); err != nil {
		return side, err
	}
	if err := statsReached(ctx, worker, "pg_stat_get_vacuum_count('pgmedic_horizon'::regclass)", vacuums+1); err != nil {
		return side, err
	}
	err = worker.QueryRow(ctx, "SELECT pg_stat_get_dead_tuples('pgmedic_horizon'::regclass)").Scan(&side.left)
	return side, err
}

// statsReached polls a statistics counter until it reaches want, each
// time in a fresh statistics snapshot.
func statsReached(ctx context.Context, c Session, counter string, want int64) error {
	deadline := time.Now().Add(horizonStatsWait)
	for {
		var got int64
		if _, err := c.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return err
		}
		if err := c.QueryRow(ctx, "SELECT "+counter).Scan(&got); err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server's statistics did not count the experiment's own work within %s (%s is %d, expected %d)", horizonStatsWait, counter, got, want)
		}
		wait.For(ctx, 50*time.Millisecond)
	}
}
