package rules

import (
	"slices"

	"github.com/pgmedic/pgmedic/internal/model"
)

// enforces says whether an index enforces a constraint (a primary key, a
// unique key): dropping it changes what the table accepts, whatever reads
// it.
func enforces(ix model.Index) bool { return ix.Primary || ix.Unique }

// tableWrites is the rows a table wrote since the statistics were reset:
// each insert, update and delete, every one of which wrote each of its
// indexes (an update that stays on the page, HOT, writes none).
func tableWrites(t *model.Table) int64 {
	return t.Inserted + (t.Updated - t.HOTUpdated) + t.Deleted
}

// coveredBy is the index of the same table that covers ix: a valid
// B-tree with the same predicate whose key ix's key columns lead, in
// order and direction (of two with the same columns, the one whose name
// sorts first is the covered one, unless the other enforces a
// constraint). Nil when none does, or when ix enforces one itself.
func coveredBy(s *model.Snapshot, ix model.Index) *model.Index {
	if ix.Method != "btree" || enforces(ix) || !ix.Valid || len(ix.Columns) == 0 || slices.Contains(ix.Columns, "") || len(ix.Include) > 0 {
		return nil
	}
	// The table's own indexes: a database of a million relations has
	// hundreds of thousands of indexes, and each is asked about.
	same := s.TableIndexes(&model.Table{Schema: ix.Schema, Name: ix.Table})
	for i, b := range same {
		if b.Name == ix.Name || b.Method != "btree" || !b.Valid || b.Predicate != ix.Predicate ||
			!leads(ix, b) || (len(b.Columns) == len(ix.Columns) && b.Name < ix.Name && !enforces(b)) {
			continue
		}
		return &same[i]
	}
	return nil
}

// b2f is a catalog flag as an evidence value: 1 true, 0 false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
