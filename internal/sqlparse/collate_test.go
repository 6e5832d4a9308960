package sqlparse

import (
	"strings"
	"testing"
)

func TestCollateSortKeys(t *testing.T) {
	cases := []struct {
		name, sql string
		keys      int
		which     []int
		want      []string // in the rewritten text
		notWant   []string
	}{
		{name: "plain key", sql: "SELECT id, name FROM people ORDER BY name, id OFFSET 10", keys: 2, which: []int{0},
			want: []string{`ORDER BY name COLLATE "C", id`}},
		{name: "position resolves to the output expression", sql: "SELECT id, lower(name) FROM people ORDER BY 2 DESC", keys: 1, which: []int{0},
			want: []string{`ORDER BY lower(name) COLLATE "C" DESC`}},
		{name: "output name resolves to its expression", sql: "SELECT upper(city) AS name FROM people ORDER BY name", keys: 1, which: []int{0},
			want: []string{`ORDER BY upper(city) COLLATE "C"`}},
		{name: "a key with its own collation is left", sql: `SELECT name FROM people ORDER BY name COLLATE "de-x-icu", city`, keys: 1, which: []int{0},
			want: []string{`COLLATE "de-x-icu"`, `city COLLATE "C"`}},
		{name: "a constant that is no position is left", sql: "SELECT * FROM people ORDER BY 1", keys: 0},
		{name: "subquery, window and ordered aggregate", sql: "SELECT string_agg(name, ',' ORDER BY name), max(x) FROM (SELECT name, row_number() OVER (ORDER BY city) x FROM people ORDER BY name) s",
			keys: 3, which: []int{0, 1, 2}, want: []string{`ORDER BY name COLLATE "C")`, `OVER (ORDER BY city COLLATE "C")`, `FROM people ORDER BY name COLLATE "C"`}},
		{name: "a set operation's ORDER BY names result columns", sql: "SELECT name FROM a UNION SELECT name FROM b ORDER BY name", keys: 0},
		{name: "only the keys asked for", sql: "SELECT name FROM people ORDER BY city, name", keys: 2, which: []int{1},
			want: []string{`ORDER BY city, name COLLATE "C"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Parse(c.sql)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.SortKeys(); got != c.keys {
				t.Fatalf("SortKeys = %d, want %d", got, c.keys)
			}
			out, n, err := st.CollateSortKeys("C", c.which)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(c.which) {
				t.Errorf("changed %d keys, want %d: %s", n, len(c.which), out.Text())
			}
			for _, w := range c.want {
				if !strings.Contains(out.Text(), w) {
					t.Errorf("%q not in %s", w, out.Text())
				}
			}
			if _, err := Parse(out.Text()); err != nil {
				t.Errorf("the rewrite does not parse: %v", err)
			}
			if st.Text() != c.sql {
				t.Error("the statement itself changed")
			}
		})
	}
}
