package plan

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFastReadsEveryField: every json key of rawNode (its embedded
// buffers included), given alone in a node, is read by the fast reader,
// to the model encoding/json reads, and changes that model.
func TestFastReadsEveryField(t *testing.T) {
	special := map[string]string{
		"Node Type":     `"Seq Scan"`,
		"Plans":         `[{"Node Type": "Result"}]`,
		"Workers":       `[{"Worker Number": 1, "Sort Method": "quicksort"}]`,
		"Target Tables": `[{"Relation Name": "t", "Schema": "s"}]`,
	}
	byKind := map[reflect.Kind]string{reflect.String: `"x"`, reflect.Float64: `1.5`, reflect.Int: `2`, reflect.Int64: `3`,
		reflect.Bool: `true`, reflect.Pointer: `4.5`, reflect.Slice: `["a", "b"]`}
	base := `{"Plan": {"Node Type": "Seq Scan"}}`
	_, baseRoot, err := slowDecodeFirst([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			value, ok := special[key]
			if !ok {
				value = byKind[f.Type.Kind()]
			}
			in := []byte(`{"Plan": {"Node Type": "Seq Scan", "` + key + `": ` + value + `}}`)
			if key == "Node Type" {
				in = []byte(`{"Plan": {"Node Type": "Index Scan"}}`)
			}
			_, slow, serr := slowDecodeFirst(in)
			_, fast, ferr := fastDecodeFirst(in)
			switch {
			case serr != nil:
				t.Errorf("%s: encoding/json refuses %s: %v", key, in, serr)
			case ferr != nil:
				t.Errorf("%s: the fast reader left %s to encoding/json", key, in)
			case !reflect.DeepEqual(fast, slow):
				t.Errorf("%s: the readers disagree on %s", key, in)
			case reflect.DeepEqual(slow, baseRoot):
				t.Errorf("%s: the value %s changed nothing; the test proves nothing for it", key, value)
			}
			n++
		}
	}
	walk(reflect.TypeOf(rawNode{}))
	if n < 70 {
		t.Fatalf("only %d keys", n)
	}
}

// TestFastReadsRealPlans: every JSON plan in testdata is read by the fast
// reader, and read as encoding/json reads it.
func TestFastReadsRealPlans(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	more, _ := filepath.Glob("testdata/*/*.json")
	n := 0
	for _, p := range append(files, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.TrimSpace(string(b)))
		slow, slowRoot, serr := slowDecodeFirst(b)
		if serr != nil {
			continue // a paste or a broken plan: not for either reader as it is
		}
		fast, fastRoot, ferr := fastDecodeFirst(b)
		if ferr != nil {
			t.Errorf("%s: the fast reader gave up on a plan encoding/json reads", p)
			continue
		}
		if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fastRoot, slowRoot) {
			t.Errorf("%s: the readers disagree", p)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("only %d JSON plans read", n)
	}
}

// FuzzFastJSON: whenever the fast reader finishes, encoding/json reads the
// same input to the same result.
func FuzzFastJSON(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	more, _ := filepath.Glob("testdata/*/*.json")
	for _, p := range append(files, more...) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`[{"Plan": {"Node Type": "Result", "Plans": [null]}}]`,
		`{"Plan": {"node type": "Result"}}`,
		`{"Plan": {"Node Type": "Seq Scan", "Plan Width": 1.5}}`,
		`{"Plan": {"Node Type": "Seq Scan", "Filter": "(\"a\" = 'é')", "Output": ["x", null]}}`,
		`[{"Plan": {"Node Type": "A", "Plans": [{"Node Type": "B"}], "Plans": []}}, 7]`,
		`{"Plan": {"Node Type": "A", "Actual Rows": null, "Workers": [{"Worker Number": 1}]}, "Settings": {"a": "b"}, "JIT": {"Functions": 3}}`,
		`{"Plan": {"Node Type": "A"}} x`,
		`{"Plan": {"Node Type": "A", "Shared Hit Blocks": 9223372036854775808}}`,
		`{"Plan": {"Node Type": "A", "Total Cost": -0.0e+1, "Startup Cost": 01}}`,
		`{"Plan": {"Node Type": "A", "Filter": "x", "Filter": null, "Actual Rows": 1, "Actual Rows": null, "Output": ["a"], "Output": [null]}}`,
		`{"Plan": {"Node Type": "A", "Workers": [{"Sort Method": "m"}], "Workers": [{"Worker Number": 2}], "Plan Rows": 1, "Plan Rows": 2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, fastRoot, err := fastDecodeFirst(b)
		if err != nil {
			return
		}
		slow, slowRoot, serr := slowDecodeFirst(b)
		if serr != nil {
			t.Fatalf("the fast reader read what encoding/json refuses (%v): %q", serr, b)
		}
		if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fastRoot, slowRoot) {
			t.Fatalf("the readers disagree on %q:\nfast %+v %+v\nslow %+v %+v", b, fast, fastRoot, slow, slowRoot)
		}
	})
}
