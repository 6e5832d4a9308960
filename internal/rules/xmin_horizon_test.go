package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// horizonSnapshot is the database "shop" at a fixed time, with a table
// vacuumed vacuumedAgo before collection that VACUUM left dead rows in,
// and the holders given.
func horizonSnapshot(dead int64, vacuumedAgo time.Duration, hs ...model.XminHolder) *model.Snapshot {
	now := time.Unix(1_800_000_000, 0)
	vac := now.Add(-vacuumedAgo)
	return &model.Snapshot{CollectedAt: now, Database: "shop", Holders: hs,
		Tables: []model.Table{
			{Schema: "public", Name: "carts", Live: 50000, Dead: dead, Updated: 90000, LastVacuum: &vac},
			{Schema: "public", Name: "countries", Live: 200},
		}}
}

func ago(d time.Duration) *time.Time {
	t := time.Unix(1_800_000_000, 0).Add(-d)
	return &t
}

// TestXminHorizon: each kind of holder is reported with its object and
// the statement that releases it, at the severity its age and cost give;
// holders of another database, young ones, a short transaction and a
// logical slot's catalog_xmin are not.
func TestXminHorizon(t *testing.T) {
	prepared := model.XminHolder{Kind: model.HolderPrepared, Name: "tx-42", Database: "shop", User: "app", XminAge: 5000, Since: ago(10 * time.Minute)}
	idle := model.XminHolder{Kind: model.HolderSession, Name: "901", PID: 901, Database: "shop", User: "web", State: "idle in transaction", XminAge: 40000, Since: ago(2 * time.Hour)}
	for _, c := range []struct {
		name    string
		s       *model.Snapshot
		want    model.Severity // -1: no finding
		object  string
		fix     string
		retains bool
	}{
		{"an orphaned prepared transaction", horizonSnapshot(3000, time.Minute, prepared), model.Warning, "tx-42", "ROLLBACK PREPARED 'tx-42'", true},
		{"a prepared transaction of another database", horizonSnapshot(3000, time.Minute, func() model.XminHolder { h := prepared; h.Database = "billing"; return h }()), -1, "", "", false},
		{"a young prepared transaction (a coordinator at work)", horizonSnapshot(0, time.Minute, func() model.XminHolder { h := prepared; h.XminAge = 3; return h }()), -1, "", "", false},
		{"vacuumed before it began: nothing it kept", horizonSnapshot(3000, time.Hour, prepared), model.Warning, "tx-42", "ROLLBACK PREPARED", false},
		{"a session idle in its transaction for hours", horizonSnapshot(20000, time.Minute, idle), model.Warning, "pid 901", "pg_terminate_backend(901)", true},
		{"a 20-second transaction is no holder", horizonSnapshot(20000, time.Second, func() model.XminHolder { h := idle; h.Since = ago(20 * time.Second); return h }()), -1, "", "", false},
		{"another role's session, far behind, start unseen", horizonSnapshot(0, time.Minute, model.XminHolder{Kind: model.HolderSession, Name: "88", PID: 88, Database: "shop", XminAge: 3_000_000}), model.Warning, "pid 88", "pg_cancel_backend(88)", false},
		{"a long report, nothing kept", horizonSnapshot(0, time.Minute, model.XminHolder{Kind: model.HolderSession, Name: "77", PID: 77, Database: "shop", State: "active", XminAge: 2000, Since: ago(5 * time.Minute)}), model.Info, "pid 77", "pg_cancel_backend(77)", false},
		{"an inactive physical slot", horizonSnapshot(1_500_000, 10*time.Minute, model.XminHolder{Kind: model.HolderSlot, Name: "standby_b", XminAge: 150_000_000, RetainedWAL: 40 << 30}), model.Critical, "standby_b", "pg_drop_replication_slot('standby_b')", true},
		{"a logical slot holds the catalogs only", horizonSnapshot(0, time.Minute, model.XminHolder{Kind: model.HolderSlot, Name: "cdc", Database: "shop", CatalogOnly: true, XminAge: 9_000_000}), -1, "", "", false},
		{"a standby's feedback far behind", horizonSnapshot(0, time.Minute, model.XminHolder{Kind: model.HolderStandby, Name: "replica1", Active: true, XminAge: 2_000_000}), model.Warning, "replica1", "hot_standby_feedback", false},
	} {
		fs, _ := xminHorizon(c.s)
		if c.want < 0 {
			if len(fs) != 0 {
				t.Errorf("%s: want no finding, got %q", c.name, fs[0].Title)
			}
			continue
		}
		if len(fs) != 1 {
			t.Fatalf("%s: want one finding, got %d", c.name, len(fs))
		}
		f := fs[0]
		if f.Severity != c.want || !strings.Contains(f.Object.Name, c.object) || !strings.Contains(f.Fix.SQL, c.fix) {
			t.Errorf("%s: got %s on %q with fix %q", c.name, f.Severity, f.Object.Name, f.Fix.SQL)
		}
		kept := false
		for _, e := range f.Evidence {
			kept = kept || strings.HasPrefix(e.Label, "dead rows VACUUM left")
		}
		if kept != c.retains {
			t.Errorf("%s: evidence of dead rows kept = %v, want %v: %+v", c.name, kept, c.retains, f.Evidence)
		}
		if f.Experiment == nil || f.Experiment.Kind != model.ExpHorizon || f.Experiment.Table.Name != "carts" {
			t.Errorf("%s: experiment %+v, want vacuum-horizon on carts", c.name, f.Experiment)
		}
	}
}

// TestXminHorizonUnseen: a role that cannot see when another role's
// transaction began is told so, with the grant, instead of silence.
func TestXminHorizonUnseen(t *testing.T) {
	s := horizonSnapshot(0, time.Minute, model.XminHolder{Kind: model.HolderSession, Name: "88", PID: 88, Database: "shop", XminAge: 40_000})
	s.User = "monitor"
	fs, skips := xminHorizon(s)
	if len(fs) != 0 || len(skips) != 1 || !strings.Contains(skips[0].Fix, "pg_read_all_stats TO monitor") {
		t.Errorf("findings %+v, skips %+v", fs, skips)
	}
}

// TestPreparedHeadsAChain: sessions blocked by pid 0 wait for a prepared
// transaction's locks. xmin-horizon's finding on it counts them, and the
// lock chain names it and defers to that finding (one problem, one
// finding at warning).
func TestPreparedHeadsAChain(t *testing.T) {
	s := horizonSnapshot(0, time.Minute, model.XminHolder{Kind: model.HolderPrepared, Name: "xfer-77", Database: "shop", User: "app", XminAge: 8000, Since: ago(time.Minute)})
	s.Sampling = &model.Sampling{}
	for i := 0; i < 5; i++ {
		s.Sampling.Samples = append(s.Sampling.Samples, model.ActivitySample{Backends: []model.Backend{
			{PID: 10, Database: "shop", State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{0}, Query: "UPDATE transfers SET state = $1 WHERE id = $2"},
			{PID: 11, Database: "shop", State: "active", WaitType: "Lock", Wait: "transactionid", BlockedBy: []int{0}, Query: "UPDATE transfers SET state = $1 WHERE id = $2"},
			{PID: 12, Database: "shop", State: "active"},
		}})
	}
	hs, _ := xminHorizon(s)
	if len(hs) != 1 || !strings.Contains(hs[0].Title, "2 sessions waited for its locks") {
		t.Fatalf("xmin-horizon: %+v", hs)
	}
	ls, _ := lockContention(s)
	if len(ls) != 1 || ls[0].Severity != model.Info || !strings.Contains(ls[0].Title, "prepared transaction 'xfer-77'") ||
		!strings.Contains(ls[0].Fix.SQL, "ROLLBACK PREPARED 'xfer-77'") {
		t.Fatalf("lock-contention: %+v", ls)
	}
}

// TestDeadRowsHeldAreTheHolders: dead rows a reported holder keeps are
// not VACUUM's to remove; table-bloat says so, at info, and points to
// xmin-horizon.
func TestDeadRowsHeldAreTheHolders(t *testing.T) {
	s := horizonSnapshot(200000, time.Minute)
	s.Tables[0].Live = 50000
	fs, _ := tableBloat(s)
	if len(fs) == 0 || fs[0].Severity < model.Warning {
		t.Fatalf("without a holder: %+v", fs)
	}
	s.Holders = []model.XminHolder{{Kind: model.HolderPrepared, Name: "tx-1", Database: "shop", XminAge: 9000, Since: ago(time.Hour)}}
	fs, _ = tableBloat(s)
	if len(fs) == 0 || fs[0].Severity != model.Info || !strings.Contains(fs[0].Title, "see xmin-horizon") {
		t.Fatalf("with a prepared transaction holding the horizon: %+v", fs)
	}
}
