package verify

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestRankBySaving: an index confirmed on a compact copy (0.45 -> 0.12 ms)
// of a bloated queue whose calls take 10.9 ms saves 0.33 ms of 10.9: the
// finding says so, names the bloat, ranks itself by the saving, and drops
// to info with the bloat as the fix that comes first.
func TestRankBySaving(t *testing.T) {
	snap := &model.Snapshot{Tables: []model.Table{{Schema: "public", Name: "q", Live: 1000, Dead: 90000}}}
	for _, c := range []struct {
		name          string
		app           float64
		wantSeverity  model.Severity
		wantShare     float64
		summaryHas    []string
		summaryHasNot string
	}{
		{"bloated original", 10.9, model.Info, 0.3 * 0.33 / 10.9, []string{"fix the bloat first", "saves 0.33 ms of the 10.90 ms", "90000 dead rows", "62% of the statement's buffers"}, ""},
		{"copy like the original", 0.5, model.Critical, 0.3, nil, "saves"},
		{"app time unknown", 0, model.Critical, 0.3, nil, "saves"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &model.Finding{Severity: model.Critical, Impact: model.Impact{Share: 0.3, Summary: "30% of the time"},
				Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: "q"}, MeanMS: c.app, ReadShare: 0.62}}
			rankBySaving(snap, f, 0.45, 0.12, 40)
			if f.Severity != c.wantSeverity || f.Impact.Share != model.Round(c.wantShare, 4) {
				t.Errorf("severity %v share %v, want %v %v", f.Severity, f.Impact.Share, c.wantSeverity, model.Round(c.wantShare, 4))
			}
			for _, s := range c.summaryHas {
				if !strings.Contains(f.Impact.Summary, s) {
					t.Errorf("summary %q lacks %q", f.Impact.Summary, s)
				}
			}
			if c.summaryHasNot != "" && strings.Contains(f.Impact.Summary, c.summaryHasNot) {
				t.Errorf("summary %q", f.Impact.Summary)
			}
		})
	}
}

// TestRankBySavingUnexplained: the calls took 10.9 ms and the copy 0.45
// ms, but the table is compact, its reads were cached, it never waited on
// a lock, and its calls touched no more buffers than the copy's run: the gap is the calls' moment (a busier server) or values, and
// the index removes the same 73% of their work as on the copy. The
// finding keeps its severity; judged by the copy's milliseconds it would
// rank lower the busier the server was when the calls were counted.
func TestRankBySavingUnexplained(t *testing.T) {
	snap := &model.Snapshot{Tables: []model.Table{{Schema: "public", Name: "q", Live: 100000, Dead: 10}},
		LockWaits: []model.LockWait{{QueryID: 99, WaitEvent: "transactionid"}}}
	f := &model.Finding{Severity: model.Warning, Impact: model.Impact{Share: 0.3, Summary: "30% of the time"},
		Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: "q"}, MeanMS: 10.9, ReadShare: 0.05, QueryID: 7}}
	rankBySaving(snap, f, 0.45, 0.12, 40)
	if f.Severity != model.Warning || f.Impact.Share != model.Round(0.3*0.33/0.45, 4) {
		t.Errorf("severity %v share %v, want warning %v", f.Severity, f.Impact.Share, model.Round(0.3*0.33/0.45, 4))
	}
	if !strings.Contains(f.Impact.Summary, "removes the same 73%") || strings.Contains(f.Impact.Summary, "saves 0.33 ms") {
		t.Errorf("summary %q", f.Impact.Summary)
	}
	// The same gap with the calls seen waiting on a lock is explained:
	// the index saves the copy's milliseconds of them.
	f = &model.Finding{Severity: model.Warning, Impact: model.Impact{Share: 0.3, Summary: "30% of the time"},
		Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: "q"}, MeanMS: 10.9, QueryID: 99}}
	rankBySaving(snap, f, 0.45, 0.12, 40)
	if f.Severity != model.Info || !strings.Contains(f.Impact.Summary, "waiting on transactionid") {
		t.Errorf("explained by a lock wait: severity %v, summary %q", f.Severity, f.Impact.Summary)
	}
	// Calls that touched 1587 buffers each against the copy's 40 did
	// more work (their values select more rows than those bound from
	// pg_stats): explained, and ranked by the copy's milliseconds.
	f = &model.Finding{Severity: model.Warning, Impact: model.Impact{Share: 0.3, Summary: "30% of the time"},
		Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: "q"}, MeanMS: 10.9, QueryID: 7, BuffersPerCall: 1587}}
	rankBySaving(snap, f, 0.45, 0.12, 40)
	if f.Severity != model.Info || !strings.Contains(f.Impact.Summary, "touched 1587 buffers each, the copy's run 40") {
		t.Errorf("explained by the buffers: severity %v, summary %q", f.Severity, f.Impact.Summary)
	}
}

// TestBloatedUnmeasured: an index proposed for a table of mostly dead rows
// and not measured on its live rows (no copy allowed) is info when the
// live rows alone would fall under the rule's own bar (5 ms a call, 5% of
// the time), and says the bloat
// comes first; when they would still take long, it stays a warning and
// says both; on a compact table the estimate stands. A table vacuumed
// after a mass delete (no dead rows, the same pages) counts as bloated
// from its column widths.
func TestBloatedUnmeasured(t *testing.T) {
	snap := &model.Snapshot{Tables: []model.Table{
		{Schema: "public", Name: "events", Live: 20000, Dead: 480000, RelPages: 2622},
		{Schema: "public", Name: "orders", Live: 500000, Dead: 1000, RelPages: 4000},
		{Schema: "public", Name: "vacuumed", Live: 20000, Dead: 0, RelPages: 2622},
	}, Columns: []model.Column{
		{Schema: "public", Table: "vacuumed", Name: "id", HasStats: true, AvgWidth: 4},
		{Schema: "public", Table: "vacuumed", Name: "payload", HasStats: true, AvgWidth: 60},
	}}
	for _, c := range []struct {
		table   string
		meanMS  float64
		want    model.Severity
		summary string
	}{
		{"events", 8, model.Info, "Fix the bloat first"},
		// 96% dead: 60 ms a call is 2.4 ms on the live rows, under the
		// rule's own bar for an index.
		{"events", 60, model.Info, "Fix the bloat first"},
		{"events", 400, model.Warning, "fix the bloat first (table-bloat), and create the index"},
		{"orders", 8, model.Warning, ""},
		{"vacuumed", 8, model.Info, "Fix the bloat first"},
	} {
		f := &model.Finding{Severity: model.Warning, Impact: model.Impact{Summary: "4% of the time", Share: 0.04},
			Experiment: &model.Experiment{Table: model.RelRef{Schema: "public", Name: c.table}, MeanMS: c.meanMS}}
		bloatedUnmeasured(snap, f)
		if f.Severity != c.want {
			t.Errorf("%s at %.0f ms: severity %v, want %v", c.table, c.meanMS, f.Severity, c.want)
		}
		if c.summary != "" && !strings.Contains(f.Impact.Summary, c.summary) || c.summary == "" && strings.Contains(f.Impact.Summary, "bloat") {
			t.Errorf("%s at %.0f ms: summary %q", c.table, c.meanMS, f.Impact.Summary)
		}
	}
}

// TestTimedOutIsABound: a run cancelled by pgmedic's statement_timeout
// is the timeout's milliseconds, a lower bound; any other error, or a
// limit that does not parse, is no measurement.
func TestTimedOutIsABound(t *testing.T) {
	for _, c := range []struct {
		err  error
		ms   float64
		isOK bool
	}{
		{&TimedOut{Limit: "5s"}, 5000, true},
		{fmt.Errorf("re-running: %w", &TimedOut{Limit: "250ms"}), 250, true},
		{&TimedOut{Limit: ""}, 0, false},
		{errors.New("canceling statement due to statement timeout"), 0, false},
		{nil, 0, false},
	} {
		if ms, ok := bounded(c.err); ms != c.ms || ok != c.isOK {
			t.Errorf("bounded(%v) = %v, %v; want %v, %v", c.err, ms, ok, c.ms, c.isOK)
		}
	}
}

// TestSettleStandIns: a confirmation measured with values of pgmedic's
// stands when the side as the application runs it took about what the
// application's calls take; orders of magnitude off, it was another plan
// and the finding is estimated; a count that is not a time keeps its
// verdict; no stand-in, nothing said.
func TestSettleStandIns(t *testing.T) {
	ms := func(before, after float64) model.Verification {
		return model.Verification{Status: model.Confirmed, Before: &model.Measure{Value: before, Unit: "ms"}, After: &model.Measure{Value: after, Unit: "ms"}}
	}
	for _, c := range []struct {
		name     string
		v        model.Verification
		mean     float64
		standIns []string
		want     string
	}{
		{"same work", ms(40, 1), 11, []string{"$2 (interval '1 day')"}, model.Confirmed},
		{"another plan", ms(480, 30), 11, []string{"$2 (interval '1 day')", "$2 (interval '1 day')"}, model.Estimated},
		{"no mean", ms(480, 30), 0, []string{"$1 (integer '1')"}, model.Estimated},
		{"not a time", model.Verification{Status: model.Confirmed, Before: &model.Measure{Value: 240, Unit: "duplicate claims"}, After: &model.Measure{Unit: "duplicate claims"}}, 3, []string{"$1 (integer '1')"}, model.Confirmed},
		{"the application's values", ms(480, 30), 11, nil, model.Confirmed},
	} {
		f := &model.Finding{Verification: c.v, Experiment: &model.Experiment{Query: "SELECT 1", MeanMS: c.mean}}
		settleStandIns(f, c.standIns, appMeanMS(&model.Snapshot{}, f))
		if f.Verification.Status != c.want {
			t.Errorf("%s: %s (%s)", c.name, f.Verification.Status, f.Verification.Reason)
		}
		if len(c.standIns) > 0 && strings.Count(f.Verification.Method, "interval '1 day'") > 1 {
			t.Errorf("%s: a stand-in named twice: %s", c.name, f.Verification.Method)
		}
		if len(c.standIns) == 0 && f.Verification.Method != "" {
			t.Errorf("%s: said %q", c.name, f.Verification.Method)
		}
	}
}

// TestPruningOnBlocks: a range that reads a tenth of the blocks but whose
// time a busy machine blurred (455 against 367 ms) is confirmed on the
// work; one that reads as much, or is slower, is not.
func TestPruningOnBlocks(t *testing.T) {
	for _, c := range []struct {
		before, after       float64
		blocks, blocksFixed int
		want                bool
	}{
		{455, 367, 7200, 720, true},
		{455, 367, 7200, 4000, false},
		{367, 455, 7200, 720, false},
		{455, 367, 0, 0, false},
	} {
		if got := onBlocks(c.before, c.after, c.blocks, c.blocksFixed); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}
