package profile_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"strings"
	"testing"

	pprof "github.com/google/pprof/profile"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

func readFixture(t testing.TB, name string) (model.Profile, profile.ScriptStats) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := profile.NewBuilder(name)
	st, err := profile.ReadScript(f, b.Add)
	if err != nil {
		t.Fatal(err)
	}
	return b.Profile(2), st
}

// TestReadScript: perf script's samples with their stacks, leaf first;
// offsets cut, a sample cut off at the end kept, other lines counted.
func TestReadScript(t *testing.T) {
	in := "postgres 4242/4242  3823.449299:    2004008 cpu-clock: \n" +
		"\t          30d550 ExecScan+0x20 (/usr/lib/postgresql/15/bin/postgres)\n" +
		"\t          155976 main (/usr/lib/postgresql/15/bin/postgres)\n" +
		"\n" +
		"garbage that is no sample\n" +
		"pg worker 7/8  3823.451300: cpu-clock: \n" +
		"\t          2ff33e [unknown] (/usr/lib/postgresql/15/bin/postgres)\n"
	var got []profile.Sample
	st, err := profile.ReadScript(strings.NewReader(in), func(s profile.Sample) { got = append(got, s) })
	if err != nil || st.Samples != 2 || st.Unrecognised != 1 || len(st.Examples) != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	a, b := got[0], got[1]
	if a.Comm != "postgres" || a.PID != 4242 || a.Period != 2004008 || a.Time != 3823.449299 || len(a.Stack) != 2 || a.Stack[0].Sym != "ExecScan" || a.Stack[1].Sym != "main" {
		t.Errorf("first sample %+v", a)
	}
	if b.Comm != "pg worker" || b.PID != 7 || b.TID != 8 || b.Period != 0 || profile.FrameName(b.Stack[0]) != "[postgres]" {
		t.Errorf("second sample %+v", b)
	}
}

// TestExports: the folded stacks (golden), speedscope's weights and
// pprof's totals agree with the samples read, and the flame graph is
// well-formed SVG with every name escaped.
func TestExports(t *testing.T) {
	p, _ := readFixture(t, "glibc.perf.txt")
	folded := profile.Folded(p)
	var b bytes.Buffer
	if err := profile.WriteFolded(&b, folded); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "testdata/glibc.folded", b.Bytes())

	b.Reset()
	if err := profile.WriteSpeedscope(&b, "glibc", folded); err != nil {
		t.Fatal(err)
	}
	var ss struct {
		Shared   struct{ Frames []struct{ Name string } }
		Profiles []struct {
			Type    string
			Samples [][]int
			Weights []int64
		}
	}
	if err := json.Unmarshal(b.Bytes(), &ss); err != nil {
		t.Fatal(err)
	}
	var weight int64
	for _, w := range ss.Profiles[0].Weights {
		weight += w
	}
	if ss.Profiles[0].Type != "sampled" || weight != p.Samples || len(ss.Profiles[0].Samples) != len(folded) {
		t.Errorf("speedscope: %d weight for %d samples", weight, p.Samples)
	}

	b.Reset()
	p.SampleMS = 2
	if err := profile.WritePprof(&b, p); err != nil {
		t.Fatal(err)
	}
	pp, err := pprof.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.CheckValid(); err != nil {
		t.Errorf("pprof's own check refuses the profile: %v", err)
	}
	var n, cpu int64
	names := map[string]bool{}
	for _, s := range pp.Sample {
		n += s.Value[0]
		cpu += s.Value[1]
		for _, l := range s.Location {
			names[l.Line[0].Function.Name] = true
		}
	}
	if n != p.Samples || pp.SampleType[1].Type != "cpu" || pp.Period != 2e6 || cpu != n*pp.Period {
		t.Errorf("pprof holds %d samples of %d, %d ns of profile.CPU, period %d", n, p.Samples, cpu, pp.Period)
	}
	for _, st := range p.Stacks {
		for _, f := range st.Frames {
			if !names[profile.FrameName(f)] {
				t.Errorf("pprof has no function %q", profile.FrameName(f))
			}
		}
	}

	evil := map[string]int64{`statement 1: SELECT '</text><script>alert(1)</script>';f&g<h>` + "\x1b[31m": 5, "main;work": 10}
	b.Reset()
	if err := profile.FlameSVG(&b, "a <title> & more", evil); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not well-formed: %v", err)
		}
	}
	if strings.Contains(b.String(), "<script>alert") || strings.Contains(b.String(), "\x1b") {
		t.Errorf("a frame name came through as markup")
	}
}

func FuzzReadScript(f *testing.F) {
	b, _ := os.ReadFile("testdata/tz.perf.txt")
	f.Add(string(b[:min(len(b), 3000)]))
	f.Add("x 1/1 1.0: 5 cpu-clock: \n\t 1 f (d)\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		builder := profile.NewBuilder("fuzz")
		st, _ := profile.ReadScript(strings.NewReader(text), builder.Add)
		p := builder.Profile(1)
		if p.Samples != st.Samples {
			t.Fatalf("%d samples built of %d read", p.Samples, st.Samples)
		}
		var w bytes.Buffer
		if err := profile.FlameSVG(&w, "fuzz", profile.Folded(p)); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&w)
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("the SVG is not well-formed: %v", err)
			}
		}
	})
}
