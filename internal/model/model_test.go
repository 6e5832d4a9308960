package model

import "testing"

func TestOneSemicolon(t *testing.T) {
	for in, want := range map[string]string{
		"UPDATE t SET a = 1 WHERE id = $1;;":                    "UPDATE t SET a = 1 WHERE id = $1;",
		"SELECT 1; ;\nSELECT 2;;  -- again;;":                   "SELECT 1;\nSELECT 2;  -- again;;",
		"CREATE INDEX CONCURRENTLY ON t (a);":                   "CREATE INDEX CONCURRENTLY ON t (a);",
		"SET lock_timeout = '2s';  -- give up\nALTER TABLE t;;": "SET lock_timeout = '2s';  -- give up\nALTER TABLE t;",
	} {
		f := Finding{Fix: Fix{SQL: in}}
		f.Clamp()
		if f.Fix.SQL != want {
			t.Errorf("%q: %q, want %q", in, f.Fix.SQL, want)
		}
	}
}

func TestIdentityIsStableAcrossRuns(t *testing.T) {
	id := func(o Object) string { f := Finding{Rule: "r", Object: o}; return f.Identity() }
	stmt := Object{Kind: "statement", Name: "public.jobs: SELECT * FROM jobs WHERE status = $1", QueryID: "123", Fingerprint: "fp1", Role: "app"}
	again := stmt
	again.QueryID = "-98765" // the same statement on a database created afresh
	if id(stmt) != id(again) {
		t.Error("a new queryid changed the id of a statement with the same fingerprint")
	}
	other := stmt
	other.Name = "public.events: SELECT * FROM jobs WHERE status = $1"
	if id(stmt) == id(other) {
		t.Error("the same statement's findings on two tables share an id")
	}
	session := Object{Kind: "session", Name: "pid 4242: INSERT INTO exported VALUES ($1)", Fingerprint: "fp2", Database: "app"}
	next := session
	next.Name = "pid 977: INSERT INTO exported VALUES ($1)"
	if id(session) != id(next) {
		t.Error("a pid changed a session finding's id")
	}
	noFP := Object{Kind: "session", Name: "pid 1: SELECT 1"}
	noFP2 := Object{Kind: "session", Name: "pid 2: SELECT 1"}
	if id(noFP) != id(noFP2) {
		t.Error("a pid changed the id of a session finding without a fingerprint")
	}
	if id(Object{Kind: "table", Name: "public.a"}) == id(Object{Kind: "table", Name: "public.b"}) {
		t.Error("two tables share an id")
	}
}

// TestPercentile holds the one definition of a percentile (nearest rank)
// that the logs, replay and experiment reports share.
func TestPercentile(t *testing.T) {
	twenty := make([]float64, 20)
	for i := range twenty {
		twenty[i] = float64(i + 1)
	}
	for _, c := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{twenty, 0.95, 19}, {twenty, 0.5, 10}, {twenty, 1, 20}, {twenty, 0, 1}, {twenty, 0.99, 20},
		{[]float64{7}, 0.5, 7}, {nil, 0.5, 0}, {[]float64{1, 2, 3, 4}, 0.5, 2}, {[]float64{1, 2, 3, 4}, 0.75, 3},
	} {
		if got := Percentile(c.xs, c.p); got != c.want {
			t.Errorf("Percentile(%v, %g) = %g, want %g", c.xs, c.p, got, c.want)
		}
	}
}
