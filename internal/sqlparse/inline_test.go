package sqlparse

import "testing"

func TestInline(t *testing.T) {
	for _, c := range []struct {
		query  string
		values []string
		want   string
		err    bool
	}{
		{"SELECT * FROM t WHERE id = $1", []string{"'7'::integer"}, "SELECT * FROM t WHERE id = ('7'::integer)", false},
		{"SELECT $2, $1, $2", []string{"1", "'a'"}, "SELECT ('a'), (1), ('a')", false},
		// A "$1" inside a string or a comment is not a placeholder.
		{"SELECT '$1' /* $1 */ , $1", []string{"5"}, "SELECT '$1' /* $1 */ , (5)", false},
		{"SELECT 1", nil, "SELECT 1", false},
		{"SELECT $3", []string{"1"}, "", true},
	} {
		got, err := Inline(c.query, c.values)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("Inline(%q, %q) = %q, %v; want %q (error %v)", c.query, c.values, got, err, c.want, c.err)
		}
	}
}
