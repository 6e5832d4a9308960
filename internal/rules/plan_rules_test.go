package rules

import (
	"fmt"
	"strings"
	"testing"
)

func TestKeyset(t *testing.T) {
	for _, c := range []struct{ key, cols, cond string }{
		{"orders.id", "orders.id", "orders.id > :last_1"},
		{"orders.placed_at DESC", "orders.placed_at", "orders.placed_at < :last_1"},
		{"orders.placed_at, orders.id", "orders.placed_at, orders.id", "(orders.placed_at, orders.id) > (:last_1, :last_2)"},
		{"a DESC NULLS LAST, b DESC", "a, b", "(a, b) < (:last_1, :last_2)"},
		{"orders.amount DESC, orders.id", "orders.amount, orders.id", "(orders.amount < :last_1) OR (orders.amount = :last_1 AND orders.id > :last_2)"},
		{"lower((t.name)::text), t.id DESC", "lower((t.name)::text), t.id", "(lower((t.name)::text) > :last_1) OR (lower((t.name)::text) = :last_1 AND t.id < :last_2)"},
	} {
		cols, cond := keyset(c.key)
		if cols != c.cols || cond != c.cond {
			t.Errorf("keyset(%q) = %q, %q; want %q, %q", c.key, cols, cond, c.cols, c.cond)
		}
	}
}

// FuzzKeyset: any sort key a plan prints (or a damaged one) gives columns
// and a condition, one last value per column, and no panic.
func FuzzKeyset(f *testing.F) {
	for _, s := range []string{"orders.id", "a DESC NULLS LAST, b", "lower((t.name)::text), t.id DESC", "", ",,", "(((", "a,)(b DESC"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		cols, cond := keyset(key)
		n := strings.Count(cols, ",") + 1
		if !strings.Contains(cond, ":last_1") || strings.Contains(cond, fmt.Sprintf(":last_%d ", n+1)) {
			t.Errorf("keyset(%q) = %q, %q", key, cols, cond)
		}
	})
}
