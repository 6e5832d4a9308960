package sqlparse

import (
	"fmt"
	"strings"
	"testing"
)

func TestHiddenKeysAndPruneOnKey(t *testing.T) {
	for _, c := range []struct {
		sql, want string // want: the rewrite ("" when none), or "-" when nothing is hidden
		fixable   bool
	}{
		{"SELECT count(*) FROM readings WHERE taken_at::date = $1", "taken_at >= $1::date AND taken_at < ($1::date + 1)", true},
		{"SELECT count(*) FROM readings WHERE date(taken_at) = '2026-03-01' AND sensor = 4", "(taken_at >= '2026-03-01'::date AND taken_at < ('2026-03-01'::date + 1)) AND sensor = 4", true},
		{"SELECT count(*) FROM readings r WHERE $1 <= CAST(r.taken_at AS date)", "r.taken_at >= $1::date", true},
		{"SELECT * FROM readings WHERE taken_at::date BETWEEN $1 AND $2", "taken_at >= $1::date AND taken_at < ($2::date + 1)", true},
		// A value the statement casts itself is not cast twice.
		{"SELECT count(*) FROM readings WHERE taken_at::date = $1::date", "taken_at >= $1::date AND taken_at < ($1::date + 1)", true},
		{"SELECT count(*) FROM readings WHERE taken_at::date >= '2026-03-01'::date", "taken_at >= '2026-03-01'::date", true},
		{"SELECT avg(v) FROM readings WHERE date_trunc('day', taken_at) = $1", "taken_at >= $1 AND taken_at < ($1 + '1 day'::interval)", true},
		{"SELECT avg(v) FROM readings WHERE date_trunc('quarter', taken_at) = $1", "taken_at < ($1 + '3 months'::interval)", true},
		// pg_stat_statements' text: the unit is a parameter too.
		{"SELECT count(*) FROM calls WHERE date_trunc($2, taken_at) = date_trunc($3, timestamptz $4) - make_interval(days => $1)",
			"taken_at < ((date_trunc($3, $4::timestamptz) - make_interval(days := $1)) + CASE lower($2::text) WHEN 'quarter' THEN '3 months' ELSE '1 ' || $2::text END::interval)", true},
		{"SELECT avg(v) FROM readings WHERE extract(year FROM taken_at) = $1", "taken_at >= make_date($1::int, 1, 1) AND taken_at < make_date($1::int + 1, 1, 1)", true},
		{"SELECT avg(v) FROM readings WHERE date_part('year', taken_at) = 2025", "taken_at >= make_date(2025::int, 1, 1)", true},
		{"SELECT * FROM readings WHERE taken_at > clock_timestamp() - interval '1 hour'", "taken_at > (now() - '1 hour'::interval)", true},
		{"SELECT * FROM readings WHERE to_char(taken_at, 'YYYY-MM') = $1", "", false},
		{"SELECT * FROM readings WHERE taken_at + interval '1 day' > $1", "", false},
		// pruned on the bare comparison, whatever else it says
		{"SELECT * FROM readings WHERE taken_at >= $1 AND taken_at < $2 AND taken_at::date <> $3", "-", false},
		{"SELECT * FROM readings WHERE taken_at > now() - interval '1 day'", "-", false},
		{"SELECT * FROM readings WHERE sensor = $1", "-", false},
		// a comparison of two columns is no value to prune with
		{"SELECT * FROM readings r JOIN alarms a ON a.at::date = r.taken_at::date", "-", false},
	} {
		st, err := Parse(c.sql)
		if err != nil {
			t.Fatal(err)
		}
		hidden := st.HiddenKeys("taken_at")
		if c.want == "-" {
			if len(hidden) > 0 {
				t.Errorf("%s: hidden %+v", c.sql, hidden)
			}
			continue
		}
		if len(hidden) == 0 {
			t.Errorf("%s: nothing hidden", c.sql)
			continue
		}
		if hidden[0].Fixable != c.fixable || hidden[0].Why == "" || hidden[0].Predicate == "" || strings.Contains(hidden[0].Predicate+hidden[0].Why, "?") {
			t.Errorf("%s: %+v", c.sql, hidden[0])
		}
		fixed, n, err := st.PruneOnKey("taken_at")
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		if c.want == "" {
			if n != 0 {
				t.Errorf("%s: rewritten to %s", c.sql, fixed.Text())
			}
			continue
		}
		if n == 0 || !strings.Contains(fixed.Text(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, fixed.Text(), c.want)
		}
		if _, err := Parse(fixed.Text()); err != nil {
			t.Errorf("%s: the rewrite does not parse: %v", c.sql, err)
		}
		if again := mustParse(t, fixed.Text()).HiddenKeys("taken_at"); len(again) > 0 {
			t.Errorf("%s: the rewrite still hides the key: %+v", c.sql, again)
		}
	}
}

func TestLikePrefixes(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT id FROM products p WHERE p.name LIKE $1 ORDER BY name LIMIT $2": "products.name $1",
		"SELECT id FROM products WHERE name LIKE 'Cedar%'":                      "products.name $0",
		"SELECT id FROM products WHERE name LIKE '%dar'":                        "",
		"SELECT id FROM products WHERE name ILIKE $1":                           "",
		"SELECT id FROM products WHERE name NOT LIKE $1":                        "",
		"SELECT id FROM products WHERE lower(name) LIKE $1":                     "",
		// As a plan prints a filter.
		"SELECT 1 FROM parts AS parts WHERE (parts.sku ~~ 'GZ4%'::text)": "parts.sku $0",
	} {
		got := ""
		for _, l := range mustParse(t, sql).LikePrefixes() {
			got = fmt.Sprintf("%s.%s $%d", l.Column.Table, l.Column.Column, l.Param)
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", sql, got, want)
		}
	}
}

func TestColumnNames(t *testing.T) {
	got := mustParse(t, "SELECT 1 FROM calls c WHERE date_trunc('day', c.started_at) = now() - make_interval(days => $1) AND c.tenant = 3 AND started_at > $2").ColumnNames()
	if strings.Join(got, ",") != "started_at,tenant" {
		t.Errorf("ColumnNames: %v", got)
	}
}

func TestBatched(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT id, sku FROM order_lines WHERE id = $1":                                     "SELECT id, sku FROM order_lines WHERE id = ANY($1)",
		"SELECT c.name FROM customers c WHERE $1 = c.id":                                    "SELECT c.name FROM customers c WHERE c.id = ANY($1)",
		"SELECT id FROM t WHERE a = $1 AND b = $2":                                          "",
		"SELECT id FROM t WHERE a > $1":                                                     "",
		"SELECT id FROM t WHERE a = $1 OR b = $1":                                           "",
		"SELECT p.name FROM products p JOIN stock s ON s.product_id = p.id WHERE p.id = $1": "SELECT p.name FROM products p JOIN stock s ON s.product_id = p.id WHERE p.id = ANY($1)",
	} {
		out, _, _, err := mustParse(t, sql).Batched()
		switch {
		case want == "" && err == nil:
			t.Errorf("%s: batched to %s", sql, out.Text())
		case want != "" && (err != nil || out.Text() != want):
			t.Errorf("%s: got %v %v, want %s", sql, out, err, want)
		}
	}
}
