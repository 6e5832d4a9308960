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

// TestMemberSpace: the multixact member space is judged by its share and,
// once a tenth is used, by the time left at the measured rate; a space
// whose oldest multixact is newer than the checkpoint's next one is
// empty; the fix freezes the tables with the oldest multixacts and lowers
// the freeze age by the members per multixact this server shows; a space
// that could not be read is said to be skipped, with the grant.
func TestMemberSpace(t *testing.T) {
	snap := func(share, rate float64, oldestMulti, mxAge int64) *model.Snapshot {
		next := int64(5_000_000)
		used := int64(share * model.MemberSpace)
		s := &model.Snapshot{Database: "billing", Missing: map[string]model.Skip{},
			Tables:    []model.Table{{Schema: "public", Name: "usage_events", MxidAge: mxAge}, {Schema: "public", Name: "accounts", MxidAge: mxAge / 2}},
			Databases: []model.DatabaseAge{{Name: "billing", MxidAge: mxAge, AllowConn: true}, {Name: "template0", MxidAge: mxAge / 3}},
			Members: &model.Members{NextMulti: next, NextOffset: (1000 + used) % model.MemberSpace, OldestMulti: oldestMulti, OldestOffset: 1000,
				OldestDatabase: "billing", PagesBefore: 100}}
		if rate > 0 {
			s.Members.Seconds = 10
			s.Members.PagesAfter = 100 + int64(rate*10/model.MembersOfPage)
		}
		return s
	}
	for _, c := range []struct {
		name string
		s    *model.Snapshot
		want model.Severity // -1: none
		in   string
	}{
		{"a little used, idle", snap(0.05, 0, 10, 4_999_990), -1, ""},
		{"a little used, a burst", snap(0.05, 50_000, 10, 4_999_990), -1, ""},
		{"a quarter used", snap(0.30, 0, 10, 4_999_990), model.Warning, "30.0% used"},
		{"45% used, filling fast", snap(0.45, 28_000, 4_900_000, 100_000), model.Critical, "emergency vacuums start in 2.1 hours"},
		{"12% used, filling within the week", snap(0.12, 5_000, 10, 4_999_990), model.Warning, "entries a second"},
		{"past half", snap(0.55, 0, 10, 4_999_990), model.Critical, "already forcing"},
		{"the oldest newer than the checkpoint's next", snap(0.45, 0, 5_000_100, 10), -1, ""},
	} {
		fs, _ := wraparound(c.s)
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want none, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Severity != c.want || !strings.Contains(fs[0].Title, c.in) || fs[0].Object.Name != "multixact member space" ||
			!strings.HasPrefix(fs[0].Fix.SQL, "VACUUM (FREEZE, VERBOSE) public.usage_events;\nVACUUM (FREEZE, VERBOSE) public.accounts;") ||
			fs[0].Verification.Status == model.Confirmed {
			t.Errorf("%s: got %+v", c.name, fs)
		}
	}
	// 45% of the space over 100,000 multixacts is 19,327 members each: a
	// quarter of the space lasts 55,555 multixacts, under any freeze age a
	// server can live with; every database that old is frozen, template0
	// let in for it.
	s := snap(0.45, 28_000, 4_900_000, 100_000)
	s.Statements = []model.Statement{{Query: "SELECT firmware FROM devices WHERE id = $1 FOR SHARE", Calls: 900}, {Query: "SELECT * FROM devices", Calls: 5000},
		{Query: "select 1 from only public.devices x where id = $1 for key share of x", Calls: 40}}
	s.Databases = []model.DatabaseAge{{Name: "billing", MxidAge: 100_000, AllowConn: true}, {Name: "template0", MxidAge: 100_000}, {Name: "template1", MxidAge: 90_000, AllowConn: true}}
	fs, _ := wraparound(s)
	if len(fs) != 1 || !strings.Contains(fs[0].Fix.SQL, "ALTER DATABASE template0 WITH ALLOW_CONNECTIONS true;\n-- from a shell:\nvacuumdb --all --freeze --min-mxid-age=55555 --verbose\nALTER DATABASE template0 WITH ALLOW_CONNECTIONS false;") ||
		strings.Contains(fs[0].Fix.SQL, "ALTER SYSTEM") || !strings.Contains(fs[0].Fix.Summary, "fewer transactions must share-lock") ||
		!strings.Contains(fs[0].Verification.Reason, "27,976 member entries a second") || !hasEvidence(fs[0], "share-locks rows: SELECT firmware FROM devices WHERE id = $1 FOR SHARE", 900) ||
		!hasEvidence(fs[0], "for key share of x", 40) || hasEvidence(fs[0], "SELECT * FROM devices", 5000) {
		t.Errorf("the fix and the measured rate: %+v", fs)
	}
	// 30% over 300 million multixacts is 4.3 members each: 250 million
	// keep a quarter, below the 400 million default.
	fs, _ = wraparound(snap(0.30, 0, 10, 300_000_000))
	if len(fs) != 1 || !strings.Contains(fs[0].Fix.SQL, "ALTER SYSTEM SET autovacuum_multixact_freeze_max_age = 250000000;") {
		t.Errorf("the freeze age lowered: %+v", fs)
	}
	s = snap(0, 0, 10, 10)
	s.Members = nil
	s.Missing[model.SrcMembers] = model.Skip{Reason: "only a superuser may read it", Fix: "GRANT EXECUTE ON FUNCTION pg_control_checkpoint() TO mon"}
	if _, sk := wraparound(s); len(sk) != 1 || !strings.Contains(sk[0].Fix, "pg_control_checkpoint") {
		t.Errorf("unread member space: %+v", sk)
	}
}

// hasEvidence says whether a finding carries an evidence line whose label
// holds part, with value v.
func hasEvidence(f model.Finding, part string, v float64) bool {
	for _, e := range f.Evidence {
		if strings.Contains(e.Label, part) && e.Value == v {
			return true
		}
	}
	return false
}

// TestWraparoundLog: each limit the log warned or refused at is one
// critical finding with its counts; a log without them gives none.
func TestWraparoundLog(t *testing.T) {
	in := LogInput{Name: "the server log", Events: model.LogEvents{Wraparound: []model.WraparoundLogged{
		{Limit: model.LimitMembers, Warnings: 121640, Least: 243568, Database: "the database with OID 4", Refusals: 3},
		{Limit: model.LimitXIDs, Refusals: 2, Least: -1, Database: "ledger"}}}}
	fs := wraparoundLog(in)
	if len(fs) != 2 || fs[0].Severity != model.Critical || !strings.Contains(fs[0].Title, "refused 3 commands at its multixact members limit; the server log warns 121,640 times that the database with OID 4 must be vacuumed before its multixact members run out (243,568 left at the fewest)") ||
		!strings.Contains(fs[1].Title, "refused 2 commands at its transaction ids limit (database ledger)") || !strings.Contains(fs[0].Fix.Summary, "template0") {
		t.Errorf("got %+v", fs)
	}
	if fs := wraparoundLog(LogInput{}); len(fs) != 0 {
		t.Errorf("a quiet log: %+v", fs)
	}
}
