package diagnose

import (
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// TestLiteralsFromLog: a statement pg_stat_activity showed no values of
// takes the log's text of the same fingerprint; one it did show keeps
// pg_stat_activity's, and one the log never wrote gets nothing.
func TestLiteralsFromLog(t *testing.T) {
	logged := "SELECT * FROM calls WHERE date_trunc('day', started_at) = date_trunc('day', now()) - make_interval(days => 3)"
	fp, _ := sqlparse.Fingerprint(logged)
	snap := &model.Snapshot{
		Statements: []model.Statement{
			{QueryID: 1, Query: "SELECT * FROM calls WHERE date_trunc($1, started_at) = date_trunc($2, now()) - make_interval(days => $3)"},
			{QueryID: 2, Query: "SELECT * FROM calls WHERE id = $1"},
			{QueryID: 3, Query: "SELECT * FROM calls WHERE caller = $1"},
		},
		Literals: map[int64]string{2: "SELECT * FROM calls WHERE id = 42"},
	}
	id2, _ := sqlparse.Fingerprint("SELECT * FROM calls WHERE id = 1")
	literalsFromLog(snap, map[string]string{fp: logged, id2: "SELECT * FROM calls WHERE id = 9"})
	if snap.Literals[1] != logged || snap.Literals[2] != "SELECT * FROM calls WHERE id = 42" || snap.Literals[3] != "" {
		t.Errorf("literals: %v", snap.Literals)
	}
}
