package profile

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

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
// frame name, the statement as the root frame when known. The message is
// written field by field (profile.proto's numbers below): the encoding is
// small, and pprof's own library would cost every pgmedic command its
// start-up work.
func WritePprof(w io.Writer, p model.Profile) error {
	// profile.proto's field numbers.
	const (
		profSampleType, profSample, profLocation, profFunction, profStringTable = 1, 2, 4, 5, 6
		profDuration, profPeriodType, profPeriod                                = 10, 11, 12
		valueType, valueUnit                                                    = 1, 2
		sampleLocation, sampleValue                                             = 1, 2
		locID, locLine                                                          = 1, 4
		lineFunction                                                            = 1
		funcID, funcName, funcSystemName, funcFilename                          = 1, 2, 3, 4
	)
	strs := map[string]int64{"": 0}
	table := []string{""}
	str := func(s string) int64 {
		if i, ok := strs[s]; ok {
			return i
		}
		strs[s] = int64(len(table))
		table = append(table, s)
		return strs[s]
	}
	message := func(b []byte, field protowire.Number, body []byte) []byte {
		b = protowire.AppendTag(b, field, protowire.BytesType)
		return protowire.AppendBytes(b, body)
	}
	varint := func(b []byte, field protowire.Number, v uint64) []byte {
		if v == 0 {
			return b // proto3: zero is the default and is not written
		}
		b = protowire.AppendTag(b, field, protowire.VarintType)
		return protowire.AppendVarint(b, v)
	}
	valueTypeOf := func(typ, unit string) []byte {
		return varint(varint(nil, valueType, uint64(str(typ))), valueUnit, uint64(str(unit)))
	}
	period := int64(p.SampleMS * 1e6)
	var out []byte
	out = message(out, profSampleType, valueTypeOf("samples", "count"))
	out = message(out, profSampleType, valueTypeOf("cpu", "nanoseconds"))
	// One function and one location per frame name, numbered from 1.
	ids := map[string]uint64{}
	var defs []byte
	loc := func(name, file string) uint64 {
		if id, ok := ids[name]; ok {
			return id
		}
		id := uint64(len(ids) + 1)
		ids[name] = id
		fn := varint(nil, funcID, id)
		fn = varint(fn, funcName, uint64(str(name)))
		fn = varint(fn, funcSystemName, uint64(str(name)))
		fn = varint(fn, funcFilename, uint64(str(file)))
		defs = message(defs, profFunction, fn)
		l := varint(nil, locID, id)
		l = message(l, locLine, varint(nil, lineFunction, id))
		defs = message(defs, profLocation, l)
		return id
	}
	for _, s := range p.Stacks {
		var stack []uint64
		for _, f := range s.Frames {
			stack = append(stack, loc(FrameName(f), f.DSO))
		}
		if s.QueryID != "" {
			stack = append(stack, loc(statementFrame(s), ""))
		}
		if len(stack) == 0 {
			stack = append(stack, loc("[no stack]", ""))
		}
		var locs, values []byte
		for _, id := range stack {
			locs = protowire.AppendVarint(locs, id)
		}
		values = protowire.AppendVarint(values, uint64(s.Count))
		values = protowire.AppendVarint(values, uint64(s.Count*period))
		sample := message(nil, sampleLocation, locs) // packed repeated fields
		sample = message(sample, sampleValue, values)
		out = message(out, profSample, sample)
	}
	out = append(out, defs...)
	for _, s := range table {
		out = protowire.AppendTag(out, profStringTable, protowire.BytesType)
		out = protowire.AppendString(out, s)
	}
	if p.Seconds > 0 {
		out = varint(out, profDuration, uint64(p.Seconds*1e9))
	}
	out = message(out, profPeriodType, valueTypeOf("cpu", "nanoseconds"))
	out = varint(out, profPeriod, uint64(period))
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(out); err != nil {
		return fmt.Errorf("writing the pprof profile: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing the pprof profile: %w", err)
	}
	return nil
}
