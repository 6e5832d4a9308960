package plan

import (
	"fmt"
	"math"
)

// checkNumbers rejects figures no PostgreSQL prints: NaN and infinities,
// and negative costs, row counts, loops, times, sizes and block counts. A
// plan holding one was edited or corrupted, and every figure derived from
// it would be meaningless. lineOf gives the TEXT line of the node with a
// given ID (nil for JSON). Huge but finite values are accepted; the
// derived sums saturate instead of overflowing (see satMul).
func (e *Explain) checkNumbers(lineOf func(id int) int) error {
	where := func(n *Node) string {
		if lineOf != nil {
			if l := lineOf(n.Figures.ID); l > 0 {
				return fmt.Sprintf("line %d (%s)", l, n.Head())
			}
		}
		return fmt.Sprintf("node %d (%s)", n.Figures.ID, n.Head())
	}
	bad := func(place, field string, v float64) error {
		what := "negative"
		if math.IsNaN(v) || math.IsInf(v, 0) {
			what = "not a finite number"
		}
		return fmt.Errorf("%s: %s is %v, which is %s; EXPLAIN never prints that, so the plan was edited or damaged: %w", place, field, v, what, ErrNotAPlan)
	}
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	var err error
	e.Plan.Walk(func(n, _ *Node) {
		if err != nil {
			return
		}
		for _, f := range []struct {
			name string
			v    float64
		}{
			{"startup cost", n.StartupCost}, {"total cost", n.TotalCost}, {"planned rows", n.PlanRows},
			{"width", float64(n.PlanWidth)},
			{"actual startup time", n.ActualStartupMS}, {"actual total time", n.ActualTotalMS},
			{"actual rows", n.ActualRows}, {"loops", n.ActualLoops},
			{"Rows Removed by Filter", n.RowsRemovedByFilter}, {"Rows Removed by Join Filter", n.RowsRemovedByJoinFilter},
			{"Rows Removed by Index Recheck", n.RowsRemovedByIndexRecheck}, {"Heap Fetches", n.HeapFetches},
			{"exact heap blocks", n.ExactHeapBlocks}, {"lossy heap blocks", n.LossyHeapBlocks},
			{"sort space", n.SortSpaceKB}, {"hash buckets", n.HashBuckets}, {"original hash buckets", n.OriginalHashBuckets},
			{"hash batches", n.HashBatches}, {"original hash batches", n.OriginalHashBatches}, {"peak memory", n.PeakMemoryKB},
			{"HashAgg batches", n.HashAggBatches}, {"disk usage", n.DiskUsageKB},
			{"workers planned", float64(n.WorkersPlanned)}, {"workers launched", float64(n.WorkersLaunched)},
			{"I/O read time", n.IO.SharedReadMS}, {"I/O write time", n.IO.SharedWriteMS},
			{"local I/O read time", n.IO.LocalReadMS}, {"local I/O write time", n.IO.LocalWriteMS},
			{"temp I/O read time", n.IO.TempReadMS}, {"temp I/O write time", n.IO.TempWriteMS},
			{"shared hit blocks", float64(n.Buffers.SharedHit)}, {"shared read blocks", float64(n.Buffers.SharedRead)},
			{"shared dirtied blocks", float64(n.Buffers.SharedDirtied)}, {"shared written blocks", float64(n.Buffers.SharedWritten)},
			{"local hit blocks", float64(n.Buffers.LocalHit)}, {"local read blocks", float64(n.Buffers.LocalRead)},
			{"local dirtied blocks", float64(n.Buffers.LocalDirtied)}, {"local written blocks", float64(n.Buffers.LocalWritten)},
			{"temp read blocks", float64(n.Buffers.TempRead)}, {"temp written blocks", float64(n.Buffers.TempWritten)},
			{"WAL records", float64(n.WAL.Records)}, {"WAL full-page images", float64(n.WAL.FPI)}, {"WAL bytes", float64(n.WAL.Bytes)},
		} {
			if !ok(f.v) {
				err = bad(where(n), f.name, f.v)
				return
			}
		}
		for _, w := range n.Workers {
			if !ok(w.SortSpaceKB) {
				err = bad(where(n), fmt.Sprintf("worker %d sort space", w.Number), w.SortSpaceKB)
				return
			}
		}
	})
	if err != nil {
		return err
	}
	summary := []struct {
		name string
		v    float64
	}{{"Planning Time", e.PlanningMS}, {"Execution Time", e.ExecutionMS}}
	if e.JIT != nil {
		summary = append(summary, struct {
			name string
			v    float64
		}{"JIT Functions", float64(e.JIT.Functions)})
		if t := e.JIT.TimingMS; t != nil {
			for _, x := range []struct {
				name string
				v    float64
			}{{"JIT Generation", t.Generation}, {"JIT Deform", t.Deform}, {"JIT Inlining", t.Inlining},
				{"JIT Optimization", t.Optimization}, {"JIT Emission", t.Emission}, {"JIT Total", t.Total}} {
				summary = append(summary, x)
			}
		}
	}
	for _, tr := range e.Triggers {
		summary = append(summary, struct {
			name string
			v    float64
		}{"trigger time", tr.TimeMS}, struct {
			name string
			v    float64
		}{"trigger calls", tr.Calls})
	}
	for _, s := range summary {
		if !ok(s.v) {
			return bad("the plan's summary", s.name, s.v)
		}
	}
	return nil
}

// satMul multiplies two non-negative figures, saturating at the largest
// float64 instead of becoming +Inf (which JSON cannot carry).
func satMul(a, b float64) float64 {
	if r := a * b; !math.IsInf(r, 0) && !math.IsNaN(r) {
		return r
	}
	return math.MaxFloat64
}

// satAdd adds two non-negative block counts, saturating at the largest
// int64 instead of wrapping to a negative number.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
