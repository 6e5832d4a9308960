package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestWraparound: a table far past its freeze age is a warning with what
// holds it back; half-way to the limit, or days from it at the measured
// rate, is critical; a table at an ordinary age is not reported, and
// another database of the server is.
func TestWraparound(t *testing.T) {
	snap := func(age, ownMax int64, rate float64, hs ...model.XminHolder) *model.Snapshot {
		s := &model.Snapshot{Database: "ledger", Holders: hs,
			Settings: map[string]model.Setting{"autovacuum_freeze_max_age": {Value: "200000000"}},
			Tables:   []model.Table{{Schema: "public", Name: "entries", FrozenAge: age, FreezeMaxAge: ownMax, AutovacuumEnabled: true}}}
		if rate > 0 {
			s.XIDs = &model.XIDClock{Before: 1000, After: 1000 + int64(rate*10), Seconds: 10}
		}
		return s
	}
	prepared := model.XminHolder{Kind: model.HolderPrepared, Name: "tx-9", Database: "ledger", XminAge: 350_000_000}
	for _, c := range []struct {
		name string
		s    *model.Snapshot
		want model.Severity // -1: none
		in   string
	}{
		{"an ordinary age", snap(180_000_000, 0, 0), -1, ""},
		{"past 1.5x its freeze age, held back", snap(340_000_000, 0, 0, prepared), model.Warning, "prepared transaction tx-9"},
		{"its own freeze age, lower", snap(160_000, 100_000, 0), model.Warning, "1.6x"},
		{"half-way to the limit", snap(1_100_000_000, 0, 0), model.Critical, "1,100,000,000"},
		{"a busy server, its freezing not yet due", snap(190_000_000, 0, 4000), -1, ""},
		{"due, and days from the limit at the rate measured", snap(250_000_000, 0, 4000), model.Critical, ""},
	} {
		fs, _ := wraparound(c.s)
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want none, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Severity != c.want || !strings.Contains(fs[0].Title, c.in) || !strings.Contains(fs[0].Fix.SQL, "VACUUM (FREEZE, VERBOSE) public.entries") {
			t.Errorf("%s: got %+v", c.name, fs)
		}
	}
	fs, _ := wraparound(&model.Snapshot{Database: "ledger", Databases: []model.DatabaseAge{{Name: "ledger", FrozenAge: 10}, {Name: "tenant_old", FrozenAge: 400_000_000}}})
	if len(fs) != 1 || fs[0].Object.Name != "tenant_old" || !strings.Contains(fs[0].Fix.SQL, "vacuumdb --freeze") {
		t.Errorf("another database: %+v", fs)
	}
}

// TestWraparoundFixesThatRun: on a server whose autovacuum_freeze_max_age
// is 2 billion, a database at 1.75 billion is given a vacuumdb that
// selects its tables (--min-xid-age below their ages: 200 million, not the
// 2 billion that selects nothing), the setting that let the age grow is
// named with the statement that puts it back, template0, which accepts no
// connections, gets the ALLOW_CONNECTIONS steps around it, and the
// checked database its own vacuumdb beside its table's VACUUM.
func TestWraparoundFixesThatRun(t *testing.T) {
	s := &model.Snapshot{Database: "ledger",
		Settings: map[string]model.Setting{"autovacuum_freeze_max_age": {Value: "2000000000"}},
		Tables:   []model.Table{{Schema: "public", Name: "entries", FrozenAge: 1_750_000_000, AutovacuumEnabled: true}},
		Databases: []model.DatabaseAge{{Name: "ledger", FrozenAge: 1_750_000_000, AllowConn: true},
			{Name: "archive", FrozenAge: 1_750_000_100, AllowConn: true}, {Name: "template0", FrozenAge: 1_750_000_200}}}
	fs, _ := wraparound(s)
	got := map[string]model.Finding{}
	for _, f := range fs {
		got[f.Object.Name] = f
	}
	if f := got["archive"]; !strings.Contains(f.Fix.SQL, "vacuumdb --freeze --min-xid-age=200000000 --dbname=archive") ||
		!strings.Contains(f.Title, "autovacuum_freeze_max_age = 2,000,000,000") || !strings.Contains(f.Fix.SQL, "ALTER SYSTEM SET autovacuum_freeze_max_age = 200000000") {
		t.Errorf("archive: %q\n%s", f.Title, f.Fix.SQL)
	}
	if f := got["template0"]; !strings.HasPrefix(f.Fix.SQL, "ALTER DATABASE template0 WITH ALLOW_CONNECTIONS true;") ||
		!strings.Contains(f.Fix.SQL, "ALTER DATABASE template0 WITH ALLOW_CONNECTIONS false;") {
		t.Errorf("template0: %s", f.Fix.SQL)
	}
	if f := got["public.entries"]; f.Severity != model.Critical || !strings.Contains(f.Title, "autovacuum_freeze_max_age = 2,000,000,000") {
		t.Errorf("the table: %q", f.Title)
	}
	// The checked database's own age moves only once its catalogs are
	// frozen too: freezing the named table alone leaves it at 1.75 billion.
	if f := got["ledger"]; !strings.Contains(f.Fix.SQL, "vacuumdb --freeze --min-xid-age=200000000 --dbname=ledger") || !strings.Contains(f.Title, "the system catalogs included") {
		t.Errorf("the checked database: %q\n%s", f.Title, f.Fix.SQL)
	}
}
