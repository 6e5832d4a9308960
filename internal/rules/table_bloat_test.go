package rules

import (
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Dead rows of a table vacuumed moments ago are one round's churn (info);
// the same rows an hour after its last vacuum are a backlog (warning).
func TestDeadRowsOfOneRound(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		ago  time.Duration
		want model.Severity
	}{
		{"vacuumed 2 s ago", 2 * time.Second, model.Info},
		{"vacuumed an hour ago", time.Hour, model.Warning},
	} {
		t.Run(c.name, func(t *testing.T) {
			last := now.Add(-c.ago)
			s := &model.Snapshot{Database: "auth", CollectedAt: now, Settings: map[string]model.Setting{"autovacuum_naptime": {Value: "1"},
				"autovacuum_vacuum_threshold": {Value: "1000"}, "autovacuum_vacuum_scale_factor": {Value: "0"}},
				Tables: []model.Table{{Schema: "public", Name: "access_grants", Live: 20000, Dead: 40000, Reltuples: 20000, AutovacuumEnabled: true, LastVacuum: &last}}}
			fs, _ := tableBloat(s)
			if len(fs) != 1 || fs[0].Severity != c.want {
				t.Fatalf("want one finding at %v, got %+v", c.want, fs)
			}
		})
	}
}
