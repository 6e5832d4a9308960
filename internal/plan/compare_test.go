package plan

import (
	"strings"
	"testing"
)

// TestCompareNamesTheDecisiveDifference runs before/after pairs of real
// plans, also across formats.
func TestCompareNamesTheDecisiveDifference(t *testing.T) {
	for _, c := range []struct {
		a, b string
		says []string
	}{
		{"missing-index.bad.json", "missing-index.good.txt", []string{"B is", "faster than A", "Seq Scan on public.orders became Bitmap Heap Scan on public.orders"}},
		{"implicit-cast.good.txt", "implicit-cast.bad.txt", []string{"A is", "became Seq Scan"}},
		{"jit-overhead.bad.txt", "jit-overhead.good.json", []string{"B is", "JIT compilation", "disappeared", "jit_above_cost 0 -> (default)"}},
		{"sort-spill.bad.txt", "sort-spill.good.txt", []string{"B is", "Sort", "work_mem 1MB -> 256MB"}},
		{"nested-loop-blowup.bad.txt", "nested-loop-blowup.good.txt", []string{"B is", "Nested Loop became Hash Join"}},
	} {
		a := mustParse(t, "testdata/pg15/"+c.a)
		b := mustParse(t, "testdata/pg15/"+c.b)
		d := Compare(a, b)
		for _, s := range c.says {
			if !strings.Contains(d.Summary, s) {
				t.Errorf("%s vs %s: summary %q lacks %q", c.a, c.b, d.Summary, s)
			}
		}
	}
	same := mustParse(t, "testdata/pg15/misestimate.bad.txt")
	if d := Compare(same, same); !strings.Contains(d.Summary, "about the same") || len(d.OnlyA)+len(d.OnlyB) != 0 {
		t.Errorf("a plan against itself: %q", d.Summary)
	}
}
