package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// An UPDATE is HOT (heap-only) when it changes no column an index depends
// on (a key, an INCLUDE column, an expression's or a partial index's
// predicate's column) and the new row version fits on the old one's page:
// then no index is written, and the old version is pruned without vacuum.
// The hot-update experiment applies the application's SET list to rows of
// the table twice: on a copy with all of the table's indexes, and on a
// copy without the indexes the finding says the update's columns are in.
// Both copies leave more than half of every page free, so that each row's
// new version fits beside the old one (on a live table, pruning makes that
// room between updates; a copy updated in one statement has only what its
// fillfactor left), and the indexes are the only difference. The HOT
// counts come from pg_stat_xact_user_tables, which shows the
// transaction's own counts before it ends; the WAL and the index bytes
// each updated row writes are what HOT saves, and neither depends on the
// machine's speed.

// hotRows is how many of the table's rows each side updates.
const hotRows = 5000

// hotFillfactor leaves room on every page of the copies for a new version
// of each of its rows, a little wider than the old one.
const hotFillfactor = 45

type hotSideResult struct {
	updated, hot int64
	walPerRow    float64 // bytes
	indexPerRow  float64 // bytes the indexes grew
	ms           float64
}

func (s hotSideResult) share() float64 {
	if s.updated == 0 {
		return 0
	}
	return float64(s.hot) / float64(s.updated)
}

// hotUpdate runs a never-HOT finding's experiment. It writes (in
// transactions that are rolled back), so it runs only where pgmedic may
// write: a twin or a lab database.
func (e *Engine) hotUpdate(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.Lab {
		f.Verification = model.NotRunBecause("counting HOT updates means running the update, and pgmedic does not write to a target: check --twin runs the application's UPDATE on a twin of the table, with and without the indexes its columns are in")
		return
	}
	update, params, why := e.hotStatement(ctx, exp)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	relation := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	all, kept, why := e.withAndWithout(ctx, relation, exp.Indexes, "none of the indexes the finding names is on the table any more")
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	var sides [2]hotSideResult
	for i, defs := range [][]string{all, kept} {
		var err error
		if sides[i], err = e.hotSide(ctx, relation, update, defs); err != nil {
			f.Verification = model.NotRunBecause("the update on a copy failed: " + envelope.Message(err))
			return
		}
	}
	before, after := sides[0], sides[1]
	if before.updated == 0 {
		f.Verification = model.NotRunBecause("the table has no rows to update")
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "HOT updates with the indexes", Value: model.Round(100*before.share(), 1), Unit: "%"},
		model.Evidence{Label: "HOT updates without " + listNames(exp.Indexes), Value: model.Round(100*after.share(), 1), Unit: "%"},
		model.Evidence{Label: "WAL per updated row with the indexes", Value: model.Round(before.walPerRow, 0), Unit: "bytes"},
		model.Evidence{Label: "WAL per updated row without them", Value: model.Round(after.walPerRow, 0), Unit: "bytes"},
		model.Evidence{Label: "index growth per updated row with the indexes", Value: model.Round(before.indexPerRow, 1), Unit: "bytes"},
		model.Evidence{Label: "index growth per updated row without them", Value: model.Round(after.indexPerRow, 1), Unit: "bytes"},
		model.Evidence{Label: "update time with the indexes", Value: model.Round(before.ms, 2), Unit: "ms"},
		model.Evidence{Label: "update time without them", Value: model.Round(after.ms, 2), Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("the application's SET list applied to %d of the table's rows, copied with fillfactor %d (room for each row's new version), with all %d of its indexes and then without %s; HOT updates from pg_stat_xact_user_tables, WAL and time from EXPLAIN (ANALYZE, WAL) (this session's alone), index growth from pg_indexes_size, in transactions rolled back",
			before.updated, hotFillfactor, len(all), listNames(exp.Indexes)),
		Parameters: params,
		Before:     &model.Measure{Value: model.Round(100*before.share(), 1), Unit: "% HOT updates", HigherIsBetter: true},
		After:      &model.Measure{Value: model.Round(100*after.share(), 1), Unit: "% HOT updates", HigherIsBetter: true}}
	switch {
	case before.share() >= 0.5:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("with room on the pages the update was HOT for %.0f%% of the rows even with the indexes: the low HOT share on the target comes from full pages (a lower fillfactor, more frequent vacuum) or from other updates", 100*before.share())
		f.Severity = model.Info
	case after.share()-before.share() >= 0.5:
		f.Verification.Status = model.Confirmed
	default:
		f.Verification.Status = model.Refuted
		f.Verification.Reason = fmt.Sprintf("without those indexes the update was still HOT for only %.0f%% of the rows: another index or the rows' width keeps it off the page", 100*after.share())
		f.Severity = model.Info
	}
}

// hotStatement is the application's UPDATE made to touch every row of the
// copy (its WHERE clause dropped), with its parameters' values written in,
// and those values for the report; or why it cannot be.
func (e *Engine) hotStatement(ctx context.Context, exp *model.Experiment) (update string, params []string, why string) {
	stmt, err := statement(exp)
	if err != nil {
		return "", nil, "cannot parse the statement: " + err.Error()
	}
	every, err := stmt.UpdateEveryRow("pgmedic_hot")
	if err != nil {
		return "", nil, "the update cannot be applied to a copy's rows: " + err.Error()
	}
	if update, err = every.Runnable(); err != nil {
		return "", nil, "the update cannot be run: " + err.Error()
	}
	if stmt.ParamCount() == 0 {
		return update, nil, ""
	}
	// The values the SET list takes come from the table, as for any
	// re-run; those of the dropped WHERE clause are not used.
	b, why := e.bind(ctx, stmt, exp)
	if why != "" {
		return "", nil, why
	}
	b.cleanup()
	if update, err = sqlparse.Inline(update, b.values); err != nil {
		return "", nil, "writing the values into the update: " + err.Error()
	}
	return update, b.desc, ""
}

// withAndWithout is indexDefs for an experiment's two sides, or why there
// are not two: the indexes could not be read, or (gone) none the finding
// names is on the table any more.
func (e *Engine) withAndWithout(ctx context.Context, relation string, drop []string, gone string) (all, kept []string, why string) {
	all, kept, err := e.indexDefs(ctx, relation, drop)
	switch {
	case err != nil:
		return nil, nil, "reading the table's indexes: " + envelope.Message(err)
	case len(kept) == len(all):
		return nil, nil, gone
	}
	return all, kept, ""
}

// indexDefs are the table's index definitions: all of them, and those
// left when the named ones are taken out.
func (e *Engine) indexDefs(ctx context.Context, relation string, drop []string) (all, kept []string, err error) {
	// An invalid unique index that is ready (a concurrent build that
	// failed validating) is written but was never checked against the
	// rows it has: the copy builds it without UNIQUE, which costs the
	// writes the same. One that is not ready is written by nobody.
	rows, err := e.Conn.Query(ctx, envelope.Tag+`SELECT c.relname::text, CASE WHEN i.indisvalid THEN pg_get_indexdef(i.indexrelid)
		ELSE regexp_replace(pg_get_indexdef(i.indexrelid), '^CREATE UNIQUE INDEX', 'CREATE INDEX') END
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1) AND i.indisready ORDER BY c.relname`, relation)
	if err != nil {
		return nil, nil, err
	}
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var d [2]string
		return d, r.Scan(&d[0], &d[1])
	})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range defs {
		def, err := sqlparse.IndexOn(d[1], "pgmedic_hot")
		if err != nil {
			return nil, nil, err
		}
		all = append(all, def)
		if !slices.Contains(drop, d[0]) {
			kept = append(kept, def)
		}
	}
	return all, kept, nil
}

// hotSide copies rows of the table into a new table with the indexes
// given and applies the update to all of them, in a transaction that is
// rolled back.
func (e *Engine) hotSide(ctx context.Context, relation, update string, indexes []string) (hotSideResult, error) {
	var r hotSideResult
	err := envelope.RolledBack(ctx, e.Conn, envelope.ReadWrite, func() error {
		steps := []string{
			fmt.Sprintf("CREATE TABLE pgmedic_hot (LIKE %s INCLUDING DEFAULTS) WITH (fillfactor = %d)", relation, hotFillfactor),
			fmt.Sprintf("INSERT INTO pgmedic_hot SELECT * FROM %s LIMIT %d", relation, hotRows),
		}
		for _, q := range append(steps, indexes...) {
			if _, err := e.Conn.Exec(ctx, envelope.Tag+q); err != nil {
				return err
			}
		}
		var idx0 int64
		if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT pg_indexes_size('pgmedic_hot')").Scan(&idx0); err != nil {
			return err
		}
		w, err := writeOf(ctx, e.Conn, update)
		if err != nil {
			return err
		}
		var idx1 int64
		err = e.Conn.QueryRow(ctx, envelope.Tag+`SELECT pg_indexes_size('pgmedic_hot'), n_tup_upd, n_tup_hot_upd
			FROM pg_stat_xact_user_tables WHERE relid = 'pgmedic_hot'::regclass`).Scan(&idx1, &r.updated, &r.hot)
		if err != nil {
			return err
		}
		r.ms, r.walPerRow = w.ms, w.walPerRow()
		if w.rows > 0 {
			r.indexPerRow = float64(idx1-idx0) / float64(w.rows)
		}
		return nil
	})
	return r, err
}

func listNames(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return fmt.Sprintf("%d indexes (%s)", len(names), strings.Join(names, ", "))
}
