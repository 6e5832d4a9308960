package sqlparse

import (
	"strings"
	"testing"
)

// TestUndo: the statements that take a table back to before a change
// that adds by name; nothing for a change Undo cannot reverse.
func TestUndo(t *testing.T) {
	for sql, want := range map[string]string{
		"ALTER TABLE orders ADD COLUMN note text":                                                          "ALTER TABLE orders DROP COLUMN IF EXISTS note",
		"ALTER TABLE app.orders ADD COLUMN \"Flag\" boolean DEFAULT false, ALTER COLUMN note SET NOT NULL": `ALTER TABLE app.orders DROP COLUMN IF EXISTS "Flag"`,
		"ALTER TABLE orders ADD CONSTRAINT orders_fk FOREIGN KEY (c) REFERENCES customers (id)":            "ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_fk",
		"CREATE INDEX orders_c_idx ON app.orders (c)":                                                      "DROP INDEX IF EXISTS app.orders_c_idx",
		"CREATE INDEX ON orders (c)":                                                                       "",
		"ALTER TABLE orders ALTER COLUMN c TYPE bigint":                                                    "",
		"ALTER TABLE orders ADD COLUMN x int, ALTER COLUMN c TYPE bigint":                                  "",
		"SELECT 1": "",
	} {
		if got := strings.Join(mustParse(t, sql).Undo(), "; "); got != want {
			t.Errorf("%s:\n got %q\nwant %q", sql, got, want)
		}
	}
}
