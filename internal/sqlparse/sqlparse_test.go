package sqlparse

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

func TestSafeToAnalyze(t *testing.T) {
	for sql, safe := range map[string]bool{
		"SELECT o.id FROM orders o WHERE o.customer_id = $1":                                        true,
		"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM t WHERE n < 5) SELECT * FROM t": true,
		"UPDATE jobs SET claimed = now() WHERE id = $1":                                             false,
		"SELECT * FROM jobs WHERE id = $1 FOR UPDATE SKIP LOCKED":                                   false,
		"WITH d AS (DELETE FROM jobs RETURNING id) SELECT * FROM d":                                 false,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity":                                    false,
		"SELECT pg_sleep(10)":                             false,
		"SELECT nextval('s')":                             false,
		"SELECT * INTO t2 FROM t":                         false,
		"SELECT (SELECT set_config('jit', 'off', false))": false,
	} {
		s, err := Parse(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if ok, why := s.SafeToAnalyze(); ok != safe {
			t.Errorf("%s: safe=%v (%s), want %v", sql, ok, why, safe)
		}
	}
}

func TestParamColumns(t *testing.T) {
	s, err := Parse(`SELECT o.id, (SELECT sum(l.amount) FROM order_lines l WHERE l.order_id = o.id)
		FROM orders o JOIN customers c ON c.id = o.customer_id AND c.region = $2
		WHERE o.customer_id = $1 AND o.status = ANY($3::text[]) AND $4 < o.created_at
		GROUP BY o.id HAVING count(*) > $5`)
	if err != nil {
		t.Fatal(err)
	}
	got := s.ParamColumns()
	want := map[int][]Column{
		1: {{Table: "orders", Column: "customer_id"}},
		2: {{Table: "customers", Column: "region"}},
		3: {{Table: "orders", Column: "status"}},
		4: {{Table: "orders", Column: "created_at"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParamColumns = %+v\nwant %+v", got, want)
	}
	if n := s.ParamCount(); n != 5 {
		t.Errorf("ParamCount = %d", n)
	}
}

func TestUnqualifiedColumnCandidates(t *testing.T) {
	s, _ := Parse("SELECT * FROM a, public.b WHERE x = $1")
	got := s.ParamColumns()[1]
	if len(got) != 2 || got[0].Table != "a" || got[1].Table != "b" || got[1].Schema != "public" {
		t.Errorf("candidates = %+v", got)
	}
}

func TestBareTargetParams(t *testing.T) {
	s, _ := Parse("WITH RECURSIVE r(d) AS (SELECT $2 AS d UNION ALL SELECT r.d + $3 FROM r WHERE r.d < $4) SELECT $5, d FROM r WHERE d = $1")
	if got := s.BareTargetParams(); !reflect.DeepEqual(got, []int{2, 5}) {
		t.Errorf("BareTargetParams = %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse("SELECT 1; SELECT 2"); err != ErrMultiple {
		t.Errorf("multiple: %v", err)
	}
	if _, err := Parse("SELEC 1"); err == nil || !strings.Contains(err.Error(), "syntax") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := Parse("-- only a comment"); err == nil {
		t.Error("comment only accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("SELECT a FROM t WHERE b = $1")
	f.Add("WITH RECURSIVE typeinfo_tree(oid) AS (SELECT $2) SELECT * FROM typeinfo_tree WHERE oid = any($1::oid[])")
	f.Add("UPDATE q SET s = 1 FROM (SELECT id FROM q WHERE s IS NULL ORDER BY t DESC LIMIT 5) x WHERE q.id = x.id")
	f.Add("DELETE FROM a.q WHERE id = (SELECT id FROM a.q LIMIT 1 FOR UPDATE)")
	f.Add("SELECT \"new\nline\".a, 'x\x1b]0;t\x07' FROM \"new\nline\", public.reset_stats() r WHERE a OPERATOR(public.===) 1")
	f.Add("SELECT * FROM \"user\" u JOIN \"Order\" o ON true, v")
	f.Add("SELECT extract($1 FROM d) FROM t WHERE d > date $2 + interval $3 day AND x = ANY(ARRAY[$4, $5]) LIMIT $6")
	f.Add("SELECT round(avg(x), $1) FROM t WHERE id BETWEEN $2 - $3 AND $2 + 1 AND n > ($4 + $5) * 2")
	f.Add("SELECT count(*) FROM r WHERE date_trunc('day', a) = $1 OR a::date BETWEEN $2 AND $3 OR extract(year FROM a) = 2 OR a > clock_timestamp()")
	f.Fuzz(func(t *testing.T, sql string) {
		s, err := Parse(sql)
		if err != nil {
			return
		}
		if out, err := s.Runnable(); err == nil {
			if _, err := Parse(out); err != nil {
				t.Errorf("Runnable gave %q, which does not parse: %v", out, err)
			}
		}
		s.FallbackParamTypes(s.ParamCount(), func(Column) string { return "integer" })
		s.FallbackCandidates(s.ParamCount(), func(Column) string { return "bigint" })
		s.LimitParams()
		s.SafeToAnalyze()
		s.ParamColumns()
		s.BareTargetParams()
		s.SideEffect()
		for _, col := range []string{"a", "taken_at"} {
			s.HiddenKeys(col)
			if out, n, err := s.PruneOnKey(col); err == nil && n > 0 {
				if _, err := Parse(out.Text()); err != nil {
					t.Errorf("the range on %s %q does not parse: %v", col, out.Text(), err)
				}
			}
		}
		s.DDL()
		_ = s.Kind()
		sh := s.Shape()
		if sh.Claim != nil && sh.Claim.Rewrite != "" {
			if _, err := Parse(sh.Claim.Rewrite); err != nil {
				t.Errorf("claim rewrite %q does not parse: %v", sh.Claim.Rewrite, err)
			}
		}
		for _, r := range sh.Relations {
			if out, n, err := s.Retarget(r, "pg_temp", "pgmedic_copy"); err == nil && n > 0 && !strings.Contains(out.Text(), "pgmedic_copy") {
				t.Errorf("retarget of %s lost the copy: %q", r.Name, out.Text())
			}
		}
		s.Callees()
		for _, r := range s.Relations() {
			// Every name the statement uses quotes back to the same name.
			if r.Name == "" || strings.ContainsRune(r.Name, 0) {
				continue
			}
			q, err := Parse("SELECT * FROM " + QuoteQualified(r.Schema, r.Name))
			if err != nil {
				t.Fatalf("quoted name %s does not parse: %v", QuoteQualified(r.Schema, r.Name), err)
			}
			if got := q.Relations(); len(got) != 1 || got[0] != r {
				t.Fatalf("%+v quoted as %s reads back as %+v", r, QuoteQualified(r.Schema, r.Name), got)
			}
		}
		// Escaping control characters never changes what the statement means.
		if esc := EscapeControls(sql); esc != sql {
			ta, _ := pgast.Parse(sql)
			tb, err := pgast.Parse(esc)
			if err != nil {
				t.Fatalf("escaped statement does not parse: %q: %v", esc, err)
			}
			da, _ := pgast.Deparse(ta)
			db, _ := pgast.Deparse(tb)
			if da != db {
				t.Fatalf("escaping changed the statement:\n%q\n%q", da, db)
			}
		}
	})
}

func TestShape(t *testing.T) {
	cases := []struct {
		sql   string
		want  []string // "rel.column op" for each predicate
		order string
		limit bool
	}{
		{`SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.region = $1 GROUP BY o.id HAVING max(o.total) > $2`,
			[]string{"customers.region eq", "customers.id eq", "orders.customer_id eq"}, "", false},
		{`UPDATE jobs SET queued_at = now() FROM (SELECT id FROM jobs WHERE queued_at IS NULL AND download_after < $1 ORDER BY download_after DESC LIMIT $2) s WHERE jobs.id = s.id`,
			[]string{"jobs.id eq", "s.id eq", "jobs.queued_at is-null", "jobs.download_after range"}, "jobs.download_after desc", true},
		{`DELETE FROM a.q WHERE id IN (SELECT id FROM a.q WHERE state = ANY($1) AND run_at BETWEEN $2 AND $3 LIMIT 1)`,
			[]string{"a.q.id eq", "a.q.state eq", "a.q.run_at range"}, "", true},
		{`SELECT * FROM t WHERE name LIKE $1 AND x::text = $2`, []string{"t.name other", "t.x eq cast"}, "", false},
	}
	for _, c := range cases {
		sh, err := Describe(c.sql)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range sh.Predicates {
			rel := p.Rel.Name
			if p.Rel.Schema != "" {
				rel = p.Rel.Schema + "." + rel
			}
			s := rel + "." + p.Column + " " + p.Op
			if p.Cast {
				s += " cast"
			}
			got = append(got, s)
		}
		if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
			t.Errorf("%s\n got  %v\n want %v", c.sql, got, c.want)
		}
		order := ""
		for _, o := range sh.OrderBy {
			order = o.Rel.Name + "." + o.Column
			if o.Desc {
				order += " desc"
			}
		}
		if order != c.order || sh.HasLimit != c.limit {
			t.Errorf("%s: order %q limit %v", c.sql, order, sh.HasLimit)
		}
	}
}

func TestRetarget(t *testing.T) {
	const sql = `UPDATE public.jobs SET a = 1 FROM (SELECT id FROM jobs j WHERE j.a IS NULL LIMIT 1) s WHERE jobs.id = s.id AND EXISTS (SELECT 1 FROM other.jobs)`
	st := mustParse(t, sql)
	before := st.Shape().Relations
	out, n, err := st.Retarget(RelRef{Schema: "public", Name: "jobs"}, "pg_temp", "pgmedic_copy")
	if err != nil || n != 2 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	for _, want := range []string{"UPDATE pg_temp.pgmedic_copy jobs", "FROM pg_temp.pgmedic_copy j", "other.jobs"} {
		if !strings.Contains(out.Text(), want) {
			t.Errorf("%q lacks %q", out.Text(), want)
		}
	}
	// The rewrite works on a copy: the statement the model carries is
	// the one pg_stat_statements holds, still.
	if st.Text() != sql || st.describe().Relations[0] != before[0] || strings.Contains(fmt.Sprint(st.describe().Relations), "pgmedic_copy") {
		t.Errorf("Retarget changed the parsed statement: %v", st.describe().Relations)
	}
}

func TestCastToColumn(t *testing.T) {
	for _, c := range []struct {
		sql, col, typ string
		keep          bool
		want          string
	}{
		{"SELECT count(*) FROM orders WHERE customer_id = 4242.0", "customer_id", "integer", false, "SELECT count(*) FROM orders WHERE customer_id = (4242.0)::int"},
		{"SELECT * FROM t WHERE amount = $1::float8 AND x = 1", "amount", "numeric(12,2)", false, "WHERE amount = $1::float8::numeric(12, 2) AND x = 1"},
		{"SELECT * FROM r WHERE 'k'::text = r.sensor", "sensor", "character(8)", false, "WHERE 'k'::text::char(8) = r.sensor"},
		{"SELECT * FROM o WHERE placed_at::timestamptz > now() - interval '1 day'", "placed_at", "timestamp without time zone", true, "WHERE placed_at > (now() - '1 day'::interval)"},
		{"SELECT * FROM o WHERE id IN (1.0, 2.0)", "id", "integer", false, "WHERE id IN ((1.0)::int, (2.0)::int)"},
		{"SELECT * FROM a JOIN b ON a.id = b.id", "id", "integer", false, ""},
	} {
		st := mustParse(t, c.sql)
		out, n, err := st.CastToColumn(c.col, c.typ, c.keep)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got := out.Text()
		if again, _, _ := st.CastToColumn(c.col, c.typ, c.keep); again.Text() != got {
			t.Errorf("%s: a second rewrite of the same statement differs (the first changed it): %s", c.sql, again.Text())
		}
		if c.want == "" {
			if n != 0 {
				t.Errorf("%s: rewrote a column-to-column join: %s", c.sql, got)
			}
			continue
		}
		if n == 0 || !strings.Contains(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, got, c.want)
		}
	}
}

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"orders": "orders", "Orders": `"Orders"`, "user": `"user"`, "order": `"order"`, "name": "name",
		"time": `"time"`, "a b": `"a b"`, `q"t`: `"q""t"`, "new\nline": `U&"new\000aline"`,
		"esc\x1b[31m": `U&"esc\001b[31m"`, `back\slash` + "\r": `U&"back\\slash\000d"`, "": `""`,
	} {
		if got := QuoteIdent(in); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestEscapeControls(t *testing.T) {
	in := "SELECT \"new\nline\".a, 'x\x1b]0;t\x07' FROM \"new\nline\" WHERE b = 'plain'"
	got := EscapeControls(in)
	want := `SELECT U&"new\000aline".a, E'x\x1b]0;t\x07' FROM U&"new\000aline" WHERE b = 'plain'`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	ta, err1 := pgast.Parse(in)
	tb, err2 := pgast.Parse(got)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	da, _ := pgast.Deparse(ta)
	db, _ := pgast.Deparse(tb)
	if da != db {
		t.Fatalf("the escaped statement means something else:\n%s\n%s", da, db)
	}
}

func mustParse(t *testing.T, sql string) *Statement {
	t.Helper()
	st, err := Parse(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return st
}

// TestRunnable: what pg_stat_statements writes for typed literals and
// EXTRACT becomes text the server prepares, the same statement; the rest
// is sent as written.
func TestRunnable(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT id FROM jobs WHERE run_at < now() - interval $1 LIMIT $2":                    "SELECT id FROM jobs WHERE run_at < (now() - $1::interval) LIMIT $2",
		"SELECT count(*) FROM orders WHERE d >= date $1 AND d < date $2 + interval $3 month": "SELECT count(*) FROM orders WHERE d >= $1::date AND d < ($2::date + $3::interval month)",
		"SELECT extract($1 FROM o_orderdate) FROM orders":                                    `SELECT pg_catalog."extract"($1, o_orderdate) FROM orders`,
		"SELECT id FROM e WHERE t >= timestamp with time zone $1 AND u < time $2":            "SELECT id FROM e WHERE t >= $1::timestamp with time zone AND u < $2::time",
		"SELECT id FROM e WHERE t > $1::interval AND k = $2":                                 "SELECT id FROM e WHERE t > $1::interval AND k = $2",
		"SELECT extract(year FROM d) FROM t":                                                 "SELECT extract(year FROM d) FROM t",
	} {
		st := mustParse(t, in)
		got, err := st.Runnable()
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
		if st.Text() != in {
			t.Errorf("Runnable changed the statement's text")
		}
	}
}

// TestLiterals: the values an application sent, read back from the
// statement as pg_stat_activity shows it, lined up with the normalised text.
func TestLiterals(t *testing.T) {
	for _, c := range []struct {
		norm, lit string
		want      map[int]string
	}{
		{"SELECT id FROM jobs WHERE status = $1 AND run_at < now() - interval $2 ORDER BY run_at LIMIT $3",
			"SELECT id FROM jobs WHERE status = 'queued' AND run_at < now() - interval '5 minutes' ORDER BY run_at LIMIT 20",
			map[int]string{1: "'queued'", 2: "'5 minutes'", 3: "20"}},
		{"UPDATE t SET a = a + $1 WHERE id = $2", "update t set a = a + -5 where id = 7", map[int]string{1: "-5", 2: "7"}},
		{"SELECT * FROM t WHERE x IN ($1, $2)", "SELECT * FROM t WHERE x IN (1.5, E'a''b')", map[int]string{1: "1.5", 2: "E'a''b'"}},
		{"SELECT * FROM t WHERE x = $1", "SELECT * FROM u WHERE x = 1", nil},
		{"SELECT * FROM t WHERE x = $1", "SELECT * FROM t WHERE x = y", nil},
		{"SELECT * FROM t WHERE x = $1", "SELECT * FROM t WHERE x = 1 AND y = 2", nil},
		{"SELECT 1", "SELECT 1", nil},
		// The client bound $1 (its value is not in the text); the
		// constant beside it is the application's.
		{"SELECT * FROM calls WHERE caller = $1 AND started_at > now() - interval $2", "SELECT * FROM calls WHERE caller = $1 AND started_at > now() - interval '7 days'", map[int]string{2: "'7 days'"}},
		{"SELECT * FROM t WHERE x = $1", "SELECT * FROM t WHERE x = $1", nil},
	} {
		got, ok := Literals(c.norm, c.lit)
		if ok != (c.want != nil) || (ok && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%s\n%s\n got %v %v, want %v", c.norm, c.lit, got, ok, c.want)
		}
	}
}

// FuzzLiterals: any two texts are lined up without a panic, and a value
// found is one token of the literal text.
func FuzzLiterals(f *testing.F) {
	f.Add("SELECT a FROM t WHERE b = $1 LIMIT $2", "SELECT a FROM t WHERE b = 'x' LIMIT 5")
	f.Add("UPDATE t SET a = $1", "update t set a = -1.5e3")
	f.Add("SELECT $1", "SELECT $$a$$")
	f.Fuzz(func(t *testing.T, norm, lit string) {
		values, ok := Literals(norm, lit)
		for n, v := range values {
			if !ok || n <= 0 || v == "" || !strings.Contains(lit, v) {
				t.Errorf("$%d = %q from %q", n, v, lit)
			}
		}
	})
}

// TestFallbackParamTypes: the types a second PREPARE declares for what
// pg_stat_statements left PostgreSQL unable to type.
func TestFallbackParamTypes(t *testing.T) {
	types := map[string]string{"inventory.sku": "text", "inventory.qty": "integer", "t.id": "bigint", "t.x": "numeric",
		"users.id": "bigint", "events.kind": "text", "events.tenant": "uuid", "events.amount": "numeric(12,2)"}
	col := func(c Column) string { return types[c.Table+"."+c.Column] }
	for sql, want := range map[string]string{
		"SELECT $1 + $2, $3 || $4":                                                                                                        "numeric numeric text text",
		"SELECT users.id FROM users WHERE users.id = ANY (ARRAY[$1, $2])":                                                                 "bigint bigint",
		"SELECT id FROM users WHERE id = coalesce($1, $2)":                                                                                "bigint bigint",
		"SELECT sum(CASE WHEN x THEN $1 ELSE $2 END) FROM t":                                                                              "numeric numeric",
		"INSERT INTO events (kind, amount, tenant) SELECT $1, g * $2, $3 FROM generate_series($4, $5) g":                                  "text unknown uuid integer integer",
		"MERGE INTO inventory i USING (VALUES ($1, $2)) AS v(sku, qty) ON i.sku = v.sku WHEN MATCHED THEN UPDATE SET qty = i.qty + v.qty": "text integer",
		"UPDATE t SET x = v.x FROM (VALUES ($1, $2)) AS v(id, x) WHERE t.id = v.id":                                                       "bigint numeric",
		"SELECT $1 AS depth":           "integer",
		"SELECT a FROM t WHERE b = $1": "",
		// Arithmetic compared with a number column takes its type: the
		// column is never the side cast.
		"UPDATE inventory SET qty = qty + $1 WHERE inventory.qty > $2 + $3": "integer integer integer",
		"SELECT * FROM t WHERE id BETWEEN $1 - $2 AND $1 + $2":              "bigint bigint",
		"SELECT * FROM events WHERE kind = $1 || $2":                        "text text",
		// A backfill in batches: each SET value is its column's, and a
		// LIMIT's arithmetic a bigint (no numeric is cast to it).
		"UPDATE t SET id = $1, x = $2 * $3 WHERE t.id IN (SELECT id FROM t ORDER BY id LIMIT $4 + $5)": "bigint numeric numeric bigint bigint",
		"SELECT * FROM events ORDER BY kind LIMIT $1 OFFSET $2 * $3":                                   "bigint bigint bigint",
	} {
		st := mustParse(t, sql)
		got := strings.Join(st.FallbackParamTypes(st.ParamCount(), col), " ")
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", sql, got, want)
		}
	}
}

// TestFallbackCandidates: the type lists tried in order: the first guess,
// then its arithmetic as integer and as double precision, then its
// unknowns as text; no list twice, none of unknowns only.
func TestFallbackCandidates(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT round(avg(x), $1) FROM t": "numeric | integer | double precision",
		"SELECT $1 AS depth":              "integer",
		"SELECT a FROM t WHERE b = $1":    "text",
		"SELECT $1 + $2, $3":              "numeric numeric integer | integer integer integer | double precision double precision integer",
		"SELECT $1 + $2 FROM t WHERE $3":  "numeric numeric unknown | integer integer unknown | double precision double precision unknown | numeric numeric text",
	} {
		st := mustParse(t, sql)
		var got []string
		for _, c := range st.FallbackCandidates(st.ParamCount(), nil) {
			got = append(got, strings.Join(c, " "))
		}
		if g := strings.Join(got, " | "); g != want {
			t.Errorf("%s:\n got %q\nwant %q", sql, g, want)
		}
	}
}

// TestFingerprintNormalises: the same statement with other values has
// one fingerprint and a text without the values, utility statements
// included (pg_query leaves their constants).
func TestFingerprintNormalises(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"SELECT * FROM t WHERE id = 42 AND name = 'x'", "SELECT * FROM t WHERE id = 7 AND name = 'y'", "SELECT * FROM t WHERE id = $1 AND name = $2"},
		{"EXECUTE by_customer(42)", "EXECUTE by_customer(43)", "EXECUTE by_customer($1)"},
		{"EXECUTE q2(1, 'secret')", "EXECUTE q2(9, 'other')", "EXECUTE q2($1, $2)"},
		{"SET work_mem = '64kB'", "SET work_mem = '1GB'", "SET work_mem = $1"},
		{"SELECT $1, 5 FROM t1", "SELECT $1, 6 FROM t1", "SELECT $1, $2 FROM t1"},
	} {
		fa, na := Fingerprint(c.a)
		fb, nb := Fingerprint(c.b)
		if fa != fb || na != c.want || nb != c.want {
			t.Errorf("%q / %q: %s %q, %s %q; want %q", c.a, c.b, fa, na, fb, nb, c.want)
		}
	}
}

// TestCastToColumnOnce: a stable bound is computed once in a scalar
// subquery, cast to the column's type; a constant is only cast.
func TestCastToColumnOnce(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT count(*) FROM r WHERE taken_at > now() - interval '400 days'",
			"SELECT count(*) FROM r WHERE taken_at > (SELECT (now() - '400 days'::interval)::timestamp)"},
		{"SELECT 1 FROM r WHERE taken_at::timestamptz >= '2024-01-01'::timestamptz",
			"SELECT 1 FROM r WHERE taken_at >= '2024-01-01'::timestamptz::timestamp"},
	} {
		s, err := Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		out, n, err := s.CastToColumnOnce("taken_at", "timestamp without time zone")
		if err != nil || n != 1 || out.Text() != c.want {
			t.Errorf("%s: %d %v\n got %s\nwant %s", c.in, n, err, out.Text(), c.want)
		}
	}
}

// What the walks return reaches the server (and the recorded transcripts)
// in the order found, so that order is the statement's own: the select list
// before FROM, FROM before WHERE, whatever the build. protobuf-go's Range
// would shuffle it per binary.
func TestWalkOrderIsTheStatements(t *testing.T) {
	s, err := Parse(`SELECT (SELECT max(b.v) FROM b), lower(a.t)
		FROM a JOIN c ON c.id = a.id
		WHERE a.id IN (SELECT d.id FROM d) AND upper(a.t) = 'X'`)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, r := range s.Relations() {
		rels = append(rels, r.Name)
	}
	if got, want := strings.Join(rels, ","), "b,a,c,d"; got != want {
		t.Errorf("relations in order %s, want %s", got, want)
	}
	funcs, _ := s.Callees()
	var fs []string
	for _, f := range funcs {
		fs = append(fs, f.Name)
	}
	if got, want := strings.Join(fs, ","), "max,lower,upper"; got != want {
		t.Errorf("functions in order %s, want %s", got, want)
	}
}
