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
