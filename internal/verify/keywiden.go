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
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// keyWiden proves a sequence-exhaustion finding's fix on a copy: the
// first number past the limit is refused as things are (a key column of
// a narrow integer type: "integer out of range"; a sequence at its
// maximum: "reached maximum value"), then accepted once the type is
// bigint. For a column the copy is the table's rows in a temporary table,
// and the ALTER COLUMN ... TYPE bigint that widens it is timed: the
// rewrite the table's ACCESS EXCLUSIVE lock would last on the target
// (why the fix is a new column swapped in, not that ALTER). For a
// sequence the copy is a temporary sequence of the same type at its
// maximum, and ALTER SEQUENCE ... AS bigint changes its catalog row only.
// Everything is in a transaction that is rolled back, and the refusals
// run in a block that traps them, so no ERROR reaches the server's log.
func (e *Engine) keyWiden(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.copyAllowed() {
		f.Verification = model.NotRunBecause("a number past the limit is tried on a copy: pass --twin (or --verify-indexes) to try it and the widening there")
		return
	}
	var t *model.Table
	if exp.Column != "" {
		if t = snap.Table(exp.Table); t == nil {
			f.Verification = model.NotRunBecause("the key's table is not in the snapshot")
			return
		}
		if !e.mayCopy(f, t, nil, copyHint) {
			return
		}
	}
	past := exp.Limit + 1
	conn, where := e.copySide(exp.Table)
	var refused, accepted error
	var rewriteMS float64
	var rows int64
	try, widen := keyWidenStatements(exp, past)
	err := e.inTempTransaction(ctx, conn, func() error {
		var err error
		if rows, err = keyWidenCopy(ctx, conn, exp); err != nil {
			return err
		}
		refused = envelope.Run(ctx, conn, try)
		start := time.Now()
		if _, err := conn.Exec(ctx, envelope.Tag+widen); err != nil {
			return fmt.Errorf("widening the copy: %s", envelope.Message(err))
		}
		rewriteMS = float64(time.Since(start).Microseconds()) / 1000
		accepted = envelope.Run(ctx, conn, try)
		return nil
	})
	if err != nil {
		f.Verification = model.NotRunBecause(err.Error())
		return
	}
	var pgErr *pgconn.PgError
	// 22003: integer out of range; 2200H: the sequence reached its maximum.
	if !errors.As(refused, &pgErr) || (pgErr.Code != "22003" && pgErr.Code != "2200H") {
		f.Verification = model.NotRunBecause(fmt.Sprintf("the copy did not refuse %s as the finding expects (%v), so the experiment proves nothing", printable.Count(float64(past)), refused))
		return
	}
	if accepted != nil {
		f.Verification = model.Verification{Status: model.Refuted, Method: "the number past the limit tried before and after widening a copy",
			Reason: "the widened copy still refused it: " + envelope.Message(accepted)}
		return
	}
	what := "a temporary sequence of the same type at its maximum"
	if exp.Column != "" {
		what = fmt.Sprintf("a temporary copy of %s (%s rows)", sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name), printable.Count(float64(rows)))
		f.Evidence = append(f.Evidence, model.Evidence{Label: "ALTER COLUMN ... TYPE bigint rewrote the copy (its rows, not its indexes) in; a plain ALTER holds ACCESS EXCLUSIVE at least that long", Value: model.Round(rewriteMS, 1), Unit: "ms"})
	}
	copyText := strings.NewReplacer("'pg_temp."+copyName+"'", "the copy", "pg_temp."+copyName, "the copy", copyName, "the copy")
	method := fmt.Sprintf("%s tried on %s, refused (%s), then accepted after %s (%.1f ms); rolled back", copyText.Replace(try), what, copyText.Replace(pgErr.Message), copyText.Replace(widen), rewriteMS)
	unit := "values past " + printable.Count(float64(exp.Limit)) + " stored"
	f.Verification = model.Verification{Status: model.Confirmed, Where: where, Method: method,
		Before: &model.Measure{Value: 0, Unit: unit, HigherIsBetter: true}, After: &model.Measure{Value: 1, Unit: unit, HigherIsBetter: true}}
}

// keyWidenStatements are the number past the limit tried on the copy, and
// the widening: a column's type, or a sequence's.
func keyWidenStatements(exp *model.Experiment, past int64) (try, widen string) {
	if exp.Column != "" {
		col := sqlparse.QuoteIdent(exp.Column)
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%d)", copyName, col, past),
			fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s TYPE bigint", copyName, col)
	}
	return "SELECT nextval('pg_temp." + copyName + "')", "ALTER SEQUENCE pg_temp." + copyName + " AS bigint MAXVALUE 9223372036854775807"
}

// keyWidenCopy makes the copy the limit is tried on: the table, or a
// temporary sequence of the same type whose last number is given first,
// so that the next is the one past the limit. It returns the rows copied.
func keyWidenCopy(ctx context.Context, conn envelope.Conn, exp *model.Experiment) (int64, error) {
	if exp.Column != "" {
		create := "CREATE TEMP TABLE " + copyName + " AS SELECT * FROM " + sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
		tag, err := conn.Exec(ctx, envelope.Tag+create)
		if err != nil {
			return 0, fmt.Errorf("copying the table: %s", envelope.Message(err))
		}
		return tag.RowsAffected(), nil
	}
	create := fmt.Sprintf("CREATE TEMP SEQUENCE %s AS %s MAXVALUE %d START %d", copyName, exp.ColumnType, exp.Limit, exp.Limit)
	for _, q := range []string{create, "SELECT nextval('pg_temp." + copyName + "')"} {
		if _, err := conn.Exec(ctx, envelope.Tag+q); err != nil {
			return 0, fmt.Errorf("making a sequence like it: %s", envelope.Message(err))
		}
	}
	return 0, nil
}
