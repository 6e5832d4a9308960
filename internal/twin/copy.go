package twin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// A copy's unit of work: a table, or a range of a large table's pages.
type copyTask struct {
	def *definition
	src string // the SELECT whose rows are copied
}

// copied is what one task did.
type copied struct {
	rows, bytes int64
	locked      bool
}

// rangeFrom is the first major with TID range scans: a range of a table's
// pages is read as just those pages (before 14, WHERE ctid ... reads the
// whole table in every range).
const rangeFrom = 14

// tasks splits the copy into units. A table is one unit, unless it is
// copied whole, is a plain table, the server reads page ranges, and it
// holds more than half a job's share of the copy: then it is cut into
// ranges of pages of about that size, so that several readers stream it
// at once (pg_dump -j copies one table per job, and waits on the largest).
// The last range is open at the end: rows written past the catalog's
// page count are in the snapshot too.
func tasks(defs []*definition, fraction float64, jobs, major int, block int64) []copyTask {
	var total int64
	for _, d := range defs {
		if !d.noRows && !d.locked {
			total += d.bytes
		}
	}
	// Half a job's share: each job takes two ranges or more, so that the
	// last to finish waits on half a share at most.
	chunk := total / int64(2*max(jobs, 1))
	var out []copyTask
	for _, d := range defs {
		if d.noRows || d.locked {
			out = append(out, copyTask{def: d})
			continue
		}
		src := "SELECT " + d.columnList() + " FROM " + d.qualified()
		if fraction < 1 {
			out = append(out, copyTask{def: d, src: src + fmt.Sprintf(" TABLESAMPLE SYSTEM (%.6f)", 100*fraction)})
			continue
		}
		pages := d.bytes / block
		if jobs < 2 || major < rangeFrom || d.partitionBy != "" || chunk <= 0 || d.bytes <= chunk || pages < 2 {
			out = append(out, copyTask{def: d, src: src})
			continue
		}
		n := min((d.bytes+chunk-1)/chunk, int64(4*jobs))
		step := (pages + n - 1) / n
		for from := int64(0); from < pages; from += step {
			where := fmt.Sprintf(" WHERE ctid >= '(%d,0)'::tid", from)
			if from+step < pages {
				where += fmt.Sprintf(" AND ctid < '(%d,0)'::tid", from+step)
			}
			out = append(out, copyTask{def: d, src: src + where})
		}
	}
	return out
}

// reader is one connection to the target, in the copy's snapshot, with
// its connection to the twin.
type reader struct {
	target, twin *pgx.Conn
	close        func() // closes the extra target session (nil for pgmedic's own); the twin's is the caller's
}

// copyRows streams every table's rows from the target into the twin: COPY
// (SELECT ...) TO STDOUT in binary on the target, piped into COPY ... FROM
// STDIN on the twin. Every read is in one read-only repeatable-read
// snapshot: pgmedic's session opens it, and with Jobs above 1 it exports
// it (pg_export_snapshot) to as many more read-only sessions, which
// import it (SET TRANSACTION SNAPSHOT) and take tables and ranges of
// pages from a common list, each streaming into a twin connection of its
// own. A sample is TABLESAMPLE SYSTEM's: whole pages picked at random, so
// the target reads only the pages sampled (BERNOULLI would read every page
// of a table ten times the bound to keep a tenth of its rows).
//
// It returns the twin connections it used, pgmedic's first; the extra
// ones are for finish, and the caller closes them.
func (tw *Twin) copyRows(ctx context.Context, target *pgx.Conn, defs []*definition, fraction float64, snap *model.Snapshot, o Options, logf func(string, ...any)) ([]*pgx.Conn, error) {
	timeout := o.CopyTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	major := pgversion.Major(snap.Server.VersionNum)
	work := tasks(defs, fraction, o.Jobs, major, snap.BlockSize())
	readers := []reader{{target: target, twin: tw.Conn}}
	err := envelope.RolledBack(ctx, target, envelope.Snapshot, func() error {
		if err := statementTimeout(ctx, target, timeout); err != nil {
			return err
		}
		rows := 0
		for _, t := range work {
			if t.src != "" {
				rows++
			}
		}
		if o.Jobs > 1 && rows > 1 && o.Dial != nil {
			readers = append(readers, tw.moreReaders(ctx, target, min(o.Jobs, rows)-1, timeout, o.Dial, logf)...)
		}
		defer func() {
			for _, r := range readers[1:] {
				r.target.Exec(context.WithoutCancel(ctx), envelope.Tag+"ROLLBACK")
				r.close()
			}
		}()
		if len(readers) > 1 {
			logf("twin: %d sessions read the target in one exported snapshot", len(readers))
		}
		done, err := runTasks(ctx, readers, work)
		if err != nil {
			return err
		}
		return tw.record(ctx, defs, work, done, fraction)
	})
	writers := make([]*pgx.Conn, len(readers))
	for i, r := range readers {
		writers[i] = r.twin
	}
	return writers, err
}

// statementTimeout sets the copy's statement_timeout on a target session.
func statementTimeout(ctx context.Context, c *pgx.Conn, d time.Duration) error {
	if _, err := c.Exec(ctx, envelope.Tag+fmt.Sprintf("SET LOCAL statement_timeout = %d", d.Milliseconds())); err != nil {
		return fmt.Errorf("setting the copy's statement_timeout: %s", envelope.Message(err))
	}
	return nil
}

// moreReaders opens up to n more target sessions in the snapshot of
// pgmedic's own, each with a twin connection. One that cannot be opened
// (the connection limit, a snapshot that cannot be exported on this
// server) leaves the copy to those that could: fewer readers, the same
// rows.
func (tw *Twin) moreReaders(ctx context.Context, target *pgx.Conn, n int, timeout time.Duration, dial func(context.Context) (*pgx.Conn, func(), error), logf func(string, ...any)) []reader {
	var id string
	if err := target.QueryRow(ctx, envelope.Tag+"SELECT pg_export_snapshot()").Scan(&id); err != nil {
		logf("twin: one session copies: the snapshot could not be exported: %s", envelope.Message(err))
		return nil
	}
	var out []reader
	for range n {
		conn, closeConn, err := dial(ctx)
		if err != nil {
			logf("twin: %d more sessions copy: another could not connect: %s", len(out), envelope.Message(err))
			break
		}
		joined := func() error {
			if _, err := conn.Exec(ctx, envelope.Tag+"BEGIN "+envelope.Snapshot); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, envelope.Tag+"SET TRANSACTION SNAPSHOT "+sqlparse.QuoteLiteral(id)); err != nil {
				return err
			}
			return statementTimeout(ctx, conn, timeout)
		}()
		if joined != nil {
			closeConn()
			logf("twin: %d more sessions copy: another could not take the snapshot: %s", len(out), envelope.Message(joined))
			break
		}
		twc, err := tw.Connect(ctx)
		if err != nil {
			conn.Exec(context.WithoutCancel(ctx), envelope.Tag+"ROLLBACK")
			closeConn()
			logf("twin: %d more sessions copy: another twin connection failed: %s", len(out), envelope.Message(err))
			break
		}
		out = append(out, reader{target: conn, twin: twc, close: closeConn})
	}
	return out
}

// runTasks hands the tasks out to the readers. A task in its own
// savepoint: one that waits out lock_timeout behind a schema change's lock
// costs its table's rows, not the twin. The first other error stops them
// all.
func runTasks(ctx context.Context, readers []reader, work []copyTask) ([]copied, error) {
	done := make([]copied, len(work))
	err := spread(ctx, readers, work, func(ctx context.Context, r reader, i int, t copyTask) error {
		if t.src == "" {
			return nil
		}
		c, err := copyOne(ctx, r, t)
		if err != nil {
			return fmt.Errorf("copying %s: %w", name(t.def.ref), err)
		}
		done[i] = c
		return nil
	})
	return done, err
}

// spread hands the items out to the workers, each taking the next one
// when it is done with the last; the first error stops the others.
func spread[W, T any](ctx context.Context, workers []W, items []T, do func(ctx context.Context, w W, i int, item T) error) error {
	next := make(chan int, len(items))
	for i := range items {
		next <- i
	}
	close(next)
	g, ctx := errgroup.WithContext(ctx)
	for _, w := range workers {
		g.Go(func() error {
			for i := range next {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := do(ctx, w, i, items[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// copyOne copies one task's rows in a savepoint on its reader.
func copyOne(ctx context.Context, r reader, t copyTask) (copied, error) {
	if _, err := r.target.Exec(ctx, envelope.Tag+"SAVEPOINT pgmedic_copy"); err != nil {
		return copied{}, errors.New(envelope.Message(err))
	}
	n, rows, err := pipe(ctx, r.target, r.twin,
		envelope.Tag+"COPY ("+t.src+") TO STDOUT (FORMAT binary)",
		"COPY "+t.def.qualified()+" ("+t.def.columnList()+") FROM STDIN (FORMAT binary)")
	if errors.Is(err, errLocked) {
		if _, rerr := r.target.Exec(ctx, envelope.Tag+"ROLLBACK TO SAVEPOINT pgmedic_copy"); rerr != nil {
			return copied{}, errors.New(envelope.Message(rerr))
		}
		return copied{locked: true}, nil
	}
	if err != nil {
		return copied{}, err
	}
	return copied{rows: rows, bytes: n}, nil
}

// record adds each table as the twin now holds it, in the order asked
// for. A table any of whose ranges met a schema change's lock holds its
// definition only: the rows of its other ranges are removed.
func (tw *Twin) record(ctx context.Context, defs []*definition, work []copyTask, done []copied, fraction float64) error {
	sum := map[*definition]*copied{}
	for i, t := range work {
		c := sum[t.def]
		if c == nil {
			c = &copied{}
			sum[t.def] = c
		}
		c.rows += done[i].rows
		c.bytes += done[i].bytes
		c.locked = c.locked || done[i].locked
	}
	for _, d := range defs {
		c := sum[d]
		switch {
		case d.noRows:
			tw.Tables = append(tw.Tables, Table{Ref: d.ref, Fraction: 1, Empty: true})
		case d.locked || c.locked:
			if c.rows > 0 {
				if _, err := tw.Conn.Exec(ctx, "TRUNCATE "+d.qualified()); err != nil {
					return fmt.Errorf("emptying %s on the twin: %s", name(d.ref), envelope.Message(err))
				}
			}
			tw.Tables = append(tw.Tables, Table{Ref: d.ref, Fraction: 1, Empty: true, Locked: lockedWhy})
		default:
			tw.Tables = append(tw.Tables, Table{Ref: d.ref, Rows: c.rows, Bytes: c.bytes, Fraction: fraction})
		}
	}
	return nil
}

// finish builds each table's constraints, indexes and defaults on the
// twin and analyses it, the tables spread over the twin connections the
// copy used (each table's own work stays on one connection, in order).
func (tw *Twin) finish(ctx context.Context, conns []*pgx.Conn, defs []*definition) error {
	return spread(ctx, conns, defs, func(ctx context.Context, c *pgx.Conn, _ int, d *definition) error {
		for _, q := range d.after() {
			if _, err := c.Exec(ctx, q); err != nil {
				return fmt.Errorf("building %s on the twin: %s", name(d.ref), envelope.Message(err))
			}
		}
		if _, err := c.Exec(ctx, "ANALYZE "+d.qualified()); err != nil {
			return fmt.Errorf("analysing %s on the twin: %s", name(d.ref), envelope.Message(err))
		}
		return nil
	})
}

// closeAll closes twin connections.
func closeAll(ctx context.Context, conns []*pgx.Conn) {
	for _, c := range conns {
		c.Close(ctx)
	}
}
