package plan

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPastedShapes reads one plan in every dress real psql prints it in
// (scripts/paste-fixtures.sh) and requires the same model as from the
// plain output, and the same lines once unwrapped.
func TestPastedShapes(t *testing.T) {
	files, err := filepath.Glob("testdata/pasted/*")
	if err != nil || len(files) < 70 {
		t.Fatalf("want the psql matrix in testdata/pasted (bash scripts/paste-fixtures.sh), found %d files", len(files))
	}
	for _, fmtName := range []string{"text", "json"} {
		plain, err := os.ReadFile("testdata/pasted/" + fmtName + ".plain")
		if err != nil {
			t.Fatal(err)
		}
		want, err := Parse(plain)
		if err != nil {
			t.Fatalf("%s.plain: %v", fmtName, err)
		}
		wantLines := trimmedLines(string(plain))
		n := 0
		for _, f := range files {
			base := filepath.Base(f)
			if !strings.HasPrefix(base, fmtName+".") || strings.HasSuffix(base, ".plain") {
				continue
			}
			n++
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(b)
			if err != nil {
				t.Errorf("%s: %v", base, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: parsed model differs from the plain output's", base)
			}
			if fmtName == "text" {
				if lines := trimmedLines(string(unwrap(b))); !reflect.DeepEqual(lines, wantLines) {
					t.Errorf("%s: unwrapped lines differ:\n%s", base, strings.Join(lines, "\n"))
				}
			}
		}
		if n < 38 {
			t.Errorf("%s: only %d pasted shapes tested", fmtName, n)
		}
	}
}

// trimmedLines drops blank lines and trailing spaces, and the indentation
// every line shares (border 1 adds one space to each).
func trimmedLines(s string) []string {
	var out []string
	common := -1
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \r")
		if l == "" {
			continue
		}
		if ind := len(l) - len(strings.TrimLeft(l, " ")); common < 0 || ind < common {
			common = ind
		}
		out = append(out, l)
	}
	for i := range out {
		out[i] = out[i][common:]
	}
	return out
}

// Pastes seen in the wild that the matrix does not produce.
func TestPastedByHand(t *testing.T) {
	for name, in := range map[string]string{
		"pgadmin quoted header":           "\"QUERY PLAN\"\n\"Seq Scan on t  (cost=0.00..1.01 rows=1 width=4)\"\n\"  Filter: (a = 1)\"\n",
		"csv json cell":                   "\"[{\"\"Plan\"\": {\"\"Node Type\"\": \"\"Seq Scan\"\", \"\"Relation Name\"\": \"\"t\"\", \"\"Total Cost\"\": 1.01}}]\"",
		"crlf and bom":                    "\ufeff QUERY PLAN\r\n---------------\r\n Seq Scan on t  (cost=0.00..1.01 rows=1 width=4)\r\n   Filter: (a = 1)\r\n(2 rows)\r\n",
		"trailing commas":                 "\"Seq Scan on t  (cost=0.00..1.01 rows=1 width=4)\",\n\"  Filter: (a = 1)\",\n",
		"localized footer":                " QUERY PLAN\n------------\n Seq Scan on t  (cost=0.00..1.01 rows=1 width=4)\n   Filter: (a = 1)\n(2 lignes)\n",
		"header cut by a narrow terminal": "                  QUERY PLA\nN              \n-----------------\n--------\n Seq Scan on t  (cost=0.00..1.01 rows=1 w\nidth=4)\n   Filter: (a = 1)\n(2 Zeilen)\n",
		// The first row lost psql's leading space, and an editor turned
		// runs of four spaces into tabs.
		"tabs and a trimmed first row":  "Nested Loop  (cost=0.00..2.03 rows=1 width=8)\n   Join Filter: (t.a = u.a)\n   ->  Seq Scan on t  (cost=0.00..1.01 rows=1 width=4)\n   ->  Seq Scan on u  (cost=0.00..1.01 rows=1 width=4)\n\t\t Filter: (a = 1)\n",
		"output cut at the root column": "Seq Scan on t  (cost=0.00..1.01 rows=1 width=4)\n  Output: a, b, c, lo\nng_column_name\n  Filter: (a = 1)\nPlanning Time: 0.1 ms\n",
	} {
		e, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if name == "tabs and a trimmed first row" {
			if e.Plan.NodeType != "Nested Loop" || len(e.Plan.Plans) != 2 || e.Plan.Plans[1].Filter != "(a = 1)" || e.Plan.JoinFilter == "" {
				t.Errorf("%s: tree read wrong: %+v", name, e.Plan)
			}
			continue
		}
		if e.Plan.NodeType != "Seq Scan" || e.Plan.RelationName != "t" || strings.Contains(in, "Filter") && e.Plan.Filter != "(a = 1)" {
			t.Errorf("%s: got %s on %q filter %q", name, e.Plan.NodeType, e.Plan.RelationName, e.Plan.Filter)
		}
	}
}

// A plan copied from a terminal or a mail that hard-wrapped its lines at
// a fixed width, with no mark at the cuts, reads as the original (cuts
// inside parentheses, and psql border 1 rows that lost their leading
// space).
func TestTerminalWrappedPlan(t *testing.T) {
	plain, want := plainText(t)
	var wrapped strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(plain), "\n"), "\n") {
		l = " " + l // as psql's border 1 prints it
		for len(l) > 70 {
			wrapped.WriteString(l[:70] + "\n")
			l = l[70:]
		}
		wrapped.WriteString(l + "\n")
	}
	got, err := Parse([]byte(wrapped.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, wrapped.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the wrapped plan reads differently from the original")
	}
}

// plainText is the TEXT plan psql's shapes are compared with, and its
// model.
func plainText(t *testing.T) ([]byte, *Explain) {
	t.Helper()
	plain, err := os.ReadFile("testdata/pasted/text.plain")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	return plain, want
}

// TestTerminalWrappedPaste: psql's output (header, its rule, the row
// count) copied from a terminal of any width, which cut every long line
// (the header's rule too, leaving as little as one dash on a line of its
// own), with Windows line ends: the same model as the plain output at
// every width, with and without psql's border and in each line style.
func TestTerminalWrappedPaste(t *testing.T) {
	_, want := plainText(t)
	for _, shape := range []string{"border0.ascii", "border0.old-ascii", "border0.unicode", "border1.ascii", "border1.old-ascii", "border1.unicode"} {
		psql, err := os.ReadFile("testdata/pasted/text." + shape + ".aligned")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(string(psql), "\n"), "\n")
		for width := 30; width <= 160; width++ {
			for _, eol := range []string{"\r\n", "\n"} {
				var b strings.Builder
				for _, l := range lines {
					r := []rune(l)
					for len(r) > width {
						b.WriteString(string(r[:width]) + eol)
						r = r[width:]
					}
					b.WriteString(string(r) + eol)
				}
				got, err := Parse([]byte(b.String()))
				if err != nil {
					t.Errorf("%s, width %d, %q: %v", shape, width, eol, err)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, width %d, %q: reads differently from the plain output", shape, width, eol)
				}
			}
		}
	}
}

// TestAutoExplainText: auto_explain writes the statement before a TEXT
// plan; the plan is read from its first node.
func TestAutoExplainText(t *testing.T) {
	ex, err := Parse([]byte("Query Text: SELECT sum(balance)\n  FROM accounts\nAggregate  (cost=1.00..1.01 rows=1 width=32) (actual time=0.010..0.011 rows=1 loops=1)\n  ->  Seq Scan on accounts  (cost=0.00..1.00 rows=10 width=5) (actual time=0.001..0.005 rows=10 loops=1)\n"))
	if err != nil || ex.Plan.NodeType != "Aggregate" || len(ex.Plan.Plans) != 1 {
		t.Fatalf("%v %+v", err, ex)
	}
}

// FuzzOpenParens: the jumping count agrees with a plain walk over every
// byte.
func FuzzOpenParens(f *testing.F) {
	for _, s := range []string{"", "(a)", "((a)", `("a(" = 'b)')`, `"unclosed (`, "é(ü", ")(", `'it''s' (`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		depth := 0
		var quote byte
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '(':
				depth++
			case c == ')':
				depth--
			}
		}
		if got := openParens(s); got != depth {
			t.Fatalf("openParens(%q) = %d, want %d", s, got, depth)
		}
	})
}
