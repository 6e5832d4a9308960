package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// indexSnapshot is a table that wrote writes rows, with the indexes
// given, and statistics reset resetAgo before collection (0: never).
func indexSnapshot(writes int64, resetAgo time.Duration, ixs ...model.Index) *model.Snapshot {
	now := time.Unix(1_800_000_000, 0)
	s := &model.Snapshot{CollectedAt: now, Database: "shop",
		Tables: []model.Table{{Schema: "public", Name: "audit", Inserted: writes, RelPages: 100}}}
	if resetAgo > 0 {
		r := now.Add(-resetAgo)
		s.DatabaseStats.StatsReset = &r
	}
	for _, ix := range ixs {
		ix.Schema, ix.Table, ix.Method = "public", "audit", "btree"
		s.Indexes = append(s.Indexes, ix)
	}
	return s
}

// TestIndexesNobodyReads: each rule fires on its class with its object,
// at the severity its thresholds give, and never on an index that
// enforces a constraint.
func TestIndexesNobodyReads(t *testing.T) {
	pkey := model.Index{Name: "audit_pkey", Columns: []string{"id"}, Primary: true, Unique: true, Valid: true}
	used := model.Index{Name: "audit_actor_action_idx", Columns: []string{"actor", "action"}, Valid: true, Scans: 40}
	actor := model.Index{Name: "audit_actor_idx", Columns: []string{"actor"}, Valid: true, Scans: 3}
	actorDesc := model.Index{Name: "audit_actor_desc_idx", Columns: []string{"actor"}, Desc: []bool{true}, Valid: true, Scans: 3}
	partial := model.Index{Name: "audit_actor_open_idx", Columns: []string{"actor"}, Predicate: "(closed IS NULL)", Valid: true, Scans: 3}
	uniqueActor := model.Index{Name: "audit_actor_key", Columns: []string{"actor"}, Unique: true, Valid: true, Scans: 3}
	invalid := model.Index{Name: "audit_target_uniq", Columns: []string{"target"}, Unique: true, Valid: false}
	unused := model.Index{Name: "audit_detail_idx", Columns: []string{"detail"}, Valid: true, AgeXacts: 90000}
	for _, c := range []struct {
		name string
		s    *model.Snapshot
		rule func(*model.Snapshot) ([]model.Finding, []model.Skip)
		want map[string]model.Severity // object -> severity
	}{
		{"a prefix of a used index", indexSnapshot(50000, 0, actor, used), duplicateIndex, map[string]model.Severity{"public.audit_actor_idx": model.Warning}},
		{"another direction is no duplicate", indexSnapshot(50000, 0, actorDesc, used), duplicateIndex, map[string]model.Severity{}},
		{"a partial index is no duplicate", indexSnapshot(50000, 0, partial, used), duplicateIndex, map[string]model.Severity{}},
		{"a unique prefix enforces a constraint", indexSnapshot(50000, 0, uniqueActor, used), duplicateIndex, map[string]model.Severity{}},
		{"the same columns twice: one reported", indexSnapshot(50000, 0, actor, actorDesc, model.Index{Name: "audit_actor_idx2", Columns: []string{"actor"}, Valid: true}), duplicateIndex,
			map[string]model.Severity{"public.audit_actor_idx": model.Warning}},
		{"invalid and ready: written, never read", indexSnapshot(50000, 0, pkey, func() model.Index { ix := invalid; ix.Ready = true; return ix }()), invalidIndex,
			map[string]model.Severity{"public.audit_target_uniq": model.Warning}},
		{"invalid and never ready: a unique build that met duplicates, written by nobody", indexSnapshot(50000, 0, pkey, invalid), invalidIndex,
			map[string]model.Severity{"public.audit_target_uniq": model.Info}},
		{"never scanned, old, on a written table", indexSnapshot(50000, 30*24*time.Hour, pkey, used, unused), unusedIndex, map[string]model.Severity{"public.audit_detail_idx": model.Warning}},
		{"never scanned but built a moment ago", indexSnapshot(50000, 0, func() model.Index { ix := unused; ix.AgeXacts = 40; return ix }()), unusedIndex, map[string]model.Severity{}},
		{"never scanned, so old its age wrapped", indexSnapshot(50000, 0, func() model.Index { ix := unused; ix.AgeXacts = -5; return ix }()), unusedIndex, map[string]model.Severity{"public.audit_detail_idx": model.Warning}},
		{"never scanned on a table nobody writes", indexSnapshot(200, 0, unused), unusedIndex, map[string]model.Severity{}},
		{"a foreign key's index waits for a parent's delete", indexSnapshot(50000, 0, func() model.Index { ix := unused; ix.ForeignKey = true; return ix }()), unusedIndex, map[string]model.Severity{"public.audit_detail_idx": model.Info}},
		{"unscanned but covered or invalid: the other rules'", indexSnapshot(50000, 0, used, func() model.Index { ix := actor; ix.Scans, ix.AgeXacts = 0, 90000; return ix }(), func() model.Index { ix := invalid; ix.AgeXacts = 90000; return ix }()), unusedIndex, map[string]model.Severity{}},
		{"a primary key is never unused", indexSnapshot(50000, 0, func() model.Index { ix := pkey; ix.AgeXacts = 90000; return ix }()), unusedIndex, map[string]model.Severity{}},
	} {
		fs, _ := c.rule(c.s)
		got := map[string]model.Severity{}
		for _, f := range fs {
			got[f.Object.Name] = f.Severity
			if f.Fix.SQL == "" || f.Object.Name == "public.audit_pkey" {
				t.Errorf("%s: %s has fix %q", c.name, f.Object.Name, f.Fix.SQL)
			}
			if f.Severity >= model.Warning && f.Rule != InvalidIndexID && f.Experiment == nil {
				t.Errorf("%s: %s at warning without an experiment", c.name, f.Object.Name)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s at %s, want %s", c.name, k, got[k], v)
			}
		}
	}
}

// TestInvalidIndexSaysWhoWritesIt: an invalid index that never became
// ready is written by no statement, and the finding must not say that
// every write maintains it (nor measure a write cost); one that is ready
// and unique still refuses new duplicates.
func TestInvalidIndexSaysWhoWritesIt(t *testing.T) {
	ix := model.Index{Name: "payments_idem_key", Columns: []string{"idempotency_key"}, Unique: true}
	fs, _ := invalidIndex(indexSnapshot(50000, 0, ix))
	if len(fs) != 1 || strings.Contains(fs[0].Title, "every write still maintains it") || !strings.Contains(fs[0].Title, "no write maintains it") || fs[0].Experiment != nil {
		t.Errorf("not ready: %+v", fs)
	}
	ix.Ready = true
	fs, _ = invalidIndex(indexSnapshot(50000, 0, ix))
	if len(fs) != 1 || !strings.Contains(fs[0].Title, "every write still maintains it") || !strings.Contains(fs[0].Impact.Summary, "refuses new duplicate keys") || fs[0].Experiment == nil {
		t.Errorf("ready: %+v", fs)
	}
}
