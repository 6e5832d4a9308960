package sqlparse

import (
	"reflect"
	"strings"
	"testing"
)

func TestSafeToAnalyze(t *testing.T) {
	for sql, safe := range map[string]bool{
		"SELECT o.id FROM orders o WHERE o.customer_id = $1":                                        true,
		"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM t WHERE n < 5) SELECT * FROM t": true,
		"UPDATE jobs SET claimed = now() WHERE id = $1":                                             false,
		"SELECT * FROM jobs WHERE id = $1 FOR UPDATE SKIP LOCKED":                                   false,
		"WITH d AS (DELETE FROM jobs RETURNING id) SELECT * FROM d":                                 false,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity":                                    false,
		"SELECT pg_sleep(10)":                             false,
		"SELECT nextval('s')":                             false,
		"SELECT * INTO t2 FROM t":                         false,
		"SELECT (SELECT set_config('jit', 'off', false))": false,
	} {
		s, err := Parse(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if ok, why := s.SafeToAnalyze(); ok != safe {
			t.Errorf("%s: safe=%v (%s), want %v", sql, ok, why, safe)
		}
	}
}

func TestParamColumns(t *testing.T) {
	s, err := Parse(`SELECT o.id, (SELECT sum(l.amount) FROM order_lines l WHERE l.order_id = o.id)
		FROM orders o JOIN customers c ON c.id = o.customer_id AND c.region = $2
		WHERE o.customer_id = $1 AND o.status = ANY($3::text[]) AND $4 < o.created_at
		GROUP BY o.id HAVING count(*) > $5`)
	if err != nil {
		t.Fatal(err)
	}
	got := s.ParamColumns()
	want := map[int][]Column{
		1: {{Table: "orders", Column: "customer_id"}},
		2: {{Table: "customers", Column: "region"}},
		3: {{Table: "orders", Column: "status"}},
		4: {{Table: "orders", Column: "created_at"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParamColumns = %+v\nwant %+v", got, want)
	}
	if n := s.ParamCount(); n != 5 {
		t.Errorf("ParamCount = %d", n)
	}
}

func TestUnqualifiedColumnCandidates(t *testing.T) {
	s, _ := Parse("SELECT * FROM a, public.b WHERE x = $1")
	got := s.ParamColumns()[1]
	if len(got) != 2 || got[0].Table != "a" || got[1].Table != "b" || got[1].Schema != "public" {
		t.Errorf("candidates = %+v", got)
	}
}

func TestBareTargetParams(t *testing.T) {
	s, _ := Parse("WITH RECURSIVE r(d) AS (SELECT $2 AS d UNION ALL SELECT r.d + $3 FROM r WHERE r.d < $4) SELECT $5, d FROM r WHERE d = $1")
	if got := s.BareTargetParams(); !reflect.DeepEqual(got, []int{2, 5}) {
		t.Errorf("BareTargetParams = %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse("SELECT 1; SELECT 2"); err != ErrMultiple {
		t.Errorf("multiple: %v", err)
	}
	if _, err := Parse("SELEC 1"); err == nil || !strings.Contains(err.Error(), "syntax") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := Parse("-- only a comment"); err == nil {
		t.Error("comment only accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("SELECT a FROM t WHERE b = $1")
	f.Add("WITH RECURSIVE typeinfo_tree(oid) AS (SELECT $2) SELECT * FROM typeinfo_tree WHERE oid = any($1::oid[])")
	f.Fuzz(func(t *testing.T, sql string) {
		s, err := Parse(sql)
		if err != nil {
			return
		}
		s.SafeToAnalyze()
		s.ParamColumns()
		s.BareTargetParams()
		_ = s.Kind()
	})
}
