package pgast

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// statements gathers real SQL: the PostgreSQL server's own scripts
// (information_schema, every contrib extension's install script, as
// Debian's postgresql-15 installs them), pgmedic's lab scenarios, the
// seeds of sqlparse's fuzzers, and a few forms those lack.
func statements(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"/usr/share/postgresql/*/information_schema.sql", "/usr/share/postgresql/*/extension/*.sql", "../*/testdata/scenarios/*/*.sql", "../scenario/catalog/*/*.sql"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	var server int
	for _, f := range files {
		if strings.HasPrefix(f, "/usr/share/") {
			server++
		}
	}
	if server < 50 {
		t.Fatalf("found %d of the server's SQL scripts under /usr/share/postgresql: install postgresql-15 (scripts/install-deps.sh)", server)
	}
	out := []string{
		"SELECT 1, -2, 3.5, 'x', true, NULL, B'101', X'ff', 1e400, -2147483649",
		"SELECT * FROM t WHERE a = $1 AND b IN (1, 2) AND c BETWEEN $2 AND $3 OR d LIKE 'x%' COLLATE \"C\"",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT sum(n) OVER (PARTITION BY n % 2 ORDER BY n DESC ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM r",
		"MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
		"ALTER TABLE orders ADD COLUMN c int NOT NULL DEFAULT 0, ALTER COLUMN d TYPE bigint USING d::bigint, ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES b (id) NOT VALID",
		"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS i ON t USING btree (lower(a) DESC NULLS LAST, b) INCLUDE (c) WHERE d IS NOT NULL",
		"SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED",
		"SELECT extract(epoch FROM $1::timestamptz), interval '1 day', date '2020-01-01', $2::numeric(10,2)[]",
		"UPDATE t SET (a, b) = (SELECT 1, 2) FROM u WHERE t.id = u.id RETURNING *",
		"COPY t (a, b) FROM STDIN WITH (FORMAT csv, HEADER true)",
		"SELECT json_agg(x ORDER BY y) FILTER (WHERE z) , jsonb_path_query(j, '$.a[*]') FROM t GROUP BY ROLLUP (a, b), CUBE (c)",
		"VACUUM (ANALYZE, VERBOSE) t; REINDEX SYSTEM db; LOCK TABLE t IN ACCESS EXCLUSIVE MODE NOWAIT",
		"SELECT x FROM t TABLESAMPLE SYSTEM (10) REPEATABLE (1), LATERAL unnest(a) WITH ORDINALITY AS u(v, n)",
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), `\`) { // psql's meta-commands
				lines = append(lines, l)
			}
		}
		src := strings.ReplaceAll(strings.Join(lines, "\n"), "@extschema@", "public")
		stmts, err := pg_query.SplitWithParser(src, true)
		if err != nil {
			out = append(out, src) // the error must match too
			continue
		}
		out = append(out, stmts...)
	}
	seeds, _ := filepath.Glob("../sqlparse/testdata/fuzz/*/*")
	for _, f := range seeds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if q, ok := strings.CutPrefix(l, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// TestSameAsPgQuery holds the generated tree to pg_query_go's on every
// statement: the same bytes when encoded, the same messages in the same
// order when walked, the same SQL when deparsed, and a clone equal to its
// original and apart from it.
func TestSameAsPgQuery(t *testing.T) {
	stmts := statements(t)
	parsed := 0
	for _, sql := range stmts {
		if same(t, sql) {
			parsed++
		}
	}
	if parsed < 3000 {
		t.Fatalf("only %d of %d statements parsed: the corpus did not load", parsed, len(stmts))
	}
	t.Logf("%d statements, %d parsed, the same in both", len(stmts), parsed)
}

func same(t testing.TB, sql string) bool {
	t.Helper()
	ours, err := Parse(sql)
	theirs, err2 := pg_query.Parse(sql)
	if err == nil && err2 != nil && strings.Contains(err2.Error(), "invalid UTF-8") {
		// protobuf-go refuses a string that is not UTF-8; pgast keeps
		// the bytes the server's parser gave (a LATIN1 database's
		// statements are not UTF-8).
		return false
	}
	if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
		t.Fatalf("%q: pgast says %v, pg_query_go %v", sql, err, err2)
	}
	if err != nil {
		return false
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if got := Marshal(ours); !bytes.Equal(got, want) {
		t.Fatalf("%q: encodes to %d bytes, pg_query_go's to %d", sql, len(got), len(want))
	}
	if got, want := walkOurs(ours), walkTheirs(theirs); !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: walked\n%v\npg_query_go's walk\n%v", sql, got, want)
	}
	d1, err1 := Deparse(ours)
	d2, err2 := pg_query.Deparse(theirs)
	if d1 != d2 || (err1 == nil) != (err2 == nil) {
		t.Fatalf("%q: deparsed as %q (%v), pg_query_go's as %q (%v)", sql, d1, err1, d2, err2)
	}
	c := ours.Clone()
	if !Equal(c, ours) {
		t.Fatalf("%q: the clone differs", sql)
	}
	for _, st := range c.Stmts {
		st.StmtLen++
		st.Stmt.Node = nil
	}
	if len(c.Stmts) > 0 && Equal(c, ours) {
		t.Fatalf("%q: changing the clone changed the original", sql)
	}
	return true
}

// walkOurs and walkTheirs list the message types a depth-first walk
// meets, ours by EachChild and pg_query_go's by its descriptor's fields in
// declaration order.
func walkOurs(m Message) []string {
	var out []string
	var rec func(m Message) bool
	rec = func(m Message) bool {
		out = append(out, reflect.TypeOf(m).Elem().Name())
		return EachChild(m, rec)
	}
	rec(m)
	return out
}

func walkTheirs(m proto.Message) []string {
	var out []string
	var rec func(m protoreflect.Message)
	rec = func(m protoreflect.Message) {
		out = append(out, reflect.TypeOf(m.Interface()).Elem().Name())
		fields := m.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.Message() == nil || fd.IsMap() || !m.Has(fd) {
				continue
			}
			if !fd.IsList() {
				rec(m.Get(fd).Message())
				continue
			}
			l := m.Get(fd).List()
			for j := 0; j < l.Len(); j++ {
				rec(l.Get(j).Message())
			}
		}
	}
	rec(m.ProtoReflect())
	return out
}

// TestScanSameAsPgQuery checks the scanner's tokens the same way.
func TestScanSameAsPgQuery(t *testing.T) {
	for _, sql := range statements(t)[:200] {
		ours, err := Scan(sql)
		theirs, err2 := pg_query.Scan(sql)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("%q: pgast says %v, pg_query_go %v", sql, err, err2)
		}
		if err != nil {
			continue
		}
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(theirs)
		if !bytes.Equal(Marshal(ours), want) {
			t.Fatalf("%q: scanned tokens differ", sql)
		}
		for i, tok := range ours.Tokens {
			if tok.Token.String() != theirs.Tokens[i].Token.String() || tok.KeywordKind.String() != theirs.Tokens[i].KeywordKind.String() {
				t.Fatalf("%q: token %d is %s/%s, pg_query_go's %s/%s", sql, i, tok.Token, tok.KeywordKind, theirs.Tokens[i].Token, theirs.Tokens[i].KeywordKind)
			}
		}
	}
}

// TestClear zeroes a scalar by its proto name and leaves others.
func TestClear(t *testing.T) {
	tree, err := Parse("SELECT a FROM t WHERE b = 1")
	if err != nil {
		t.Fatal(err)
	}
	var locs []int32
	var rec func(m Message) bool
	rec = func(m Message) bool {
		if c, ok := m.(*ColumnRef); ok {
			locs = append(locs, c.Location)
			c.Clear("location")
			c.Clear("no_such_field")
			if c.Location != 0 || len(c.Fields) == 0 {
				t.Fatalf("Clear(location) left %d, fields %d", c.Location, len(c.Fields))
			}
		}
		return EachChild(m, rec)
	}
	rec(tree)
	if fmt.Sprint(locs) != "[7 22]" {
		t.Fatalf("column positions were %v, want [7 22]", locs)
	}
}

// FuzzParse: whatever the parser takes, pgast reads as pg_query_go does.
func FuzzParse(f *testing.F) {
	for _, s := range statements(f)[:300] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		same(t, sql)
	})
}

// FuzzUnmarshal: no bytes make the decoder panic or loop, and what it
// reads it writes back so that it reads the same again.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range statements(f)[:100] {
		if b, err := parser.ParseToProtobuf(s); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r ParseResult
		if r.unmarshal(b) != nil {
			return
		}
		again := Marshal(&r)
		var r2 ParseResult
		if err := r2.unmarshal(again); err != nil {
			t.Fatalf("re-reading what was written: %v", err)
		}
		if !bytes.Equal(Marshal(&r2), again) {
			t.Fatal("written, read and written again differs")
		}
	})
}
