package plan

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseJSONRealPlan(t *testing.T) {
	b, err := os.ReadFile("testdata/pg15_jit_analyze.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if !e.HasAnalyze || e.ExecutionMS < 1000 || e.PlanningMS <= 0 {
		t.Errorf("timings: %+v", e)
	}
	if e.JIT == nil || e.JIT.Functions != 329 || !e.JIT.Optimization || !e.JIT.Inlining {
		t.Fatalf("JIT block: %+v", e.JIT)
	}
	if e.JIT.TimingMS == nil || e.JIT.TimingMS.Total != 988.558 || e.JIT.TimingMS.Optimization != 443.589 {
		t.Errorf("JIT timing: %+v", e.JIT.TimingMS)
	}
	if e.Plan.NodeType != "Bitmap Heap Scan" || e.Plan.TotalCost < 500000 {
		t.Errorf("root: %+v", e.Plan.NodeType)
	}
}

func TestParseJSONShapes(t *testing.T) {
	plain, _ := os.ReadFile("testdata/pg15_no_analyze.json")
	// PostgreSQL 17 made Timing.Generation an object {Deform, Total}.
	pg17 := `[{"Plan": {"Node Type": "Result", "Total Cost": 0.01}, "Planning Time": 0.1, "Execution Time": 50.5,
	  "JIT": {"Functions": 3, "Options": {"Inlining": false, "Optimization": false, "Expressions": true, "Deforming": true},
	          "Timing": {"Generation": {"Deform": 0.2, "Total": 1.5}, "Inlining": 0, "Optimization": 2, "Emission": 40, "Total": 43.5}}}]`
	cases := []struct {
		name     string
		in       string
		analyze  bool
		jitTotal float64
		genTotal float64
	}{
		{"psql array", string(plain), false, 0, 0},
		{"bare object", strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(plain)), "["), "]"), false, 0, 0},
		{"quoted psql cell", `"` + strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(string(plain)), `"`, `\"`), "\n", `\n`) + `"`, false, 0, 0},
		{"pg17 generation object", pg17, true, 43.5, 1.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := ParseJSON([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if e.HasAnalyze != c.analyze {
				t.Errorf("HasAnalyze = %v", e.HasAnalyze)
			}
			if c.jitTotal > 0 && (e.JIT == nil || e.JIT.TimingMS.Total != c.jitTotal || e.JIT.TimingMS.Generation != c.genTotal) {
				t.Errorf("JIT = %+v", e.JIT)
			}
		})
	}
}

func TestParseJSONRejects(t *testing.T) {
	for name, in := range map[string]string{
		"empty":       "",
		"truncated":   `[{"Plan": {"Node Type": "Seq Scan", "Plans": [`,
		"not a plan":  `{"hello": "world"}`,
		"empty array": `[]`,
		"text plan":   "Seq Scan on t  (cost=0.00..35.50 rows=2550 width=4)",
		"no type":     `[{"Plan": {}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseJSON([]byte(in)); err == nil {
				t.Fatal("accepted")
			} else if name != "truncated" && !errors.Is(err, ErrNotAPlan) {
				t.Errorf("error %v does not wrap ErrNotAPlan", err)
			}
		})
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, p := range []string{"testdata/pg15_no_analyze.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`[{"Plan": {"Node Type": "Result"}, "JIT": {"Timing": {"Generation": {"Total": 1}}}}]`))
	f.Add([]byte(`[{"Plan": {"Node Type": "Seq Scan", "Actual Loops": 1e308, "Actual Total Time": 1e308, "Shared Hit Blocks": 9223372036854775807}}]`))
	f.Add([]byte(`"[{""Plan"": {""Node Type"": ""Result""}}]"`))
	more, _ := filepath.Glob("testdata/pasted/json.*")
	shapes, _ := filepath.Glob("testdata/shapes/*.json")
	for _, p := range append(more, shapes...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseJSON(b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if e.Plan.NodeType == "" {
			t.Fatal("accepted a plan without a node type")
		}
		e.Plan.Walk(func(n, _ *Node) {
			if !finiteFigures(n.Figures) {
				t.Fatalf("figures not finite: %+v", n.Figures)
			}
		})
		if _, err := json.Marshal(e); err != nil {
			t.Fatalf("the model does not encode: %v", err)
		}
	})
}
