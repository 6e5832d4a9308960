package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ckptRows bounds the rows one batch updates: enough pages for the
// full-page images to dominate, little enough for a check.
const ckptRows = 50000

// checkpointWAL measures what a checkpoint costs the writes that follow
// it. With full_page_writes (the default) the first change to a page
// after a checkpoint writes the whole page to WAL; later changes to it
// before the next checkpoint write only the change. So the closer the
// checkpoints (a small max_wal_size for the write rate), the more of the
// WAL is whole pages. On a twin's copy of the table with the most writes,
// one batch updates the first rows a scan meets (each column set to
// itself, rolled back) with no checkpoint since the pages were last
// written, then the same batch right after a CHECKPOINT: the WAL of each,
// per row. The two are the writes between close checkpoints and between
// far ones.
func (e *Engine) checkpointWAL(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.Lab || e.Workers == nil {
		f.Verification = model.NotRunBecause("counted in the server log; measuring it runs CHECKPOINT and writes, which pgmedic does on a twin only: check --twin --log FILE measures it on a copy of " + exp.Table.Name)
		return
	}
	t := snap.Table(exp.Table)
	if t == nil {
		f.Verification = model.NotRunBecause("the table is not in the snapshot")
		return
	}
	col := unindexedColumn(snap, t)
	if col == "" {
		f.Verification = model.NotRunBecause("the table's columns are not in the snapshot")
		return
	}
	rel := sqlparse.QuoteQualified(t.Schema, t.Name)
	// The first rows a sequential scan meets, by their ctid: the pages
	// that hold rows (after a purge or a rewrite the table's first pages
	// may hold none).
	update := fmt.Sprintf("UPDATE %s SET %s = %s WHERE ctid = ANY (ARRAY(SELECT ctid FROM %s LIMIT %d))", rel, sqlparse.QuoteIdent(col), sqlparse.QuoteIdent(col), rel, batchRows(snap, t))
	conns, closeAll, err := e.openWorkers(ctx, 1)
	defer closeAll()
	if err != nil {
		f.Verification = model.NotRunBecause("opening a session on the twin: " + envelope.Message(err))
		return
	}
	c := conns[0]
	// batch updates the rows in a transaction it rolls back and returns
	// the WAL it wrote (bytes) and the rows it updated.
	batch := func() (float64, int64, error) {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			return 0, 0, err
		}
		defer c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		w, err := writeOf(ctx, c, update)
		return w.wal, w.rows, err
	}
	// A first batch writes each page since whatever checkpoint came last;
	// the second then finds every page already written since it.
	if _, _, err := batch(); err != nil {
		f.Verification = model.NotRunBecause("updating the copy failed: " + envelope.Message(err))
		return
	}
	// A checkpoint that starts during the batch makes it pay for whole
	// pages as if none had been far: it can only raise the figure, so of
	// up to three batches the lowest is the one no checkpoint reached.
	far, rows, err := batch()
	for try := 1; try < 3 && err == nil; try++ {
		again, _, aerr := batch()
		if err = aerr; err == nil {
			far = min(far, again)
		}
	}
	if err == nil {
		_, err = c.Exec(ctx, "CHECKPOINT")
	}
	var near float64
	if err == nil {
		near, _, err = batch()
	}
	if err != nil {
		f.Verification = model.NotRunBecause("measuring on the copy failed: " + envelope.Message(err))
		return
	}
	if rows == 0 {
		f.Verification = model.NotRunBecause("the copy of the table has no rows to update")
		return
	}
	perRow := func(b float64) float64 { return model.Round(b/float64(rows), 1) }
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "WAL per row updated right after a checkpoint (measured)", Value: perRow(near), Unit: "bytes"},
		model.Evidence{Label: "WAL per row updated with no checkpoint since its page was written (measured)", Value: perRow(far), Unit: "bytes"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("measured on a copy of %s: its first %d rows updated (each %s set to itself, rolled back) right after a CHECKPOINT, and with no checkpoint since the same pages were last written; the WAL each batch wrote (EXPLAIN (ANALYZE, WAL): this session's alone)", rel, rows, col),
		Before: &model.Measure{Value: perRow(near), Unit: "bytes of WAL per row, checkpoints close"},
		After:  &model.Measure{Value: perRow(far), Unit: "bytes of WAL per row, checkpoints far apart"}}
	judge(f, near, far)
}

// unindexedColumn is a column of t no index holds, where there is one:
// its update can stay on the page (HOT), as most of an application's
// updates do, so the WAL is the row's and, after a checkpoint, its page's.
// "" when the snapshot has none of t's columns.
func unindexedColumn(snap *model.Snapshot, t *model.Table) string {
	indexed := map[string]bool{}
	for _, ix := range snap.Indexes {
		if ix.Schema == t.Schema && ix.Table == t.Name {
			for _, c := range ix.Columns {
				indexed[c] = true
			}
		}
	}
	var col string
	for _, c := range snap.Columns {
		if c.Schema == t.Schema && c.Table == t.Name && (col == "" || indexed[col] && !indexed[c.Name]) {
			col = c.Name
		}
	}
	return col
}

// batchRows is how many rows a batch updates: ckptRows, or fewer on a
// server whose max_wal_size would start a checkpoint within a batch (the
// lab's, when that is the problem check found): the pages a batch
// touches write at most a twentieth of the WAL that starts one.
func batchRows(snap *model.Snapshot, t *model.Table) int {
	maxWAL, ok := snap.SettingKB("max_wal_size")
	if !ok || t.RelPages <= 0 || t.Reltuples <= 0 {
		return ckptRows
	}
	pages := maxWAL / (1 + 0.9) / 20 / 8
	return int(max(100, min(float64(ckptRows), pages*t.Reltuples/float64(t.RelPages))))
}
