package collect

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

func TestParseSetConfig(t *testing.T) {
	got := ParseSetConfig([]string{"jit=off", "search_path=app, public", "JIT_Above_Cost=1e+06", "broken", "=x", "application_name=a=b"})
	want := map[string]string{"jit": "off", "search_path": "app, public", "jit_above_cost": "1e+06", "application_name": "a=b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestPgssSelectFollowsVersion(t *testing.T) {
	pg12 := map[string]bool{"queryid": true, "query": true, "userid": true, "calls": true, "total_time": true, "rows": true, "shared_blks_hit": true, "shared_blks_read": true}
	sql, jit := PgssSelect("public", pg12)
	if jit || !strings.Contains(sql, "coalesce(total_time, 0)::float8 AS total_exec_time") || !strings.Contains(sql, "0)::float8 AS jit_functions") || !strings.Contains(sql, "ORDER BY total_time") {
		t.Errorf("PG12 select wrong (jit=%v): %s", jit, sql)
	}
	pg15 := map[string]bool{"queryid": true, "query": true, "userid": true, "calls": true, "total_exec_time": true, "total_plan_time": true,
		"jit_functions": true, "jit_generation_time": true, "wal_fpi": true}
	sql, jit = PgssSelect("ext", pg15)
	if !jit || !strings.Contains(sql, `FROM ext.pg_stat_statements`) || !strings.Contains(sql, "coalesce(jit_functions, 0)") || !strings.Contains(sql, "coalesce(wal_fpi, 0)") {
		t.Errorf("PG15 select wrong (jit=%v): %s", jit, sql)
	}
}

func FuzzParseSetConfig(f *testing.F) {
	f.Add("jit=off", "search_path=a,b")
	f.Fuzz(func(t *testing.T, a, b string) {
		for k := range ParseSetConfig([]string{a, b}) {
			if k == "" || strings.ContainsRune(k, '=') {
				t.Fatalf("bad key %q", k)
			}
		}
	})
}

// TestVacuumOptions: a table's autovacuum_vacuum_* storage parameters
// are kept by the rest of their name, numbers only.
func TestVacuumOptions(t *testing.T) {
	got := vacuumOptions([]string{"autovacuum_vacuum_cost_delay=100", "autovacuum_vacuum_scale_factor=0.01", "autovacuum_enabled=off", "autovacuum_vacuum_cost_limit=x", "fillfactor=70"})
	if len(got) != 2 || got["cost_delay"] != 100 || got["scale_factor"] != 0.01 {
		t.Errorf("got %v", got)
	}
	if vacuumOptions(nil) != nil {
		t.Error("a table without options gets a map")
	}
}

func FuzzVacuumOptions(f *testing.F) {
	f.Add("autovacuum_vacuum_cost_delay=20", "autovacuum_vacuum_threshold=50")
	f.Fuzz(func(t *testing.T, a, b string) {
		for k, v := range vacuumOptions([]string{a, b}) {
			if strings.ContainsRune(k, '=') || v != v {
				t.Fatalf("bad option %q = %v", k, v)
			}
		}
		var tb model.Table
		storageOptions(&tb, []string{a, b})
		if tb.FreezeMaxAge < 0 {
			t.Fatalf("a negative freeze age from %q, %q", a, b)
		}
	})
}

// TestStorageOptions: a table's reloptions as PostgreSQL takes them.
func TestStorageOptions(t *testing.T) {
	for _, c := range []struct {
		opts    []string
		enabled bool
		freeze  int64
	}{
		{nil, true, 0},
		{[]string{"autovacuum_enabled=false"}, false, 0},
		{[]string{"autovacuum_enabled=OFF", "autovacuum_freeze_max_age=100000"}, false, 100000},
		{[]string{"autovacuum_enabled=of"}, false, 0},
		{[]string{"autovacuum_enabled=f"}, false, 0},
		{[]string{"autovacuum_enabled=n"}, false, 0},
		{[]string{"autovacuum_enabled=on"}, true, 0},
		{[]string{"autovacuum_enabled=o"}, true, 0}, // ambiguous: PostgreSQL refuses it
		{[]string{"fillfactor=70", "autovacuum_enabled=true"}, true, 0},
		{[]string{"vacuum_truncate=false"}, true, 0},
		{[]string{"vacuum_truncate=off", "autovacuum_enabled=on"}, true, 0},
		{[]string{"vacuum_truncate=true"}, true, 0},
	} {
		var tb model.Table
		storageOptions(&tb, c.opts)
		if tb.AutovacuumEnabled != c.enabled || tb.FreezeMaxAge != c.freeze {
			t.Errorf("%v: enabled %v, freeze max age %d", c.opts, tb.AutovacuumEnabled, tb.FreezeMaxAge)
		}
		if keeps := slices.ContainsFunc(c.opts, func(o string) bool { return strings.HasPrefix(o, "vacuum_truncate=f") || o == "vacuum_truncate=off" }); tb.KeepsEmptyEnd != keeps {
			t.Errorf("%v: keeps its empty end %v", c.opts, tb.KeepsEmptyEnd)
		}
	}
}
