package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

func TestPlannerSettings(t *testing.T) {
	base := func(rpc string, hit, read int64, readMS float64, timing string) *model.Snapshot {
		return &model.Snapshot{Database: "shop", Statements: []model.Statement{{QueryID: 1, Query: "SELECT 1", Calls: 10}},
			Settings:      map[string]model.Setting{"random_page_cost": {Value: rpc, Source: "default"}, "seq_page_cost": {Value: "1"}, "track_io_timing": {Value: timing}},
			DatabaseStats: model.DatabaseStats{BlocksKnown: true, BlksHit: hit, BlksRead: read, BlkReadMS: readMS}}
	}
	for _, c := range []struct {
		name  string
		snap  *model.Snapshot
		fires bool
	}{
		{name: "the default on a cached database", snap: base("4", 1000000, 500, 0, "off"), fires: true},
		{name: "the default on fast storage (track_io_timing)", snap: base("4", 100000, 50000, 2500, "on"), fires: true},
		{name: "the default on slow storage", snap: base("4", 100000, 50000, 250000, "on"), fires: false},
		{name: "the default on storage not timed and often missed", snap: base("4", 100000, 50000, 0, "off"), fires: false},
		{name: "already low", snap: base("1.1", 1000000, 500, 0, "off"), fires: false},
		{name: "too few reads to judge", snap: base("4", 900, 10, 0, "off"), fires: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := plannerSettings(c.snap)
			if (len(fs) == 1) != c.fires {
				t.Fatalf("fired %d, want %v", len(fs), c.fires)
			}
			if !c.fires {
				return
			}
			f := fs[0]
			if f.Severity != model.Info || f.Experiment == nil || f.Experiment.Kind != model.ExpPlannerSetting || f.Experiment.FixSettings["random_page_cost"] != "1.1" ||
				!strings.Contains(f.Fix.SQL, "ALTER DATABASE shop SET random_page_cost = 1.1") {
				t.Errorf("%+v %s", f.Experiment, f.Fix.SQL)
			}
		})
	}
	t.Run("a database setting is read", func(t *testing.T) {
		s := base("4", 1000000, 500, 0, "off")
		s.RoleSettings = []model.RoleSetting{{Database: "shop", Settings: map[string]string{"random_page_cost": "1.1"}}}
		if fs, _ := plannerSettings(s); len(fs) > 0 {
			t.Errorf("fired with ALTER DATABASE ... SET random_page_cost = 1.1: %s", fs[0].Title)
		}
	})
}
