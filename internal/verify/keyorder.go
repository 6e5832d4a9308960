package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// A B-tree fed keys in random order splits leaves anywhere, each split
// leaving two half-full pages, and settles near 70% full; fed in
// ascending order, it splits only its rightmost leaf and packs the rest
// to its fillfactor (90%). Every split is logged in full, so random keys
// also write more WAL per row, and each insert touches a random leaf that
// must be in memory. keyOrder measures that on a twin from the table's
// own keys, when the target's index cannot be read (no pgstattuple
// there): the same keys inserted into an empty B-tree in random order, as
// the application's random keys arrive, and in ascending order, as a
// time-ordered key (UUIDv7, a sequence) would.

// keyOrderRows bounds the keys inserted on each side.
const keyOrderRows = 200000

type keyInsert struct {
	rows               int64
	density, walPerRow float64
	rowsPerSecond      float64
}

// keyOrder runs both sides on the twin (conn), in transactions that are
// rolled back.
func (e *Engine) keyOrder(ctx context.Context, conn envelope.Conn, table model.RelRef, col *model.Column) (random, ordered keyInsert, err error) {
	key := sqlparse.QuoteIdent(col.Name)
	src := fmt.Sprintf("SELECT %s FROM %s WHERE %s IS NOT NULL LIMIT %d", key, sqlparse.QuoteQualified(table.Schema, table.Name), key, keyOrderRows)
	side := func(order string) (keyInsert, error) {
		var k keyInsert
		err := e.inTempTransaction(ctx, conn, func() error {
			for _, q := range []string{
				"CREATE EXTENSION IF NOT EXISTS pgstattuple",
				"CREATE TEMP TABLE pgmedic_key_src ON COMMIT DROP AS " + src,
				// A logged table: its splits write WAL, as the real index's do.
				"CREATE TABLE pgmedic_key_order (k " + col.Type + " PRIMARY KEY)",
			} {
				if _, err := conn.Exec(ctx, envelope.Tag+q); err != nil {
					return err
				}
			}
			w, err := writeOf(ctx, conn, "INSERT INTO pgmedic_key_order SELECT * FROM pgmedic_key_src ORDER BY "+order)
			if err != nil {
				return err
			}
			if err := conn.QueryRow(ctx, envelope.Tag+"SELECT avg_leaf_density FROM pgstatindex('pgmedic_key_order_pkey')").Scan(&k.density); err != nil {
				return err
			}
			k.rows, k.walPerRow = w.rows, w.walPerRow()
			if w.ms > 0 {
				k.rowsPerSecond = float64(w.rows) / w.ms * 1000
			}
			return nil
		})
		return k, err
	}
	if random, err = side("random()"); err != nil {
		return random, ordered, err
	}
	ordered, err = side("1")
	return random, ordered, err
}

// keyOrderOnTwin verifies a random-key finding from the twin's copy of
// the table's keys.
func (e *Engine) keyOrderOnTwin(ctx context.Context, snap *model.Snapshot, f *model.Finding, col *model.Column) {
	conn, where := e.copySide(f.Experiment.Table)
	random, ordered, err := e.keyOrder(ctx, conn, f.Experiment.Table, col)
	if err != nil {
		f.Verification = model.NotRunBecause("pgstattuple is not installed in this database, and inserting the keys on the twin failed: " + envelope.Message(err))
		return
	}
	if random.rows == 0 {
		f.Verification = model.NotRunBecause("pgstattuple is not installed in this database, and the twin's copy has no keys to insert")
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: fmt.Sprintf("leaf density, %d of the table's keys inserted in random order (twin)", random.rows), Value: model.Round(random.density, 2), Unit: "%"},
		model.Evidence{Label: "leaf density, the same keys in ascending order", Value: model.Round(ordered.density, 2), Unit: "%"},
		model.Evidence{Label: "WAL per row, random order", Value: model.Round(random.walPerRow, 0), Unit: "bytes"},
		model.Evidence{Label: "WAL per row, ascending order", Value: model.Round(ordered.walPerRow, 0), Unit: "bytes"},
		model.Evidence{Label: "inserts per second, random order", Value: model.Round(random.rowsPerSecond, 0), Unit: "rows/s"},
		model.Evidence{Label: "inserts per second, ascending order", Value: model.Round(ordered.rowsPerSecond, 0), Unit: "rows/s"})
	f.Verification = model.Verification{Status: model.Confirmed, Where: where,
		Method: fmt.Sprintf("pgstattuple is not installed on the target, so its index was not read; on the twin, %d of the table's keys inserted into an empty B-tree in random order (as random keys arrive) and in ascending order (as a time-ordered key would), each in a transaction rolled back: pgstatindex's leaf density, WAL per row and insert rate of each",
			random.rows),
		Before: &model.Measure{Value: model.Round(random.density, 2), Unit: "% leaf density", HigherIsBetter: true},
		After:  &model.Measure{Value: model.Round(ordered.density, 2), Unit: "% leaf density", HigherIsBetter: true}}
	if ordered.density < random.density+10 {
		f.Verification.Status = model.Refuted
		f.Severity = model.Info
	}
}
