package replay

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

func TestChangeOf(t *testing.T) {
	for _, c := range []struct {
		name     string
		f        model.Finding
		apply    []string
		settings map[string]string
		pool     int
		poolA    int
		err      string
	}{
		{name: "an index", f: model.Finding{Rule: "missing-index", Fix: model.Fix{SQL: "CREATE INDEX CONCURRENTLY jobs_pending ON public.jobs (created) WHERE status = 'pending';"}},
			apply: []string{"CREATE INDEX jobs_pending ON public.jobs (created) WHERE status = 'pending'"}},
		{name: "jit off for a role", f: model.Finding{Rule: "jit-overhead", Fix: model.Fix{SQL: `ALTER ROLE "app" IN DATABASE "shop" SET jit = off;`}},
			settings: map[string]string{"jit": "off"}},
		{name: "a quoted value and two statements", f: model.Finding{Rule: "x", Fix: model.Fix{SQL: "ALTER ROLE app SET work_mem TO '64MB';\nANALYZE public.t;"}},
			settings: map[string]string{"work_mem": "64MB"}, apply: []string{"ANALYZE public.t"}},
		{name: "a pool", f: model.Finding{Rule: "connection-pressure", Experiment: &model.Experiment{Kind: model.ExpConcurrency, Pool: 2, PoolNow: 6}},
			pool: 2, poolA: 6},
		{name: "a placeholder in the fix", f: model.Finding{Rule: "cpu-hotspot", Fix: model.Fix{Summary: "turn JIT off", SQL: "ALTER ROLE <app role> SET jit = off;"}}, err: "not something a replay can apply"},
		{name: "code to change", f: model.Finding{Rule: "client-stall", Fix: model.Fix{Summary: "commit before the client does other work"}}, err: "--apply"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch, err := ChangeOf(c.f)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(ch.B.Apply, "|") != strings.Join(c.apply, "|") || ch.B.Pool != c.pool || ch.PoolA != c.poolA || len(ch.B.Settings) != len(c.settings) {
				t.Fatalf("got %+v (pool A %d)", ch.B, ch.PoolA)
			}
			for k, v := range c.settings {
				if ch.B.Settings[k] != v {
					t.Fatalf("setting %s = %q, want %q", k, ch.B.Settings[k], v)
				}
			}
		})
	}
}
