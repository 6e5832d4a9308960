package replay

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/model"
)

// Side is one arm of an A/B replay: how to get a fresh copy of the
// database to replay into (with or without the change), and how to
// connect to it.
type Side struct {
	Name string
	// Fresh: each run opens a fresh copy of the database; NoCopy says
	// why the side's server cannot make one.
	Fresh  bool
	NoCopy string
	// Open readies a run: a database in its starting state, the change
	// applied; it returns how to connect sessions (and the lock sampler)
	// and how to clean up after the run.
	Open func(ctx context.Context, run int) (*Target, error)
	// OpenCopy readies a run in a fresh copy of the database whatever the
	// server (a comparison's runs); nil where Open always copies.
	OpenCopy func(ctx context.Context, run int) (*Target, error)
}

// Target is one run's database.
type Target struct {
	Connect      func(ctx context.Context, s *capture.Session) (*pgconn.PgConn, error)
	ConnectAdmin func(ctx context.Context) (*pgconn.PgConn, error)
	// NoPrepare: through a transaction-mode pool.
	NoPrepare bool
	Close     func()
	// Where says what the run replayed against.
	Where string
}

// Verdicts. Inconclusive is a comparison in which some of the workload
// was not replayed (sessions that could not connect, statements not
// sent): what was not sent measured nothing, and a side that ran none of
// it would look like no change.
const (
	Faster       = "faster"
	Slower       = "slower"
	NoChange     = "no measurable change"
	Inconclusive = "inconclusive"
)

// MinEffect is the smallest change a verdict calls: 10% of the time or
// the goodput. Smaller differences are within what runs of the same
// replay differ by on a shared machine.
const MinEffect = 0.10

// Comparison is an A/B replay: each side's runs and the verdict.
type Comparison struct {
	A       *SideResult `json:"a"`
	B       *SideResult `json:"b"`
	Verdict string      `json:"verdict"`
	// Why says which measure decided, with its figures.
	Why    []string       `json:"why"`
	Shapes []*ShapeChange `json:"shapes"`
}

// SideResult is one side's runs.
type SideResult struct {
	Name  string    `json:"name"`
	Where string    `json:"where"`
	Runs  []*Result `json:"runs"`
	// Pooled across runs: latencies of the calls that succeeded.
	P50, P95, P99 Estimate `json:"-"`
	// Per run: the summed time of every call (the server's work as the
	// clients saw it), statements that failed, and goodput.
	TotalS  []float64 `json:"total_s"`
	Errors  []int     `json:"errors"`
	Goodput []float64 `json:"goodput"`
	// LockWaitMS sums the sampled lock waits of every run.
	LockWaitMS float64 `json:"lock_wait_ms"`
}

// Estimate is a figure with its 95% confidence interval.
type Estimate struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// ShapeChange is one statement shape, both sides.
type ShapeChange struct {
	Fingerprint string   `json:"fingerprint"`
	Query       string   `json:"query"`
	Calls       int      `json:"calls"`
	A, B        Estimate `json:"-"`
	AP95, BP95  float64  `json:"-"`
	AP99, BP99  float64  `json:"-"`
	// Ratio is B's median over A's, with its interval.
	Ratio            Estimate `json:"ratio"`
	AErrors, BErrors int      `json:"-"`
	ALockMS, BLockMS float64  `json:"-"`
	Verdict          string   `json:"verdict"`
	// Why says which test of shapeVerdict failed when it calls no change.
	Why          string `json:"why,omitempty"`
	AHist, BHist []int  `json:"-"`
	HistEdges    []float64
	// AOver and BOver are the shape's calls in each side's first run, in
	// the order sent: when and how long, for the report's picture of its
	// latency over the replay (with Options.Timeline; nil without).
	AOver, BOver       []Call `json:"-"`
	aRunMean, bRunMean []float64
}

// Compare replays the workload runs times on each side, alternating A
// and B so a drift of the machine falls on both, and judges the change.
// The pairs go A B, B A, A B, ...: a side that always went first would
// take whatever the first run of a pair pays (the copy just made still
// being written out, a load that comes and goes with each pair) as its
// own, and two identical sides could differ by it.
func Compare(ctx context.Context, w *capture.Workload, a, b Side, runs int, o Options) (*Comparison, error) {
	if runs < 1 {
		runs = 1
	}
	// A comparison writes each run's changes (the side's change, the
	// workload's own writes): into copies only, never into the database
	// the DSN names, or it is refused before anything is written.
	for _, side := range []Side{a, b} {
		if !side.Fresh {
			return nil, fmt.Errorf("%s: each run must start from a fresh copy of the database, and this server cannot make one (%s): give the role CREATEDB on a database it owns, or replay against a twin (--twin, pgmedic lab up); nothing was written", side.Name, side.NoCopy)
		}
	}
	sides := []*SideResult{{Name: a.Name}, {Name: b.Name}}
	for run := 0; run < runs; run++ {
		for _, i := range pairOrder(run) {
			side := []Side{a, b}[i]
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			open := side.Open
			if side.OpenCopy != nil {
				open = side.OpenCopy
			}
			t, err := open(ctx, run)
			if err != nil {
				return nil, fmt.Errorf("readying %s for run %d: %w", side.Name, run+1, err)
			}
			ro := o
			ro.Connect, ro.NoPrepare = t.Connect, o.NoPrepare || t.NoPrepare
			if t.ConnectAdmin != nil {
				ro.LockWaits = &LockSampler{Connect: t.ConnectAdmin}
			}
			r, err := Run(ctx, w, ro)
			t.Close()
			if err != nil {
				return nil, fmt.Errorf("replaying on %s: %w", side.Name, err)
			}
			if r.Stopped != "" && ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted: %w", ctx.Err())
			}
			sides[i].Where = t.Where
			sides[i].Runs = append(sides[i].Runs, r)
		}
	}
	return judge(w, sides[0], sides[1]), nil
}

// pairOrder is the order of the sides (0 is A) in run number run:
// A B, then B A.
func pairOrder(run int) []int {
	if run%2 == 1 {
		return []int{1, 0}
	}
	return []int{0, 1}
}

// judge computes both sides' figures and the verdict.
func judge(w *capture.Workload, a, b *SideResult) *Comparison {
	c := &Comparison{A: a, B: b}
	for _, s := range []*SideResult{a, b} {
		var all []float64
		for _, r := range s.Runs {
			total := 0.0
			for _, sh := range r.Shapes {
				total += sh.TotalMS
				all = append(all, sh.MS...)
				s.LockWaitMS += sh.LockWait
			}
			s.TotalS = append(s.TotalS, total/1000)
			s.Errors = append(s.Errors, r.Errors)
			s.Goodput = append(s.Goodput, r.Goodput())
		}
		sort.Float64s(all)
		s.P50, s.P95, s.P99 = bootstrap(all, 0.5), bootstrap(all, 0.95), bootstrap(all, 0.99)
	}
	c.Shapes = shapeChanges(w, a, b)
	time := measured(a.TotalS, b.TotalS, false)
	good, goodWhy := 0, ""
	// Goodput is called, as failures are, only when the statements that
	// succeeded differ by more than a few a run: 2 of 48 calls that
	// timed out on a busy machine are chance, not the change.
	if d, floor := math.Abs(succeeded(a)-succeeded(b)), math.Max(2, 0.05*float64(w.Statements)); d > floor {
		good = measured(a.Goodput, b.Goodput, true)
	} else {
		goodWhy = fmt.Sprintf("the statements that succeeded differ by %.1f a run, not more than %.1f", d, floor)
	}
	errs := func(xs []int) []float64 {
		var out []float64
		for _, x := range xs {
			out = append(out, float64(x))
		}
		return out
	}
	errA, errB := errs(a.Errors), errs(b.Errors)
	// Fewer failures is better, called as the others are, and only for a
	// difference of more than one statement a run.
	errors, errWhy := 0, ""
	if d := math.Abs(mean(errA) - mean(errB)); d > 1 {
		errors = measured(errA, errB, false)
	} else {
		errWhy = fmt.Sprintf("the failures differ by %.1f a run, not more than 1", d)
	}
	c.Why = append(c.Why,
		describe("time of all statements", "s", a.TotalS, b.TotalS, time, false, ""),
		describe("goodput", "statements/s", a.Goodput, b.Goodput, good, true, goodWhy),
		describe("failed statements", "", errA, errB, errors, true, errWhy))
	better := time > 0 || good > 0 || errors > 0
	worse := time < 0 || good < 0 || errors < 0
	if why := unreplayed(w, a, b); len(why) > 0 {
		c.Verdict, c.Why = Inconclusive, append(why, c.Why...)
		return c
	}
	switch {
	case worse:
		// A regression on any measure is one, whatever else improved.
		c.Verdict = Slower
	case better:
		c.Verdict = Faster
	default:
		c.Verdict = NoChange
	}
	return c
}

// unreplayed says what of the workload a comparison did not replay:
// sessions that could not connect (with the server's first reason) and
// statements not sent, side by side. Empty when all of it ran.
func unreplayed(w *capture.Workload, sides ...*SideResult) []string {
	var out []string
	for _, s := range sides {
		failed, notRun := 0, 0
		var why []string
		for _, r := range s.Runs {
			failed += r.ConnectFailed
			notRun += r.NotRun
			for _, e := range r.ConnectErrors {
				if len(why) < 1 {
					why = append(why, e)
				}
			}
			if r.Stopped != "" && len(why) < 2 {
				why = append(why, "stopped: "+r.Stopped)
			}
		}
		if failed == 0 && notRun == 0 {
			continue
		}
		line := fmt.Sprintf("%s: over %d runs, %d of %d sessions could not connect and %d of %d statements were not sent",
			s.Name, len(s.Runs), failed, len(w.Sessions)*len(s.Runs), notRun, w.Statements*len(s.Runs))
		if len(why) > 0 {
			line += " (" + strings.Join(why, "; ") + ")"
		}
		out = append(out, line)
	}
	if len(out) > 0 {
		out = append([]string{"no verdict: part of the workload was not replayed, and what was not sent measured nothing"}, out...)
	}
	return out
}

// succeeded is the statements a side's runs completed without an error,
// a run's mean.
func succeeded(s *SideResult) float64 {
	if len(s.Runs) == 0 {
		return 0
	}
	n := 0
	for _, r := range s.Runs {
		n += r.Statements - r.Errors
	}
	return float64(n) / float64(len(s.Runs))
}

// measured compares per-run figures: +1 when B is better, -1 when worse,
// 0 otherwise; higher says whether more is better. A difference is called
// when three things hold: the means differ by more than MinEffect; every
// run of one side beats every run of the other (with three runs a side,
// a chance of 1 in 20 under no change); and the means differ by more
// than either side's own spread (its best run to its worst), so that
// runs which vary by a fifth among themselves do not make a change of a
// tenth.
func measured(a, b []float64, higher bool) int {
	v, _ := measuredWhy(a, b, higher)
	return v
}

// measuredWhy is measured, saying which of its tests failed when it calls
// no change.
func measuredWhy(a, b []float64, higher bool) (int, string) {
	ma, mb := mean(a), mean(b)
	switch {
	case ma == 0 && mb == 0:
		return 0, "both sides are 0"
	case len(a) < 2 || len(b) < 2:
		// One run a side shows no spread to judge a difference by.
		return 0, "one run a side shows no spread to judge by (--replays 2 or more)"
	}
	rel := (mb - ma) / math.Max(math.Abs(ma), 1e-9)
	if !higher {
		rel = -rel
	}
	switch {
	case math.Abs(rel) <= MinEffect:
		return 0, fmt.Sprintf("the means differ by %.0f%%, under %.0f%%", 100*math.Abs(rel), 100*MinEffect)
	case !beyondSpread(a, b):
		return 0, "the means differ by less than a side's own spread, its best run to its worst"
	case rel > MinEffect && sep(a, b, higher):
		return 1, ""
	case rel < -MinEffect && sep(b, a, higher):
		return -1, ""
	}
	return 0, "the runs overlap: not every run of one side beats every run of the other"
}

// beyondSpread says the means differ by more than either side's spread.
// Times and rates vary by a factor from run to run (a busy moment
// doubles a run), so when every value is positive they are compared as
// logarithms: a run of 1 s and one of 4 s are as far apart as 0.1 s and
// 0.4 s.
func beyondSpread(a, b []float64) bool {
	pos := true
	for _, x := range append(append([]float64{}, a...), b...) {
		pos = pos && x > 0
	}
	if pos {
		a, b = logs(a), logs(b)
	}
	loA, hiA := minmax(a)
	loB, hiB := minmax(b)
	return math.Abs(mean(b)-mean(a)) > math.Max(hiA-loA, hiB-loB)
}

func logs(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Log(x)
	}
	return out
}

// sep says every value of b is better than every value of a.
func sep(a, b []float64, higher bool) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	minA, maxA := minmax(a)
	minB, maxB := minmax(b)
	if higher {
		return minB > maxA
	}
	return maxB < minA
}

func minmax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func describe(what, unit string, a, b []float64, v int, higher bool, floor string) string {
	call := "no measurable change"
	why := floor
	if why == "" {
		_, why = measuredWhy(a, b, higher)
	}
	if v == 0 && why != "" {
		call += " (" + why + ")"
	}
	switch v {
	case 1:
		call = "better"
	case -1:
		call = "worse"
	}
	f := func(xs []float64) string {
		lo, hi := minmax(xs)
		if len(xs) == 1 || lo == hi {
			return fmt.Sprintf("%.4g", mean(xs))
		}
		return fmt.Sprintf("%.4g (%.4g-%.4g)", mean(xs), lo, hi)
	}
	if unit != "" {
		unit = " " + unit
	}
	return fmt.Sprintf("%s: %s -> %s%s per run, %s", what, f(a), f(b), unit, call)
}

// bootstrap estimates a quantile of sorted xs with a 95% interval from
// resampling the calls (200 resamples).
func bootstrap(xs []float64, q float64) Estimate {
	e := Estimate{Value: model.Percentile(xs, q)}
	if len(xs) < 2 {
		e.Low, e.High = e.Value, e.Value
		return e
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(xs))))
	const n = 200
	est := make([]float64, n)
	// The q-quantile of a resample is the value at the rank where the
	// count of resampled calls at or below it reaches q: that count is
	// binomial, so drawing it (by its normal approximation) stands for
	// drawing the whole resample.
	nf := float64(len(xs))
	sd := math.Sqrt(nf * q * (1 - q))
	for i := range est {
		k := nf*q + sd*rng.NormFloat64()
		est[i] = model.Percentile(xs, math.Max(0, math.Min(1, k/nf)))
	}
	sort.Float64s(est)
	e.Low, e.High = est[n*25/1000], est[n*975/1000-1]
	return e
}

// shapeChanges compares each statement shape's latencies on both sides.
func shapeChanges(w *capture.Workload, a, b *SideResult) []*ShapeChange {
	by := map[string]*ShapeChange{}
	var out []*ShapeChange
	add := func(s *SideResult, isB bool) {
		for run, r := range s.Runs {
			for _, sh := range r.Shapes {
				c := by[sh.Fingerprint]
				if c == nil {
					c = &ShapeChange{Fingerprint: sh.Fingerprint, Query: sh.Query, aRunMean: make([]float64, len(a.Runs)), bRunMean: make([]float64, len(b.Runs))}
					by[sh.Fingerprint] = c
					out = append(out, c)
				}
				m := 0.0
				if sh.Calls > 0 {
					m = sh.TotalMS / float64(sh.Calls)
				}
				if isB {
					c.bRunMean[run] = m
					c.BErrors += sh.Errors
					c.BLockMS += sh.LockWait
				} else {
					c.aRunMean[run] = m
					c.AErrors += sh.Errors
					c.ALockMS += sh.LockWait
					c.Calls += sh.Calls
				}
			}
		}
	}
	add(a, false)
	add(b, true)
	overTime(w, a, b, by)
	for _, c := range out {
		xa, xb := pooled(a, c.Fingerprint), pooled(b, c.Fingerprint)
		c.A, c.B = bootstrap(xa, 0.5), bootstrap(xb, 0.5)
		c.AP95, c.BP95 = model.Percentile(xa, 0.95), model.Percentile(xb, 0.95)
		c.AP99, c.BP99 = model.Percentile(xa, 0.99), model.Percentile(xb, 0.99)
		if c.A.Value > 0 {
			c.Ratio = Estimate{Value: c.B.Value / c.A.Value, Low: c.B.Low / math.Max(c.A.High, 1e-9), High: c.B.High / math.Max(c.A.Low, 1e-9)}
		}
		c.HistEdges, c.AHist, c.BHist = histograms(xa, xb)
		c.Verdict, c.Why = shapeVerdict(c.Ratio, c.A.Value > 0 && c.B.Value > 0)
		if c.Verdict == NoChange && c.A.Value > 0 && c.B.Value > 0 {
			// The pooled calls' interval is wide when a busy moment
			// fell on a few of them; the runs were made in pairs, A
			// and B together, and a pair that shows the change whole
			// is evidence a busy moment cannot fake.
			if v, ratio, why := pairedVerdict(a, b, c.Fingerprint); v != NoChange {
				c.Verdict, c.Ratio, c.Why = v, ratio, why
			} else if why != "" {
				c.Why += "; " + why
			}
		}

	}
	sort.SliceStable(out, func(i, j int) bool {
		return mean(out[i].aRunMean)*float64(out[i].Calls) > mean(out[j].aRunMean)*float64(out[j].Calls)
	})
	return out
}

// pooled are the times of one shape's calls over every run of a side,
// sorted.
func pooled(s *SideResult, fp string) []float64 {
	var all []float64
	for _, r := range s.Runs {
		for _, sh := range r.Shapes {
			if sh.Fingerprint == fp {
				all = append(all, sh.MS...)
			}
		}
	}
	sort.Float64s(all)
	return all
}

// overTime gives each shape its calls in each side's first run, in the
// order sent, for the report's picture of latency over the replay.
func overTime(w *capture.Workload, a, b *SideResult, by map[string]*ShapeChange) {
	for i, s := range []*SideResult{a, b} {
		if len(s.Runs) == 0 {
			continue
		}
		for _, call := range s.Runs[0].Timeline {
			if int(call.Shape) >= len(w.Shapes) {
				continue
			}
			if c := by[w.Shapes[call.Shape].Fingerprint]; c != nil {
				if i == 0 {
					c.AOver = append(c.AOver, call)
				} else {
					c.BOver = append(c.BOver, call)
				}
			}
		}
	}
}

// histograms bins both sides' latencies on one log scale (20 bins), for
// the HTML report's side-by-side distributions.
func histograms(a, b []float64) ([]float64, []int, []int) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, xs := range [][]float64{a, b} {
		if len(xs) > 0 {
			lo, hi = math.Min(lo, xs[0]), math.Max(hi, xs[len(xs)-1])
		}
	}
	if math.IsInf(lo, 0) {
		return nil, nil, nil
	}
	lo = math.Max(lo, 0.001)
	hi = math.Max(hi, lo*1.01)
	const bins = 20
	edges := make([]float64, bins+1)
	for i := range edges {
		edges[i] = lo * math.Pow(hi/lo, float64(i)/bins)
	}
	count := func(xs []float64) []int {
		h := make([]int, bins)
		for _, x := range xs {
			i := int(float64(bins) * math.Log(math.Max(x, lo)/lo) / math.Log(hi/lo))
			h[max(0, min(i, bins-1))]++
		}
		return h
	}
	return edges, count(a), count(b)
}

// pairedMinCalls is the fewest calls a side's run needs for a pair of
// runs to show a change on its own: with 3 calls each, all of B's above
// all of A's happens by chance once in 20 pairs.
const pairedMinCalls = 3

// pairedVerdict judges a shape on the pairs of runs (run k of A beside
// run k of B, made one after the other): a pair shows the change when
// every call of one side was slower than every call of the other, which
// under no change happens by chance at most once in 20 pairs. A shape is
// slower (faster) when most pairs, and at least two, show it that way,
// none the other way, and the pairs' median ratio moved by more than
// MinEffect; the ratio then spans the pairs that showed it. A busy moment
// that spoils one pair (a 3.7x slowdown called no change, once, on four
// calls a run) does not hide it. why says when the runs held too few calls
// to decide on.
func pairedVerdict(a, b *SideResult, fp string) (verdict string, ratio Estimate, why string) {
	pairs := min(len(a.Runs), len(b.Runs))
	calls := func(r *Result) []float64 {
		for _, sh := range r.Shapes {
			if sh.Fingerprint == fp {
				return sh.MS
			}
		}
		return nil
	}
	var up, down int
	var ratios, upRatios, downRatios []float64
	fewest := math.MaxInt
	for k := range pairs {
		xa, xb := calls(a.Runs[k]), calls(b.Runs[k])
		fewest = min(fewest, len(xa), len(xb))
		if len(xa) == 0 || len(xb) == 0 {
			continue
		}
		sa, sb := slices.Clone(xa), slices.Clone(xb)
		sort.Float64s(sa)
		sort.Float64s(sb)
		r := model.Percentile(sb, 0.5) / math.Max(model.Percentile(sa, 0.5), 1e-9)
		ratios = append(ratios, r)
		if len(sa) < pairedMinCalls || len(sb) < pairedMinCalls {
			continue
		}
		switch {
		case sb[0] > sa[len(sa)-1]:
			up++
			upRatios = append(upRatios, r)
		case sb[len(sb)-1] < sa[0]:
			down++
			downRatios = append(downRatios, r)
		}
	}
	if fewest == math.MaxInt {
		fewest = 0
	}
	if pairs < 2 || fewest < pairedMinCalls {
		return NoChange, Estimate{}, fmt.Sprintf("too few calls to decide on the pairs of runs (%d a run at the fewest, %d needed, over %d pairs)", fewest, pairedMinCalls, pairs)
	}
	sort.Float64s(ratios)
	med := model.Percentile(ratios, 0.5)
	need := max(2, (pairs+1)/2)
	span := func(rs []float64) Estimate {
		lo, hi := minmax(rs)
		return Estimate{Value: med, Low: lo, High: hi}
	}
	switch {
	case up >= need && down == 0 && med >= 1+MinEffect:
		return Slower, span(upRatios), fmt.Sprintf("%d of %d pairs of runs had every call slower on B (the pooled interval held 1)", up, pairs)
	case down >= need && up == 0 && med <= 1-MinEffect:
		return Faster, span(downRatios), fmt.Sprintf("%d of %d pairs of runs had every call faster on B (the pooled interval held 1)", down, pairs)
	}
	return NoChange, Estimate{}, ""
}

// shapeVerdict calls a statement shape from the ratio printed beside it
// (B's median over A's, with its 95% interval), so the two never disagree:
// faster when the whole interval is below 1 and the median moved by more
// than MinEffect, slower likewise above 1, and otherwise no change, with
// the test that failed.
func shapeVerdict(r Estimate, both bool) (string, string) {
	switch {
	case !both:
		return NoChange, "one side ran no call of it"
	case r.High < 1 && r.Value <= 1-MinEffect:
		return Faster, ""
	case r.Low > 1 && r.Value >= 1+MinEffect:
		return Slower, ""
	case r.Low <= 1 && r.High >= 1:
		return NoChange, "its interval holds 1"
	}
	return NoChange, fmt.Sprintf("a change under %.0f%%", 100*MinEffect)
}
