package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// freeze runs a wraparound finding's fix, VACUUM (FREEZE), on the twin's
// copy of the table and measures the age of the copy's oldest unfrozen
// transaction id before and after it, and how long it took. VACUUM cannot
// run inside a transaction, so it can never be rolled back: it runs only
// on a twin, whose tables are pgmedic's own.
//
// The copy's rows were written by the twin's COPY, so its age before is
// the transactions since then, not the target's: what the experiment
// proves is that nothing on the table keeps VACUUM from freezing every
// row (the age falls to what the twin's own open transactions allow), and
// what it costs on the table's size, which is how long the fix will run on
// the target. A holder on the target (a prepared transaction, a
// replication slot, a long transaction) is not on the twin: the finding
// names it, and the fix releases it first.
func (e *Engine) freeze(ctx context.Context, snap *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if !e.InPlace {
		f.Verification = model.NotRunBecause("VACUUM (FREEZE) cannot run in a transaction that is rolled back, so pgmedic runs it only on a twin's copy of the table: check --twin runs it there and times it")
		return
	}
	qt := sqlparse.QuoteQualified(exp.Table.Schema, exp.Table.Name)
	age := func() (int64, int64, error) {
		var a, bytes int64
		err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT age(relfrozenxid), pg_total_relation_size(oid) FROM pg_class WHERE oid = $1::regclass", qt).Scan(&a, &bytes)
		return a, bytes, err
	}
	before, bytes, err := age()
	if err != nil {
		f.Verification = model.NotRunBecause("reading the copy's freeze age failed: " + envelope.Message(err))
		return
	}
	start := time.Now()
	if _, err := e.Conn.Exec(ctx, envelope.Tag+"VACUUM (FREEZE) "+qt); err != nil {
		f.Verification = model.NotRunBecause("VACUUM (FREEZE) of the twin's copy failed: " + envelope.Message(err))
		return
	}
	took := time.Since(start).Seconds()
	after, _, err := age()
	if err != nil {
		f.Verification = model.NotRunBecause("reading the copy's freeze age after VACUUM failed: " + envelope.Message(err))
		return
	}
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "VACUUM (FREEZE) of the twin's copy took", Value: model.Round(took, 2), Unit: "s"},
		model.Evidence{Label: "size of the copy with its indexes", Value: model.Round(float64(bytes)/(1<<20), 1), Unit: "MB"})
	method := fmt.Sprintf("VACUUM (FREEZE) %s run on the twin's copy (%s with its indexes, %.2f s): the age of its oldest unfrozen transaction id before and after; the copy's rows are as old as the copy, so the ages show that VACUUM can freeze every row once nothing holds it back, and the time what the fix costs at this size", qt, printable.Count(float64(bytes)/(1<<20))+" MB", took)
	if e.Copies != nil && e.Copies.Fraction != nil {
		if fr := e.Copies.Fraction(exp.Table); fr > 0 && fr < 1 {
			method += fmt.Sprintf("; the copy holds a %.0f%% sample, so on the whole table expect about %.1f s", 100*fr, took/fr)
		}
	}
	f.Verification = model.Verification{Method: method,
		Before: &model.Measure{Value: float64(before), Unit: "transactions old"}, After: &model.Measure{Value: float64(after), Unit: "transactions old"}}
	if after < before || after == 0 {
		f.Verification.Status = model.Confirmed
		return
	}
	// Something on the twin itself held VACUUM back: the experiment proved
	// nothing either way.
	f.Verification = model.Verification{Status: model.NotRun, Method: method,
		Reason: fmt.Sprintf("VACUUM (FREEZE) on the twin left the copy's age at %d (from %d): a transaction open on the twin held it back", after, before)}
}
