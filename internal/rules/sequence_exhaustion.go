package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// SequenceExhaustionID is the rule id of sequences and key columns near
// the end of their numbers.
const SequenceExhaustionID = "sequence-exhaustion"

// Thresholds of sequence-exhaustion: the share of the numbers used, and
// the days left at the rate measured across check's sampling window. A
// rate from a few seconds can be a burst, so it raises the severity only
// of a sequence already half used.
const (
	seqWarnUsed     = 0.75
	seqCriticalUsed = 0.90
	seqRateFrom     = 0.50
	seqWarnDays     = 90
	seqCriticalDays = 14
)

// typeMax is the largest value of an integer type as format_type writes
// it; ok is false for other types (numeric holds far more than any
// sequence gives).
func typeMax(t string) (int64, bool) {
	switch t {
	case "smallint":
		return math.MaxInt16, true
	case "integer":
		return math.MaxInt32, true
	case "bigint":
		return math.MaxInt64, true
	}
	return 0, false
}

// seqLimit is the last number the sequence can give that its column can
// hold, and what sets it.
func seqLimit(sq model.Sequence) (limit int64, by string) {
	limit, by = sq.Max, "the sequence's maximum ("+sq.Type+")"
	if m, ok := typeMax(sq.ColumnType); ok && m <= limit {
		limit, by = m, "the largest "+sq.ColumnType+" the column "+sq.Column+" holds"
	}
	return limit, by
}

// sequenceExhaustion finds ascending sequences (and the serial or
// identity columns they feed) that have used most of their numbers: when
// the last is given, every INSERT that needs one fails (nextval: "reached
// maximum value of sequence", or the column's "integer out of range").
func sequenceExhaustion(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	hidden := 0
	for _, sq := range s.Sequences {
		if sq.Hidden {
			hidden++
			continue
		}
		// A cycling sequence starts again instead of failing (a key it
		// feeds then collides with its old rows: another finding's
		// business); a descending one is rare enough to leave out.
		if sq.Last == nil || sq.Cycle || sq.Increment <= 0 {
			continue
		}
		limit, by := seqLimit(sq)
		span := float64(limit) - float64(sq.Min)
		if span <= 0 {
			continue
		}
		used := (float64(*sq.Last) - float64(sq.Min)) / span
		left := float64(limit) - float64(*sq.Last)
		rate, days := 0.0, math.Inf(1)
		if sq.LastAfter != nil && sq.Seconds > 0 && *sq.LastAfter > *sq.Last {
			rate = float64(*sq.LastAfter-*sq.Last) / sq.Seconds
			days = left / rate / 86400
		}
		var sev model.Severity
		switch {
		case used >= seqCriticalUsed || (used >= seqRateFrom && days < seqCriticalDays):
			sev = model.Critical
		case used >= seqWarnUsed || (used >= seqRateFrom && days < seqWarnDays):
			sev = model.Warning
		default:
			continue
		}
		name := sqlparse.QuoteQualified(sq.Schema, sq.Name)
		title := fmt.Sprintf("sequence %s has used %.1f%% of its numbers: %s left before %s", name, 100*used, printable.Count(left), by)
		if rate > 0 {
			title += fmt.Sprintf(", %s at the %s per second measured", daysText(days), printable.Count(math.Round(rate)))
		}
		f := model.Finding{
			Rule: SequenceExhaustionID, Severity: sev, Title: title,
			Object: model.Object{Kind: "sequence", Name: name, Database: s.Database},
			Evidence: []model.Evidence{
				ev("last value given", float64(*sq.Last), ""),
				ev("last value it can give ("+by+")", float64(limit), ""),
				ev("share of its numbers used", 100*used, "%"),
			},
			Impact:       model.Impact{Summary: "when the last number is given every INSERT that needs one fails, and changing the column's type then rewrites the table under an ACCESS EXCLUSIVE lock, during the outage"},
			Fix:          seqFix(sq),
			Verification: model.NotRunBecause("the numbers left are counted from the catalog, and the rate from two readings of the sequence on the server's clock; check --twin tries the first number past the limit on a copy, before and after widening it"),
			Docs:         docsPath(SequenceExhaustionID),
		}
		f.Experiment = keyWidenExperiment(sq)
		if sq.Column != "" {
			f.Object.Name = fmt.Sprintf("%s (%s.%s)", name, sqlparse.QuoteQualified(sq.Table.Schema, sq.Table.Name), sqlparse.QuoteIdent(sq.Column))
		}
		if rate > 0 {
			f.Evidence = append(f.Evidence,
				ev("numbers taken per second (measured across the sample)", rate, "/s"),
				ev("seconds between the two readings", sq.Seconds, "s"),
				ev("days left at that rate", days, "days"))
		}
		out = append(out, f)
	}
	var skips []model.Skip
	if hidden > 0 {
		skips = append(skips, model.Skip{Rule: SequenceExhaustionID,
			Reason: fmt.Sprintf("could not see how far %d sequences are: pgmedic's role has neither SELECT nor USAGE on them", hidden),
			Fix:    fmt.Sprintf("GRANT SELECT ON ALL SEQUENCES IN SCHEMA <schema> TO %s;", sqlparse.QuoteIdent(orUnknown(s.User)))})
	}
	Sort(out)
	return out, skips
}

func daysText(d float64) string {
	switch {
	case d < 1:
		return fmt.Sprintf("%.1f hours", d*24)
	case d < 10:
		return fmt.Sprintf("%.1f days", d)
	}
	return fmt.Sprintf("%.0f days", d)
}

// keyWidenExperiment tries the number past the limit where the limit is:
// the key column's type when it is the narrower, else the sequence's own.
func keyWidenExperiment(sq model.Sequence) *model.Experiment {
	limit, _ := seqLimit(sq)
	if m, ok := typeMax(sq.ColumnType); ok && sq.Column != "" && m == limit && sq.ColumnType != "bigint" {
		return &model.Experiment{Kind: model.ExpKeyWiden, Table: sq.Table, Column: sq.Column, ColumnType: sq.ColumnType, Limit: limit}
	}
	if sq.Type == "bigint" {
		// A bigint sequence held below bigint's end by hand: widening is
		// raising its maximum, nothing a copy would show more of.
		return nil
	}
	return &model.Experiment{Kind: model.ExpKeyWiden, Table: sq.Table, ColumnType: sq.Type, Limit: sq.Max}
}

// seqFix is the change to bigint in a form that does not hold an ACCESS
// EXCLUSIVE lock for a table rewrite: ALTER COLUMN ... TYPE bigint
// rewrites the table and every index on it while nothing can read it.
// The sequence itself is widened in place (ALTER SEQUENCE ... AS bigint
// changes its catalog row only).
func seqFix(sq model.Sequence) model.Fix {
	seq := sqlparse.QuoteQualified(sq.Schema, sq.Name)
	widen := ""
	if sq.Type != "bigint" {
		widen = fmt.Sprintf("ALTER SEQUENCE %s AS bigint;\n", seq)
	}
	if sq.Column == "" || sq.ColumnType == "bigint" {
		// AS bigint also moves a maximum that was the old type's own to
		// bigint's; a bigint sequence was given a lower one by hand.
		sql := strings.TrimSuffix(widen, "\n")
		if sq.Type == "bigint" {
			sql = fmt.Sprintf("ALTER SEQUENCE %s MAXVALUE 9223372036854775807;", seq)
		}
		return model.Fix{Summary: "widen the sequence to bigint (a catalog change, no rewrite), and check that whatever stores its values holds a bigint", SQL: sql}
	}
	tbl := sqlparse.QuoteQualified(sq.Table.Schema, sq.Table.Name)
	col := sqlparse.QuoteIdent(sq.Column)
	nc := sqlparse.QuoteIdent(sq.Column + "_new")
	fn := sqlparse.QuoteQualified(sq.Table.Schema, sq.Table.Name+"_"+sq.Column+"_new_sync")
	ix := sqlparse.QuoteIdent(sq.Table.Name + "_" + sq.Column + "_new_key")
	sql := widen + fmt.Sprintf(`-- 1. a bigint column every write keeps equal (brief locks only)
ALTER TABLE %[1]s ADD COLUMN %[3]s bigint;
CREATE FUNCTION %[4]s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.%[3]s := NEW.%[2]s; RETURN NEW; END $$;
CREATE TRIGGER %[6]s BEFORE INSERT OR UPDATE ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[4]s();
-- 2. backfill in batches, each its own transaction, until none is left
UPDATE %[1]s SET %[3]s = %[2]s WHERE %[2]s IN (SELECT %[2]s FROM %[1]s WHERE %[3]s IS NULL LIMIT 10000);
-- 3. its unique index, built without blocking writes, and NOT NULL proved without a long lock
CREATE UNIQUE INDEX CONCURRENTLY %[5]s ON %[1]s (%[3]s);
ALTER TABLE %[1]s ADD CONSTRAINT %[7]s CHECK (%[3]s IS NOT NULL) NOT VALID;
ALTER TABLE %[1]s VALIDATE CONSTRAINT %[7]s;
-- 4. the swap, in one short transaction under lock_timeout: move the
--    default (or identity), swap the names, make the new index the key
--    (ADD CONSTRAINT ... PRIMARY KEY USING INDEX %[5]s), drop the trigger;
--    foreign keys that reference %[2]s need the same change first`,
		tbl, col, nc, fn, ix, sqlparse.QuoteIdent(sq.Table.Name+"_"+sq.Column+"_new_sync"), sqlparse.QuoteIdent(sq.Table.Name+"_"+sq.Column+"_new_not_null"))
	return model.Fix{Summary: fmt.Sprintf("change %s.%s to bigint without rewriting the table under ACCESS EXCLUSIVE: a new bigint column kept in step by a trigger, backfilled in batches, indexed CONCURRENTLY, then swapped in one short transaction (ALTER COLUMN ... TYPE bigint would hold the lock for the whole rewrite)", tbl, col),
		SQL: sql}
}
