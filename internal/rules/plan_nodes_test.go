package rules

import "testing"

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
