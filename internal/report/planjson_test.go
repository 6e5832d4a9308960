package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// TestPlanJSONMatchesEncoding holds the plan report's hand-written JSON to
// the bytes encoding/json writes for it: on real plans, on a node with
// every field set (a field added to FlatNode and not to appendNode fails
// here), and on strings and floats at their edges.
func TestPlanJSONMatchesEncoding(t *testing.T) {
	var reports []*PlanReport
	files, _ := filepath.Glob(filepath.Join("..", "plan", "testdata", "*.json"))
	more, _ := filepath.Glob(filepath.Join("..", "plan", "testdata", "pg15", "*"))
	files = append(files, more...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := plan.Parse(data)
		if err != nil {
			continue // the malformed ones
		}
		reports = append(reports, NewPlan("test", f, e, nil, nil, 8, model.Info))
	}
	if len(reports) < 3 {
		t.Fatalf("read %d plans from plan's testdata", len(reports))
	}
	full := plan.FlatNode{}
	v := reflect.ValueOf(&full).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.25)
		case reflect.String:
			f.SetString("x<y> & \"z\"\n\t\u2028é\xff" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("FlatNode.%s is a %s: teach appendNode and this test its kind", v.Type().Field(i).Name, f.Kind())
		}
	}
	edge := []float64{0, -0.5, 1e-7, 1.5e-9, 1e21, 123456789.125, 1e20, -3e-7, 0.000001}
	rng := rand.New(rand.NewSource(1))
	var odd []plan.FlatNode
	for i, x := range edge {
		var s strings.Builder
		for j := 0; j < 12; j++ {
			s.WriteByte(byte(rng.Intn(256)))
		}
		odd = append(odd, plan.FlatNode{ID: i, Label: s.String(), Cost: x, Share: -x, Misestimate: x, IOms: x, Detail: "Filter: (a < " + s.String() + ")"})
	}
	reports = append(reports,
		&PlanReport{PGMedic: "t", Source: "full", Plan: plan.Flat{Nodes: []plan.FlatNode{full}, Settings: map[string]string{"b": "<", "a": "1"}}, Findings: []model.Finding{}},
		&PlanReport{PGMedic: "t", Source: "odd", Plan: plan.Flat{Nodes: odd, JITMS: 1e-8}, Findings: []model.Finding{{Rule: "r", Title: "<t>"}}},
		&PlanReport{PGMedic: "t", Source: "empty", Plan: plan.Flat{Nodes: []plan.FlatNode{}, Settings: map[string]string{}}},
		&PlanReport{PGMedic: "t", Source: "nil"},
		&PlanReport{PGMedic: "t", Source: "findings", Findings: []model.Finding{filled[model.Finding](1), filled[model.Finding](2), {Rule: "sparse", Verification: model.Verification{Parameters: []string{}}}, {Evidence: []model.Evidence{}}},
			Skipped: []model.Skip{filled[model.Skip](3), {}}, Summary: filled[Summary](4)},
	)
	for _, r := range reports {
		var want, got bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		if err := r.JSON(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			g, w := got.String(), want.String()
			i := 0
			for i < len(g) && i < len(w) && g[i] == w[i] {
				i++
			}
			t.Fatalf("%s: differs at byte %d:\n got %q\nwant %q", r.Source, i, g[max(0, i-80):min(len(g), i+80)], w[max(0, i-80):min(len(w), i+80)])
		}
	}
}

// filled is a T with every exported field that JSON writes set, through
// nested structs, pointers and slices, to values at the edges of what
// encoding/json escapes and formats: a field added to a finding and not to
// its hand-written encoder fails TestPlanJSONMatchesEncoding.
func filled[T any](seed int) T {
	var v T
	fill(reflect.ValueOf(&v).Elem(), seed)
	return v
}

func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("<%d> & \"q\"\n\u2028\xff é", seed))
	case reflect.Float64:
		v.SetFloat([]float64{0.125, 1e-7, 1e21, -3.5, 123456789.25}[seed%5])
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed%3 + 1))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := 0; i < 2; i++ {
			fill(v.Index(i), seed+i)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.IsExported() && f.Tag.Get("json") != "-" {
				fill(v.Field(i), seed+i)
			}
		}
	}
}
