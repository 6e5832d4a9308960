package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// comparable drops what legitimately differs between two runs of the same
// query (times, I/O time, memory) so that a JSON and a TEXT run of the
// same plan must agree on everything else.
func comparable(e *Explain) *Explain {
	c := *e
	c.Format, c.PlanningMS, c.ExecutionMS = "", 0, 0
	c.PlanningBuffers = Buffers{}
	c.QueryID = ""
	// TEXT names a foreign-key trigger by its constraint only.
	c.Triggers = nil
	for _, tr := range e.Triggers {
		if tr.Constraint != "" {
			tr.Name = ""
		}
		tr.TimeMS = 0
		c.Triggers = append(c.Triggers, tr)
	}
	if c.JIT != nil {
		j := *c.JIT
		if j.TimingMS != nil {
			j.TimingMS = &JITTiming{}
		}
		c.JIT = &j
	}
	c.Plan = strip(e.Plan)
	return &c
}

func strip(n Node) Node {
	n.ActualStartupMS, n.ActualTotalMS = 0, 0
	n.IO = IOTiming{}
	n.PeakMemoryKB = 0
	// In-memory sort space and heap fetches move between runs too (the
	// first run's row locks clear all-visible bits).
	if n.SortSpaceType == "Memory" {
		n.SortSpaceKB = 0
	}
	n.Workers = nil
	n.HeapFetches = min(n.HeapFetches, 1)
	// Block counts move between runs (hint bits, the buffer cache, a
	// worker's share); keep only whether the node touched any.
	if n.Buffers.Total() > 0 {
		n.Buffers = Buffers{SharedHit: 1}
	}
	if n.WAL.Records > 0 {
		n.WAL = WAL{Records: 1}
	}
	n.Figures = Figures{}
	kids := n.Plans
	n.Plans = nil
	for _, k := range kids {
		n.Plans = append(n.Plans, strip(k))
	}
	return n
}

func fixturePairs(t testing.TB) []string {
	t.Helper()
	txt, err := filepath.Glob("testdata/pg15/*.txt")
	shapes, err2 := filepath.Glob("testdata/shapes/*.txt")
	if err != nil || err2 != nil || len(txt) == 0 || len(shapes) == 0 {
		t.Fatalf("no fixtures: %v %v", err, err2)
	}
	txt = append(txt, shapes...)
	// What each PostgreSQL version from 13 to 18 prints
	// (scripts/version-fixtures.sh).
	versions, _ := filepath.Glob("testdata/versions/pg*/*.txt")
	txt = append(txt, versions...)
	var names []string
	for _, f := range txt {
		base := strings.TrimSuffix(f, ".txt")
		if _, err := os.Stat(base + ".json"); err == nil {
			names = append(names, base)
		}
	}
	return names
}

func mustParse(t testing.TB, path string) *Explain {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return e
}

// TestTextAndJSONAgree runs both parsers over the same queries explained
// by PostgreSQL 15 in both formats (scripts/plan-fixtures.sh).
func TestTextAndJSONAgree(t *testing.T) {
	for _, base := range fixturePairs(t) {
		t.Run(filepath.Base(base), func(t *testing.T) {
			j, x := mustParse(t, base+".json"), mustParse(t, base+".txt")
			if j.Format != "json" || x.Format != "text" {
				t.Fatalf("formats %s/%s", j.Format, x.Format)
			}
			if j.HasAnalyze != x.HasAnalyze || j.HasTiming != x.HasTiming || j.HasPlanningTime != x.HasPlanningTime {
				t.Errorf("flags json %v/%v/%v text %v/%v/%v", j.HasAnalyze, j.HasTiming, j.HasPlanningTime, x.HasAnalyze, x.HasTiming, x.HasPlanningTime)
			}
			if (j.ExecutionMS > 0) != (x.ExecutionMS > 0) || (j.JIT == nil) != (x.JIT == nil) {
				t.Errorf("execution %v/%v jit %v/%v", j.ExecutionMS, x.ExecutionMS, j.JIT, x.JIT)
			}
			if j.JIT != nil && j.JIT.TimingMS != nil && (x.JIT.TimingMS == nil || x.JIT.TimingMS.Total <= 0) {
				t.Errorf("text JIT timing lost: %+v", x.JIT)
			}
			a, b := comparable(j), comparable(x)
			ja, _ := json.MarshalIndent(a, "", " ")
			jb, _ := json.MarshalIndent(b, "", " ")
			if string(ja) != string(jb) {
				la, lb := strings.Split(string(ja), "\n"), strings.Split(string(jb), "\n")
				for i := 0; i < len(la) && i < len(lb); i++ {
					if la[i] != lb[i] {
						t.Fatalf("json and text differ at line %d:\njson: %s\ntext: %s", i+1, la[i], lb[i])
					}
				}
				t.Fatalf("json and text differ in length: %d vs %d lines", len(la), len(lb))
			}
		})
	}
}

// TestEveryVersion: each major version from 13 to 18 has its plans,
// recorded from its own server, and each reads in both formats with the
// figures every rule uses.
func TestEveryVersion(t *testing.T) {
	// Every major pgversion knows: a new row there needs its fixtures here.
	for _, m := range pgversion.Majors() {
		v := strconv.Itoa(m)
		dir := "testdata/versions/pg" + v
		txt, _ := filepath.Glob(dir + "/*.txt")
		if len(txt) < 8 {
			t.Errorf("PostgreSQL %s: %d plans in %s (record them: bash scripts/version-fixtures.sh %s)", v, len(txt), dir, v)
			continue
		}
		for _, f := range txt {
			e := mustParse(t, f)
			name := filepath.Base(f)
			if strings.HasPrefix(name, "costs-only") || strings.HasPrefix(name, "generic-plan") {
				if e.HasAnalyze || e.Plan.TotalCost <= 0 {
					t.Errorf("%s: analyze %v, cost %v", f, e.HasAnalyze, e.Plan.TotalCost)
				}
				continue
			}
			if !e.HasAnalyze || e.ExecutionMS <= 0 || e.Plan.ActualLoops <= 0 {
				t.Errorf("%s: analyze %v, execution %v ms, loops %v", f, e.HasAnalyze, e.ExecutionMS, e.Plan.ActualLoops)
			}
			if e.Plan.Buffers.SharedHit+e.Plan.Buffers.SharedRead == 0 {
				t.Errorf("%s: no buffers read", f)
			}
		}
	}
}

func TestVersionDifferences(t *testing.T) {
	pg12 := mustParse(t, "testdata/versions/pg12-io.txt")
	if got := pg12.Plan.IO.SharedReadMS; got != 0.412 {
		t.Errorf("pg12 I/O read = %v", got)
	}
	if h := pg12.Plan.Plans[1]; h.NodeType != "Hash" || h.HashBuckets != 1024 || h.OriginalHashBatches != 1 || h.ParentRelationship != "Inner" {
		t.Errorf("pg12 hash node %+v", h)
	}
	pg13 := mustParse(t, "testdata/versions/pg13-hashagg-spill.txt")
	if n := pg13.Plan; n.Strategy != "Hashed" || n.HashAggBatches != 41 || n.DiskUsageKB != 91224 || n.Buffers.TempWritten != 21130 {
		t.Errorf("pg13 hashagg %+v", n)
	}
	pg16 := mustParse(t, "testdata/versions/pg16-io.json")
	if pg16.Plan.IO.SharedReadMS != 3.21 || pg16.PlanningBuffers.SharedHit != 3 {
		t.Errorf("pg16 %+v %+v", pg16.Plan.IO, pg16.PlanningBuffers)
	}
	for _, f := range []string{"testdata/versions/pg17-jit.txt", "testdata/versions/pg17-jit.json"} {
		e := mustParse(t, f)
		if e.JIT == nil || e.JIT.TimingMS == nil || e.JIT.TimingMS.Generation != 0.323 || e.JIT.TimingMS.Deform != 0.111 || e.JIT.TimingMS.Total != 52.622 {
			t.Errorf("%s: JIT %+v", f, e.JIT)
		}
		if e.PlanningBuffers.SharedHit != 6 || e.ExecutionMS != 62.104 {
			t.Errorf("%s: planning buffers %+v execution %v", f, e.PlanningBuffers, e.ExecutionMS)
		}
	}
}

func TestPsqlDecorations(t *testing.T) {
	for _, f := range []string{"testdata/pg15/psql-aligned.txt", "testdata/pg15/psql-aligned.json.txt"} {
		e := mustParse(t, f)
		if e.Plan.NodeType != "Aggregate" || len(e.Plan.Plans) != 1 || e.Plan.Plans[0].RelationName != "customers" || e.ExecutionMS <= 0 {
			t.Errorf("%s: %s with %d children, %v ms", f, e.Plan.Label(), len(e.Plan.Plans), e.ExecutionMS)
		}
	}
}

func TestFigures(t *testing.T) {
	// Nested loop: the Materialize ran 300,000 times at 0.005 ms.
	e := mustParse(t, "testdata/pg15/nested-loop-blowup.bad.txt")
	nl := &e.Plan.Plans[0]
	mat := &nl.Plans[1]
	if mat.NodeType != "Materialize" || mat.Figures.InclusiveMS != 0.005*300000 {
		t.Errorf("materialize inclusive %v", mat.Figures.InclusiveMS)
	}
	if nl.Figures.Share < 0.5 || nl.Figures.ExclusiveMS <= 0 {
		t.Errorf("nested loop share %v exclusive %v", nl.Figures.Share, nl.Figures.ExclusiveMS)
	}
	hot := e.HotPath()
	if !hot[nl.Figures.ID] || hot[mat.Plans[0].Figures.ID] {
		t.Errorf("hot path %v", hot)
	}
	// Parallel: three participants share the scan's 133,333 rows per loop.
	p := mustParse(t, "testdata/pg15/parallel.txt")
	var scan *Node
	p.Plan.Walk(func(n, _ *Node) {
		if n.RelationName == "orders" {
			scan = n
		}
	})
	if scan == nil || !scan.Figures.Parallel || scan.Figures.InclusiveMS != scan.ActualTotalMS || scan.Figures.TotalRows != 399999 {
		t.Errorf("parallel scan figures %+v", scan)
	}
	m := mustParse(t, "testdata/pg15/misestimate.bad.txt")
	outer := m.Plan.Plans[0]
	if outer.Figures.Misestimate != 300 || !outer.Figures.Under {
		t.Errorf("misestimate %v under %v", outer.Figures.Misestimate, outer.Figures.Under)
	}
	sum := 0.0
	m.Plan.Walk(func(n, _ *Node) { sum += n.Figures.ExclusiveMS })
	if d := sum - m.Plan.Figures.InclusiveMS; d > 0.01 || d < -0.01 {
		t.Errorf("exclusive times add up to %v, root inclusive %v", sum, m.Plan.Figures.InclusiveMS)
	}
}

func TestLabels(t *testing.T) {
	for in, want := range map[string]string{
		"Parallel Index Only Scan Backward using \"My Idx\" on public.\"Odd Name\" o  (cost=1..2 rows=1 width=4)": "Parallel Index Only Scan Backward using My Idx on public.Odd Name o",
		"Hash Right Anti Join  (cost=1..2 rows=1 width=4)":                                                        "Hash Right Anti Join",
		"Nested Loop Left Join  (cost=1..2 rows=1 width=4)":                                                       "Nested Loop Left Join",
		"Finalize HashAggregate  (cost=1..2 rows=1 width=4)":                                                      "Finalize HashAggregate",
		"Update on t  (cost=1..2 rows=1 width=4)":                                                                 "Update on t",
		"HashSetOp Except All  (cost=1..2 rows=1 width=4)":                                                        "HashSetOp Except All",
		"Bitmap Index Scan on t_idx  (cost=1..2 rows=1 width=0)":                                                  "Bitmap Index Scan on t_idx",
		"Function Scan on generate_series g  (cost=1..2 rows=1 width=4)":                                          "Function Scan on generate_series g",
		"Custom Scan (ColumnarScan) on t  (cost=1..2 rows=1 width=4)":                                             "Custom Scan (ColumnarScan) on t",
		"Seq Scan on t  (never executed)":                                                                         "Seq Scan on t",
	} {
		e, err := ParseText([]byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := e.Plan.Label(); got != want {
			t.Errorf("%q: label %q, want %q", in, got, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	good, _ := os.ReadFile("testdata/pg15/hash-batches.bad.txt")
	goodJSON, _ := os.ReadFile("testdata/pg15/hash-batches.bad.json")
	lines := strings.Split(string(good), "\n")
	shifted := append([]string{}, lines...)
	shifted[5] = " " + shifted[5] // the Hash Join's "->" one column right
	for name, c := range map[string]struct {
		in   string
		want error
		says string
	}{
		"empty":               {"", ErrNotAPlan, "empty"},
		"blank":               {"  \n\n ", ErrNotAPlan, "empty"},
		"truncated json":      {string(goodJSON[:len(goodJSON)/2]), ErrTruncated, "stops after"},
		"truncated node line": {lines[0][:40], ErrTruncated, "cut off"},
		"broken indentation":  {strings.Join(shifted, "\n"), ErrNotAPlan, "indentation is broken"},
		"prose":               {"Hello, this is my query log.\nIt was slow.", ErrNotAPlan, "not a plan node"},
		"sql":                 {"SELECT * FROM t WHERE id = 1;", ErrNotAPlan, "not a plan node"},
		"json not a plan":     {`{"query": "SELECT 1"}`, ErrNotAPlan, "Node Type"},
		"two plans":           {string(good) + "\n" + lines[0], ErrNotAPlan, "one plan at a time"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want %v and %q on one line", err, c.want, c.says)
			}
		})
	}
}

func FuzzParseText(f *testing.F) {
	for _, base := range fixturePairs(f) {
		b, err := os.ReadFile(base + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("Seq Scan on t  (cost=0.00..1.00 rows=1 width=4)\n  ->  x\n   InitPlan 1\n     ->  Result"))
	// The shapes people paste, and the numbers no server prints.
	pasted, _ := filepath.Glob("testdata/pasted/text.*")
	for _, p := range pasted {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"Seq Scan on t  (cost=0.00..NaN rows=1 width=4)\n",
		"Seq Scan on t  (cost=0.00..1e308 rows=1e308 width=4) (actual time=1e308..1e308 rows=1e308 loops=1e308)\n",
		"Limit  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=-1)\n",
		"Update on public.ta  (cost=0.00..1.00 rows=0 width=0)\n  Update on public.ta1 ta_1\n  Foreign Update on public.\"a:b\" ta_2\n  ->  Result  (cost=0.00..1.00 rows=1 width=4)\n",
		"Seq Scan on \"t\x1b]0;x\x07\"  (cost=0.00..1.00 rows=1 width=4)\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseText(b)
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
			if n.Figures.ExclusiveMS < 0 || n.Figures.Share > 1 || !finiteFigures(n.Figures) {
				t.Fatalf("bad figures %+v", n.Figures)
			}
		})
	})
}

func finiteFigures(f Figures) bool {
	for _, v := range []float64{f.InclusiveMS, f.ExclusiveMS, f.Share, f.TotalRows, f.Misestimate} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return false
		}
	}
	return true
}

// BenchmarkParseLarge parses a 2,001-node plan (an Append over 2,000
// partitions, ANALYZE and BUFFERS) in each format: plans per second.
func BenchmarkParseLarge(b *testing.B) {
	var txt strings.Builder
	txt.WriteString("Append  (cost=0.00..90000.00 rows=2000 width=8) (actual time=0.010..900.000 rows=2000 loops=1)\n  Buffers: shared hit=20000\n")
	var js strings.Builder
	js.WriteString(`[{"Plan": {"Node Type": "Append", "Total Cost": 90000, "Plan Rows": 2000, "Actual Total Time": 900, "Actual Rows": 2000, "Actual Loops": 1, "Shared Hit Blocks": 20000, "Plans": [`)
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&txt, "  ->  Seq Scan on events_p%d events_%d  (cost=0.00..45.00 rows=1 width=8) (actual time=0.100..0.450 rows=1 loops=1)\n        Filter: (user_id = 42)\n        Rows Removed by Filter: 1999\n        Buffers: shared hit=10\n", i, i)
		if i > 0 {
			js.WriteString(",")
		}
		fmt.Fprintf(&js, `{"Node Type": "Seq Scan", "Parent Relationship": "Member", "Relation Name": "events_p%d", "Alias": "events_%d", "Total Cost": 45, "Plan Rows": 1, "Actual Total Time": 0.45, "Actual Rows": 1, "Actual Loops": 1, "Filter": "(user_id = 42)", "Rows Removed by Filter": 1999, "Shared Hit Blocks": 10}`, i, i)
	}
	txt.WriteString("Planning Time: 30.000 ms\nExecution Time: 901.000 ms\n")
	js.WriteString(`]}, "Planning Time": 30, "Execution Time": 901}]`)
	for name, in := range map[string][]byte{"text": []byte(txt.String()), "json": []byte(js.String())} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for i := 0; i < b.N; i++ {
				e, err := Parse(in)
				if err != nil || len(e.Plan.Plans) != 2000 {
					b.Fatalf("%v", err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "plans/s")
		})
	}
}
