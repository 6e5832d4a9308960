package verify

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// hotRerun is a CPU hot spot's fix to measure: the statement as the
// application ran it and with the fix, each side with the setting it runs
// under.
type hotRerun struct {
	before, after       string // the statement on each side
	setBefore, setAfter string // SET LOCAL ... on each side ("" for none)
	change              string // the fix, as a person reads it
	fixed               string // the fixed statement, normalised ("" for a setting)
	// share measures the hot spot in a side's samples (nil: the kind's
	// share), and shareOf says what it counts.
	share   func(model.Profile) float64
	shareOf string
	// caveat is what the fix changes besides speed, said with the fix.
	caveat string
}

// hotSide is one side's measurement: its runs' median time, and the hot
// spot's share of the samples of pgmedic's own backend while it ran them.
type hotSide struct {
	runs     int
	medianMS float64
	samples  int64
	share    float64
}

// hotspot re-runs a cpu-hotspot finding's statement as the application
// ran it and with the fix, in pgmedic's own session (read-only
// transactions that are rolled back), while e.CPU records that session;
// the finding gets both times and both shares, or the reason no re-run
// was possible.
func (e *Engine) hotspot(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	if e.CPU == nil {
		f.Verification = model.NotRunBecause("no CPU profiler: the re-run is measured with perf on the database server")
		return
	}
	kind := f.Experiment.Hotspot
	r, why := e.planHotspot(ctx, kind, e.literals[f.Experiment.QueryID], collationShare(f))
	if r == nil {
		f.Verification = model.NotRunBecause(why)
		return
	}
	if r.share == nil {
		r.share, r.shareOf = rules.HotspotShare(kind), "the hot spot's share"
	}
	e.Log("re-running statement %d with %s", f.Experiment.QueryID, r.change)
	before, after, err := e.measureHotspot(ctx, r, r.share)
	if err != nil {
		f.Verification = model.NotRunBecause("the re-run failed: " + err.Error())
		return
	}
	// On a machine busy with other work a side can run inside the
	// recording and still get no sample (a 1 s run as written, 0 samples,
	// beside the test suite): the shares are what says the fix took the
	// hot spot away, so the recording is made once more, and kept when
	// both sides have samples this time.
	if before.samples == 0 || after.samples == 0 {
		e.Log("a side of the re-run got no CPU samples (%d and %d): recording again", before.samples, after.samples)
		if b, a, err := e.measureHotspot(ctx, r, r.share); err == nil && b.samples > 0 && a.samples > 0 {
			before, after = b, a
		}
	}
	if before.runs == 0 || after.runs == 0 {
		// No run, no number: a side that never ran has no time to compare.
		f.Verification = model.NotRunBecause(fmt.Sprintf("the statement ran %d times as written and %d times with %s: a side that did not run has no time to compare", before.runs, after.runs, r.change))
		return
	}
	f.Verification = model.Verification{
		Method: fmt.Sprintf("perf on pgmedic's own session while it re-ran the statement as the application did and with %s (read-only transactions, rolled back); %d and %d runs, medians; %s of the %d and %d samples %.0f%% -> %.0f%%",
			r.change, before.runs, after.runs, r.shareOf, before.samples, after.samples, 100*before.share, 100*after.share),
		Before: &model.Measure{Value: before.medianMS, Unit: "ms"}, After: &model.Measure{Value: after.medianMS, Unit: "ms"}}
	if judge(f, before.medianMS, after.medianMS) && r.fixed != "" {
		f.Fix.SQL = r.fixed
		if r.caveat != "" {
			f.Fix.Summary = r.caveat
		}
	}
	// A side that ran only after the recording (a statement slower than
	// the window) has a time but no samples: no share is said of it.
	for _, side := range []struct {
		label string
		h     hotSide
	}{{"share of the re-run as written", before}, {"share with the fix", after}} {
		if side.h.samples > 0 {
			f.Evidence = append(f.Evidence, model.Evidence{Label: side.label, Value: model.Round(100*side.h.share, 1), Unit: "%"})
		} else {
			f.Evidence = append(f.Evidence, model.Evidence{Label: side.label + ": not profiled (it ran once after the recording, timed only)", Value: 0, Fact: true})
		}
	}
}

// planHotspot designs the re-run for a hot spot of kind in a statement
// whose text (with its values) is raw; it says why when there is none.
// Only a SELECT that is safe to execute is re-run, and only fixes that
// change one setting or the statement itself: jit = off, a timestamp
// column compared with timestamptz values moved to the column's type, and
// text sort keys compared by bytes (COLLATE "C").
func (e *Engine) planHotspot(ctx context.Context, kind, raw string, collation float64) (*hotRerun, string) {
	if raw == "" {
		return nil, "the statement's text was not seen in pg_stat_activity"
	}
	st, err := sqlparse.Parse(raw)
	if err != nil {
		return nil, "the statement's text does not parse (pg_stat_activity cuts it at track_activity_query_size)"
	}
	if ok, why := st.SafeToAnalyze(); !ok {
		return nil, "not re-run: " + why
	}
	if st.ParamCount() > 0 {
		return nil, "the statement has parameters ($1, ...) whose values pg_stat_activity does not show"
	}
	switch kind {
	case "jit":
		return &hotRerun{before: raw, after: raw, setBefore: "SET LOCAL jit TO DEFAULT", setAfter: "SET LOCAL jit = off", change: "SET jit = off"}, ""
	case "timezone":
		const typ = "timestamp without time zone"
		fixed, changed := st, 0
		for _, rel := range st.Relations() {
			cols, err := e.columnsOfType(ctx, rel, typ)
			if err != nil {
				return nil, "reading the columns' types: " + envelope.Message(err)
			}
			for _, c := range cols {
				next, n, err := fixed.CastToColumnOnce(c, typ)
				if err == nil && n > 0 {
					fixed, changed = next, changed+n
				}
			}
		}
		if changed == 0 {
			return nil, "no comparison of a timestamp column to rewrite was found in the statement"
		}
		// The change is said without the statement's values.
		_, norm := sqlparse.Fingerprint(fixed.Text())
		return &hotRerun{before: raw, after: fixed.Text(), setBefore: "SET LOCAL jit = off", setAfter: "SET LOCAL jit = off",
			change: "the timestamptz bound computed once and cast to the column's type (" + printable.Clip(norm, 200) + ")", fixed: norm}, ""
	case "sort":
		return e.planCollatedSort(ctx, st, raw, collation)
	case "numeric-float":
		return nil, "the conversion comes from the expression's types (a float8 operand beside a numeric one); pgmedic does not rewrite expressions"
	}
	return nil, "the fix is not a change to one statement or setting"
}

// planCollatedSort designs the re-run of a sort whose samples compared
// text under a linguistic collation (collation is that share of the
// profile, in percent): the statement with COLLATE "C" on each of its
// sort keys that takes a collation. Which keys do is asked of the server:
// a key of a type without collations (integer, timestamp) makes EXPLAIN
// fail, and is left as it is. EXPLAIN plans without running, in a
// read-only transaction.
func (e *Engine) planCollatedSort(ctx context.Context, st *sqlparse.Statement, raw string, collation float64) (*hotRerun, string) {
	if collation < 1 {
		return nil, "the sort compares numbers or bytes, not text under a linguistic collation: the fix is an index that returns the rows in order, or a smaller sort, which a hot spot's re-run does not build"
	}
	var keys []int
	for i := 0; i < st.SortKeys(); i++ {
		try, _, err := st.CollateSortKeys("C", []int{i})
		if err != nil {
			continue
		}
		err = envelope.RolledBack(ctx, e.Conn, envelope.ReadOnly, func() error {
			_, err := e.Conn.Exec(ctx, envelope.Tag+"EXPLAIN "+try.Text())
			return err
		})
		if err == nil {
			keys = append(keys, i)
		}
	}
	if len(keys) == 0 {
		return nil, "no sort key of the statement takes a collation (the text is compared elsewhere: a GROUP BY, DISTINCT, a merge join or an index's own order)"
	}
	fixed, _, err := st.CollateSortKeys("C", keys)
	if err != nil {
		return nil, err.Error()
	}
	_, norm := sqlparse.Fingerprint(fixed.Text())
	return &hotRerun{before: raw, after: fixed.Text(), setBefore: "SET LOCAL jit = off", setAfter: "SET LOCAL jit = off",
		change: fmt.Sprintf("COLLATE \"C\" on %d sort key(s) (%s)", len(keys), printable.Clip(norm, 200)), fixed: norm,
		share: rules.CollationShare, shareOf: "the share comparing text under the collation",
		caveat: "sort the text keys by bytes with COLLATE \"C\" where people do not read the order (keyset pagination, deduplication, batching): " +
			"the same rows come in a different order (upper case before lower case, accented letters after z). Where the linguistic order is shown, " +
			"an index on the keys (CREATE INDEX ... (key) with the column's collation) returns the rows in order without a sort"}, ""
}

// collationShare is the share of a sort hot spot's samples that compared
// text under a linguistic collation, in percent.
func collationShare(f *model.Finding) float64 {
	for _, ev := range f.Evidence {
		if ev.Label == rules.CollationEvidence {
			return ev.Value
		}
	}
	return 0
}

// columnsOfType lists a relation's columns of a type.
func (e *Engine) columnsOfType(ctx context.Context, rel sqlparse.Name, typ string) ([]string, error) {
	rows, err := e.Conn.Query(ctx, envelope.Tag+`SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND atttypid = $2::regtype AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
		sqlparse.QuoteQualified(rel.Schema, rel.Name), typ)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// hotspotFor is how long a hot spot's re-run records: enough runs of a
// statement of up to a few hundred milliseconds on each side.
const hotspotFor = 2 * time.Second

// measureHotspot runs the two sides in turn on pgmedic's own session
// (every run in a read-only transaction that is rolled back) while e.CPU
// records its backend. The sides alternate run by run inside one
// recording, so a moment when the machine is busy slows both alike; each
// sample counts for the side whose run it fell in (samples and runs are
// stamped on one clock), and samples between runs count for neither.
func (e *Engine) measureHotspot(ctx context.Context, r *hotRerun, kindShare func(model.Profile) float64) (before, after hotSide, err error) {
	var pid int
	if err := e.Conn.QueryRow(ctx, envelope.Tag+"SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return before, after, fmt.Errorf("reading pgmedic's backend pid: %w", err)
	}
	type window struct {
		from, to float64 // on e.CPU's clock
		side     int
	}
	var runs []window
	var times [2][]float64
	sides := [2]struct{ set, sql string }{{r.setBefore, r.before}, {r.setAfter, r.after}}
	d := hotspotFor
	var runErr error
	during := func(recording context.Context) {
		// The last runs end well before the recording does, so none is cut
		// in two.
		deadline := e.CPU.Now() + (d - 300*time.Millisecond).Seconds()
		for i := 0; runErr == nil && recording.Err() == nil && e.CPU.Now() < deadline; i++ {
			var from, to float64
			from, to, runErr = e.hotRun(ctx, sides[i%2].set, sides[i%2].sql)
			if runErr == nil {
				runs = append(runs, window{from: from, to: to, side: i % 2})
				times[i%2] = append(times[i%2], (to-from)*1000)
			}
		}
	}
	builders := [2]*profile.Builder{profile.NewBuilder("pgmedic's backend"), profile.NewBuilder("pgmedic's backend")}
	_, err = e.CPU.Record(ctx, []int{pid}, d, 499, during, func(smp profile.Sample) {
		// Runs are in time order: the first that ends after the sample.
		i := sort.Search(len(runs), func(i int) bool { return runs[i].to >= smp.Time })
		if i < len(runs) && runs[i].from <= smp.Time {
			builders[runs[i].side].Add(smp)
		}
	})
	if runErr != nil {
		return before, after, fmt.Errorf("running the statement: %s", envelope.Message(runErr))
	}
	if err != nil {
		return before, after, err
	}
	// A statement slower than the recording left room for (a run as
	// written of 1.8 s) can leave the other side unrun: it runs once
	// now, unprofiled, so that both numbers are times that were measured.
	for k := range times {
		if len(times[k]) > 0 {
			continue
		}
		from, to, err := e.hotRun(ctx, sides[k].set, sides[k].sql)
		if err != nil {
			return before, after, fmt.Errorf("running the statement: %s", envelope.Message(err))
		}
		times[k] = append(times[k], (to-from)*1000)
	}
	var out [2]hotSide
	for k := range out {
		p := builders[k].Profile(d.Seconds() / 2)
		sort.Float64s(times[k])
		out[k] = hotSide{runs: len(times[k]), samples: p.Samples, share: kindShare(p)}
		if len(times[k]) > 0 {
			out[k].medianMS = model.Round(model.Percentile(times[k], 0.5), 3)
		}
	}
	return out[0], out[1], nil
}

// hotRun runs one side of a hot spot's re-run once, in a read-only
// transaction rolled back, after its setting: when it began and ended on
// e.CPU's clock (the profile's).
func (e *Engine) hotRun(ctx context.Context, set, sql string) (from, to float64, err error) {
	err = envelope.RolledBack(ctx, e.Conn, envelope.ReadOnly, func() error {
		if set != "" {
			if _, err := e.Conn.Exec(ctx, envelope.Tag+set); err != nil {
				return err
			}
		}
		from = e.CPU.Now()
		err := envelope.Run(ctx, e.Conn, sql)
		to = e.CPU.Now()
		return err
	})
	return from, to, err
}
