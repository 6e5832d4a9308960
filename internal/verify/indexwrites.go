package verify

import (
	"context"
	"fmt"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// indexMinSaving is the least share of a row's WAL dropping the indexes
// must save for the finding to be confirmed.
const indexMinSaving = 0.03

// indexWriteRows is how many of the table's rows each side inserts.
const indexWriteRows = 20000

// indexWrites measures what indexes cost the table's writes: the same
// rows of the table inserted into a new table of its definition with all
// of its indexes, then without the finding's, each in a transaction that
// is rolled back. A plain table, not a temporary one: a temporary table
// writes no WAL, and the WAL is most of the cost (and what replicas and
// backups pay for). WAL per row is the verdict's figure (the server
// counts it, so no busy moment moves it); time per row is evidence.
func (e *Engine) indexWrites(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.Lab {
		f.Verification = model.NotRunBecause("measuring the write cost means writing, which pgmedic does not do on a target: check --twin inserts the table's rows into a copy on a twin, with and without the index")
		return
	}
	relation := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	all, kept, why := e.withAndWithout(ctx, relation, exp.Indexes, "the index the finding names is not on the table any more")
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	var sides [2]ownWrite
	for i, defs := range [][]string{all, kept} {
		var err error
		if sides[i], err = e.insertSide(ctx, relation, defs); err != nil {
			f.Verification = model.NotRunBecause("inserting into a copy failed: " + envelope.Message(err))
			return
		}
	}
	with, without := sides[0], sides[1]
	if with.rows == 0 {
		f.Verification = model.NotRunBecause("the table has no rows to insert again")
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "WAL per inserted row with the table's indexes", Value: model.Round(with.walPerRow(), 1), Unit: "bytes"},
		model.Evidence{Label: "WAL per inserted row without " + listNames(exp.Indexes), Value: model.Round(without.walPerRow(), 1), Unit: "bytes"},
		model.Evidence{Label: "insert time per 1,000 rows with the indexes", Value: model.Round(with.msPerK(), 2), Unit: "ms"},
		model.Evidence{Label: "insert time per 1,000 rows without", Value: model.Round(without.msPerK(), 2), Unit: "ms"})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%d of the table's rows inserted into a copy of its definition with all %d of its indexes, then without %s; WAL and time from EXPLAIN (ANALYZE, WAL), this session's alone, in transactions rolled back",
			with.rows, len(all), listNames(exp.Indexes)),
		Before: &model.Measure{Value: model.Round(with.walPerRow(), 1), Unit: "bytes of WAL per inserted row"},
		After:  &model.Measure{Value: model.Round(without.walPerRow(), 1), Unit: "bytes of WAL per inserted row"}}
	// WAL is counted, not timed, so a small saving is a real one: an
	// int4 key's index is some 7% of a wide row's WAL. Under 3% (an index
	// the inserts barely touch: a partial one, say) it is not worth a
	// finding.
	if without.walPerRow() <= with.walPerRow()*(1-indexMinSaving) {
		f.Verification.Status = model.Confirmed
		return
	}
	f.Verification.Status = model.Refuted
	f.Verification.Reason = fmt.Sprintf("without it a row wrote %.0f bytes of WAL, with it %.0f: under %.0f%% of the writes' cost", without.walPerRow(), with.walPerRow(), 100*indexMinSaving)
	f.Severity = model.Info
}

// insertSide inserts rows of the table into a new table with the indexes
// given, in a transaction that is rolled back.
func (e *Engine) insertSide(ctx context.Context, relation string, indexes []string) (ownWrite, error) {
	var c ownWrite
	err := envelope.RolledBack(ctx, e.Conn, envelope.ReadWrite, func() error {
		steps := append([]string{fmt.Sprintf("CREATE TABLE pgmedic_hot (LIKE %s INCLUDING DEFAULTS)", relation)}, indexes...)
		for _, q := range steps {
			if _, err := e.Conn.Exec(ctx, envelope.Tag+q); err != nil {
				return err
			}
		}
		var err error
		c, err = writeOf(ctx, e.Conn, fmt.Sprintf("INSERT INTO pgmedic_hot SELECT * FROM %s LIMIT %d", relation, indexWriteRows))
		return err
	})
	return c, err
}
