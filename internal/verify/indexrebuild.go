package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// indexRebuild measures what REINDEX would leave: the index's size now
// (and pgstatindex's leaf density, where the extension is installed),
// then the same definition built on a temporary copy of the table's rows,
// in a transaction rolled back (on the twin with --twin, on the target
// only in the lab or with --verify-indexes). A fresh build fills its
// leaves to the fillfactor; the difference is the empty space the index
// carries.
func (e *Engine) indexRebuild(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	t := snap.Table(exp.Table)
	if t == nil {
		f.Verification = model.NotRunBecause("the table is not in the snapshot")
		return
	}
	qi := sqlparse.QuoteQualified(exp.Table.Schema, exp.Index)
	qt := sqlparse.QuoteQualified(t.Schema, t.Name)
	var now int64
	var def string
	var density float64
	var notes []string
	err := e.readOnly(ctx, func() error {
		return e.Conn.QueryRow(ctx, envelope.Tag+"SELECT pg_relation_size($1::regclass), pg_get_indexdef($1::regclass)", qi).Scan(&now, &def)
	})
	if err != nil {
		f.Verification = model.NotRunBecause("reading the index failed: " + envelope.Message(err))
		return
	}
	if _, ok := snap.Extensions["pgstattuple"]; ok && now <= e.maxCopy() {
		err := e.readOnly(ctx, func() error {
			return e.Conn.QueryRow(ctx, envelope.Tag+"SELECT avg_leaf_density FROM pgstatindex($1::regclass)", qi).Scan(&density)
		})
		if err == nil {
			f.Evidence = append(f.Evidence, model.Evidence{Label: "average leaf density now (pgstatindex)", Value: model.Round(density, 2), Unit: "%"})
			notes = append(notes, fmt.Sprintf("pgstatindex measured its leaves %.0f%% full", density))
		}
	}
	if !e.mayCopy(f, t, notes, copyHint+" and the index built fresh on it") {
		return
	}
	// The definition with the copy in place of the table: everything
	// from USING on (method, keys, INCLUDE, predicate) stays as it is.
	using := strings.Index(def, " USING ")
	if using < 0 {
		f.Verification = model.NotRunBecause("the index's definition has no USING clause: " + def)
		return
	}
	build := "CREATE INDEX ON " + copyName + def[using:]
	var fresh int64
	conn, where := e.copySide(exp.Table)
	err = e.inTempTransaction(ctx, conn, func() error {
		for _, q := range []string{"CREATE TEMP TABLE " + copyName + " AS SELECT * FROM " + qt, build} {
			if _, err := conn.Exec(ctx, envelope.Tag+q); err != nil {
				return err
			}
		}
		return conn.QueryRow(ctx, envelope.Tag+"SELECT pg_relation_size(indexrelid) FROM pg_index WHERE indrelid = 'pg_temp."+copyName+"'::regclass").Scan(&fresh)
	})
	if err != nil {
		f.Verification = model.NotRunBecause(strings.Join(append(notes, "building the index on a copy failed: "+envelope.Message(err)), "; "))
		return
	}
	before, after := float64(now)/(1<<20), float64(fresh)/(1<<20)
	if e.Copies != nil && e.Copies.Fraction != nil {
		if fr := e.Copies.Fraction(exp.Table); fr > 0 && fr < 1 {
			after /= fr
			notes = append(notes, fmt.Sprintf("the fresh size is scaled from a %.0f%% sample", 100*fr))
		}
	}
	f.Verification = model.Verification{Where: where,
		Method: strings.Join(append([]string{"the index's size now vs the same definition built on a temporary copy of the table's rows (what REINDEX leaves), rolled back"}, notes...), "; "),
		Before: &model.Measure{Value: model.Round(before, 2), Unit: "MB"}, After: &model.Measure{Value: model.Round(after, 2), Unit: "MB"}}
	judge(f, before, after)
}
