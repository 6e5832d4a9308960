package profile

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

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
	e := &pprofEncoder{strs: map[string]int64{"": 0}, table: []string{""}, ids: map[string]uint64{}}
	period := int64(p.SampleMS * 1e6)
	var out []byte
	out = pbMessage(out, profSampleType, e.valueType("samples", "count"))
	out = pbMessage(out, profSampleType, e.valueType("cpu", "nanoseconds"))
	for _, s := range p.Stacks {
		var stack []uint64
		for _, f := range s.Frames {
			stack = append(stack, e.location(FrameName(f), f.DSO))
		}
		if s.QueryID != "" {
			stack = append(stack, e.location(statementFrame(s), ""))
		}
		if len(stack) == 0 {
			stack = append(stack, e.location("[no stack]", ""))
		}
		var locs, values []byte
		for _, id := range stack {
			locs = binary.AppendUvarint(locs, id)
		}
		values = binary.AppendUvarint(values, uint64(s.Count))
		values = binary.AppendUvarint(values, uint64(s.Count*period))
		sample := pbMessage(nil, sampleLocation, locs) // packed repeated fields
		sample = pbMessage(sample, sampleValue, values)
		out = pbMessage(out, profSample, sample)
	}
	out = append(out, e.defs...)
	for _, s := range e.table {
		out = pbMessage(out, profStringTable, []byte(s))
	}
	if p.Seconds > 0 {
		out = pbVarint(out, profDuration, uint64(p.Seconds*1e9))
	}
	out = pbMessage(out, profPeriodType, e.valueType("cpu", "nanoseconds"))
	out = pbVarint(out, profPeriod, uint64(period))
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(out); err != nil {
		return fmt.Errorf("writing the pprof profile: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing the pprof profile: %w", err)
	}
	return nil
}

// profile.proto's field numbers.
const (
	profSampleType, profSample, profLocation, profFunction, profStringTable = 1, 2, 4, 5, 6
	profDuration, profPeriodType, profPeriod                                = 10, 11, 12
	valueTypeType, valueTypeUnit                                            = 1, 2
	sampleLocation, sampleValue                                             = 1, 2
	locID, locLine                                                          = 1, 4
	lineFunction                                                            = 1
	funcID, funcName, funcSystemName, funcFilename                          = 1, 2, 3, 4
)

// pprofEncoder holds a profile's string table and its functions and
// locations, one of each per frame name, numbered from 1.
type pprofEncoder struct {
	strs  map[string]int64
	table []string
	ids   map[string]uint64
	defs  []byte // the Function and Location messages
}

func (e *pprofEncoder) str(s string) int64 {
	if i, ok := e.strs[s]; ok {
		return i
	}
	e.strs[s] = int64(len(e.table))
	e.table = append(e.table, s)
	return e.strs[s]
}

func (e *pprofEncoder) valueType(typ, unit string) []byte {
	return pbVarint(pbVarint(nil, valueTypeType, uint64(e.str(typ))), valueTypeUnit, uint64(e.str(unit)))
}

// location is the id of a frame's location (and function), defined the
// first time the frame is seen.
func (e *pprofEncoder) location(name, file string) uint64 {
	if id, ok := e.ids[name]; ok {
		return id
	}
	id := uint64(len(e.ids) + 1)
	e.ids[name] = id
	fn := pbVarint(nil, funcID, id)
	fn = pbVarint(fn, funcName, uint64(e.str(name)))
	fn = pbVarint(fn, funcSystemName, uint64(e.str(name)))
	fn = pbVarint(fn, funcFilename, uint64(e.str(file)))
	e.defs = pbMessage(e.defs, profFunction, fn)
	l := pbVarint(nil, locID, id)
	l = pbMessage(l, locLine, pbVarint(nil, lineFunction, id))
	e.defs = pbMessage(e.defs, profLocation, l)
	return id
}

// The profile is protobuf's wire format written by hand: a field's tag is
// its number shifted left three bits with its wire type (0 a varint, 2
// length-delimited). protobuf-go's protowire would do the same, but its
// package start-up opens and reads the running binary (to seed a
// deliberately unstable output order), on every pgmedic command.
const (
	wireVarint = 0
	wireBytes  = 2
)

func pbMessage(b []byte, field int, body []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

func pbVarint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b // proto3: zero is the default and is not written
	}
	b = binary.AppendUvarint(b, uint64(field)<<3|wireVarint)
	return binary.AppendUvarint(b, v)
}
