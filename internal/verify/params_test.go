package verify

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

func TestParseArray(t *testing.T) {
	for in, want := range map[string][]string{
		`{42,76,73}`:                 {"42", "76", "73"},
		`{"a b","c,d",e}`:            {"a b", "c,d", "e"},
		`{"with \"quote\"",x}`:       {`with "quote"`, "x"},
		`{NULL,"NULL",1}`:            {"NULL", "1"},
		`{}`:                         nil,
		`not an array`:               nil,
		`{{1,2},{3,4}}`:              nil,
		`{"2024-01-01 00:00:00+00"}`: {"2024-01-01 00:00:00+00"},
	} {
		if got := ParseArray(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseArray(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{5, 1, 900, 3, 4}); m != 4 {
		t.Errorf("odd median = %v", m)
	}
	if m := median([]float64{1, 2, 3, 100}); m != 2.5 {
		t.Errorf("even median = %v", m)
	}
}

func FuzzParseArray(f *testing.F) {
	for _, s := range []string{`{1,2}`, `{"a\"b",NULL}`, `{}`, `{{1}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range ParseArray(s) {
			// Whatever comes out must survive the round trip through the
			// quoting used to build experiment arguments.
			if got := ParseArray("{" + arrayElem(v) + "}"); len(got) != 1 || got[0] != v {
				t.Fatalf("round trip of %q gave %q", v, got)
			}
		}
	})
}

// The copy experiments judge pages touched; a temporary copy's pages are
// local buffers, hit or read.
func TestBlocksTouchedCountsLocalBuffers(t *testing.T) {
	ex, err := plan.ParseJSON([]byte(`[{"Plan": {"Node Type": "Seq Scan", "Relation Name": "pgmedic_copy",
		"Shared Hit Blocks": 3, "Shared Read Blocks": 1, "Local Hit Blocks": 100, "Local Read Blocks": 5}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if got := blocksTouched(ex.Plan.Buffers); got != 109 {
		t.Fatalf("blocksTouched = %d, want 109 (3+1 shared, 100+5 local)", got)
	}
}

// TestValuesHiddenByDefault: a value re-runs took from the user's data
// (pg_stats, the application's literals) is named by its source and type
// in the report, never shown, unless --show-values; pgmedic's own counts
// and domain values are shown.
func TestValuesHiddenByDefault(t *testing.T) {
	const planted = "person29@example.com"
	for _, show := range []bool{false, true} {
		e := &Engine{ShowValues: show}
		got := e.valueText(1, planted, "text", "pg_stats customers.email", true)
		if strings.Contains(got, planted) != show || !strings.Contains(got, "pg_stats customers.email") {
			t.Errorf("show %v: %q", show, got)
		}
		if got := e.valueText(2, "100", "bigint", "rows per call in pg_stat_statements", false); !strings.Contains(got, "100") {
			t.Errorf("a count of pgmedic's was hidden: %q", got)
		}
	}
}

// TestFunctionArgumentValues: a parameter given to date_trunc as its
// unit gets a unit date_trunc takes, not the text type's placeholder.
func TestFunctionArgumentValues(t *testing.T) {
	st, err := sqlparse.Parse("SELECT date_trunc($1, created_at), count(*) FROM orders WHERE lower(email) = lower($2) GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	args := st.ArgumentParams()
	if args[1] != (sqlparse.FuncArg{Func: "date_trunc", Arg: 0}) || args[2].Func != "lower" {
		t.Fatalf("argument params: %+v", args)
	}
	e := &Engine{}
	values, desc, why := e.parameterValues(context.Background(), nil, nil, nil, nil, args, []string{"text", "text"})
	if why != "" || values[0] != "'day'::text" || values[1] != "'a'::text" {
		t.Fatalf("values %v, %v (%s)", values, desc, why)
	}
}

func TestLikePrefix(t *testing.T) {
	for in, want := range map[string]string{"Cedar 1a2b3c4d5e": "Cedar%", "ab": "ab%", "50%_off_x": `50\%%`, "Ünïcode-x": "Ünï%"} {
		if got := likePrefix(in); got != want {
			t.Errorf("likePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
