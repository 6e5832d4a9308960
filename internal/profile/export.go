package profile

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/pgmedic/pgmedic/internal/model"
)

// WriteFolded writes the folded stacks, one "root;...;leaf count" a line
// (Brendan Gregg's format, which flamegraph.pl, speedscope and inferno
// read), sorted.
func WriteFolded(w io.Writer, folded map[string]int64) error {
	keys := make([]string, 0, len(folded))
	for k := range folded {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d\n", k, folded[k])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSpeedscope writes the profile in speedscope's file format: one
// "sampled" profile whose samples are the folded stacks, root first, with
// their counts as weights.
func WriteSpeedscope(w io.Writer, name string, folded map[string]int64) error {
	type frame struct {
		Name string `json:"name"`
	}
	type sampled struct {
		Type       string  `json:"type"`
		Name       string  `json:"name"`
		Unit       string  `json:"unit"`
		StartValue int64   `json:"startValue"`
		EndValue   int64   `json:"endValue"`
		Samples    [][]int `json:"samples"`
		Weights    []int64 `json:"weights"`
	}
	doc := struct {
		Schema   string `json:"$schema"`
		Exporter string `json:"exporter"`
		Name     string `json:"name"`
		Shared   struct {
			Frames []frame `json:"frames"`
		} `json:"shared"`
		Profiles []sampled `json:"profiles"`
	}{Schema: "https://www.speedscope.app/file-format-schema.json", Exporter: "pgmedic", Name: name}
	p := sampled{Type: "sampled", Name: name, Unit: "none", Samples: [][]int{}, Weights: []int64{}}
	ids := map[string]int{}
	keys := make([]string, 0, len(folded))
	for k := range folded {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var stack []int
		for _, name := range strings.Split(k, ";") {
			id, ok := ids[name]
			if !ok {
				id = len(doc.Shared.Frames)
				ids[name] = id
				doc.Shared.Frames = append(doc.Shared.Frames, frame{Name: name})
			}
			stack = append(stack, id)
		}
		p.Samples = append(p.Samples, stack)
		p.Weights = append(p.Weights, folded[k])
		p.EndValue += folded[k]
	}
	doc.Profiles = []sampled{p}
	enc := json.NewEncoder(w)
	return enc.Encode(doc)
}

// WritePprof writes the profile as pprof's profile.proto (gzipped), which
// go tool pprof opens: samples and CPU time per stack, one function per
// frame name, the statement as the root frame when known.
func WritePprof(w io.Writer, p model.Profile) error {
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     int64(p.SampleMS * 1e6),
	}
	if p.Seconds > 0 {
		prof.DurationNanos = int64(p.Seconds * 1e9)
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	loc := func(name, file string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(prof.Function) + 1), Name: name, SystemName: name, Filename: file}
		prof.Function = append(prof.Function, f)
		funcs[name] = f
		l := &profile.Location{ID: uint64(len(prof.Location) + 1), Line: []profile.Line{{Function: f}}}
		prof.Location = append(prof.Location, l)
		locs[name] = l
		return l
	}
	for _, s := range p.Stacks {
		var stack []*profile.Location
		for _, f := range s.Frames {
			stack = append(stack, loc(FrameName(f), f.DSO))
		}
		if s.QueryID != "" {
			stack = append(stack, loc(statementFrame(s), ""))
		}
		if len(stack) == 0 {
			stack = append(stack, loc("[no stack]", ""))
		}
		prof.Sample = append(prof.Sample, &profile.Sample{Location: stack, Value: []int64{s.Count, s.Count * prof.Period}})
	}
	if err := prof.CheckValid(); err != nil {
		return fmt.Errorf("building the pprof profile: %w", err)
	}
	return prof.Write(w)
}
