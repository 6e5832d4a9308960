package model

import (
	"strings"
	"testing"
)

func FuzzParseAutovacuumQuery(f *testing.F) {
	for _, q := range []string{"autovacuum: VACUUM public.tickets", "autovacuum: VACUUM ANALYZE app.events (to prevent wraparound)",
		"autovacuum: ANALYZE public.t", "autovacuum: BRIN summarize public.logs 12", "<insufficient privilege>"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		table, analyze, _ := ParseAutovacuumQuery(q)
		if table != "" && !strings.Contains(q, table) {
			t.Fatalf("%q: table %q is not in the query", q, table)
		}
		if analyze && table == "" {
			t.Fatalf("%q: an ANALYZE of no table", q)
		}
	})
}
