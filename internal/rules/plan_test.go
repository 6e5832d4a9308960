package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

func loadPlan(t *testing.T, name string) *plan.Explain {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "plan", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	e, err := plan.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return e
}

func fired(fs []model.Finding, rule string) []model.Finding {
	var out []model.Finding
	for _, f := range fs {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

// TestPlanRulesOnFixtures: every plan rule fires on the PostgreSQL 15 plan
// that has its problem, in both formats, and stays quiet on the healthy
// plan of the same query.
func TestPlanRulesOnFixtures(t *testing.T) {
	cases := []struct {
		rule, fixture string
		says          string // in the title
	}{
		{JITOverheadID, "jit-overhead", "JIT compilation took"},
		{SlowPlanningID, "slow-planning", "planning took"},
		{MissingIndexID, "missing-index", "keeps 8 of 400k rows"},
		// 40 hash partitions, each scan throwing away 5,000 rows: one
		// finding on the Append, not forty.
		{MissingIndexID, "missing-index-partitions", "sequential scans of 40 partitions (events_p0 … events_p39) keep 40 of 200k rows"},
		{ImplicitCastID, "implicit-cast", "customer_id is cast to numeric"},
		{SortSpillID, "sort-spill", "external merge"},
		{HashBatchesID, "hash-batches", "8 batches"},
		{MisestimateID, "misestimate", "underestimated by 300x"},
		{NestedLoopBlowupID, "nested-loop-blowup", "300k times"},
		{LossyBitmapID, "lossy-bitmap", "lossy on 1548 of 2521"},
		{LargeOffsetID, "large-offset", "skipped 200k rows"},
		{HeapFetchesID, "heap-fetches", "fetched"},
	}
	for _, c := range cases {
		for _, ext := range []string{"txt", "json"} {
			t.Run(c.rule+"/"+ext, func(t *testing.T) {
				bad := loadPlan(t, "pg15/"+c.fixture+".bad."+ext)
				fs, _, err := RunPlan(PlanInput{Explain: bad}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := fired(fs, c.rule)
				if len(got) != 1 {
					t.Fatalf("%d %s findings on the bad plan: %+v", len(got), c.rule, fs)
				}
				f := got[0]
				if !strings.Contains(f.Title, c.says) {
					t.Errorf("title %q lacks %q", f.Title, c.says)
				}
				if f.Fix.Summary == "" || f.Impact.Summary == "" || f.Docs == "" {
					t.Errorf("incomplete finding %+v", f)
				}
				if c.rule != MisestimateID && (f.Evidence[0].Label != "could save" || f.Evidence[0].Value <= 0) {
					t.Errorf("no time saving: %+v", f.Evidence)
				}
				if c.fixture == "missing-index-partitions" && f.Fix.SQL != "CREATE INDEX ON events (user_id);" {
					t.Errorf("fix %q is not one index on the partitioned table", f.Fix.SQL)
				}
				if _, err := os.Stat(filepath.Join("..", "..", f.Docs)); err != nil {
					t.Errorf("rule page: %v", err)
				}
				good := loadPlan(t, "pg15/"+c.fixture+".good."+ext)
				fs, _, _ = RunPlan(PlanInput{Explain: good}, nil)
				if got := fired(fs, c.rule); len(got) != 0 {
					t.Errorf("fired on the healthy plan: %+v", got[0].Title)
				}
			})
		}
	}
}

func TestPlanRulesRankBySaving(t *testing.T) {
	e := loadPlan(t, "pg15/nested-loop-blowup.bad.txt")
	fs, _, _ := RunPlan(PlanInput{Explain: e}, nil)
	for i := 1; i < len(fs); i++ {
		if fs[i].Impact.Share > fs[i-1].Impact.Share {
			t.Errorf("not ranked by saving: %v before %v", fs[i-1].Impact.Share, fs[i].Impact.Share)
		}
	}
}

func TestPlanWithoutAnalyze(t *testing.T) {
	e := loadPlan(t, "pg15/costs-only.txt")
	fs, skips, err := RunPlan(PlanInput{Explain: e}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) != 1 || !strings.Contains(skips[0].Rule, SortSpillID) || strings.Contains(skips[0].Rule, ImplicitCastID) {
		t.Errorf("skips %+v", skips)
	}
	_ = fs
	if _, _, err := RunPlan(PlanInput{Explain: e}, []string{"no-such-rule"}); err == nil {
		t.Error("unknown rule accepted")
	}
}

// TestImplicitCastCatalog: with the catalogs, a cast that an index can see
// through (varchar relabelled to text) is dropped, a real conversion names
// the index and the fix, and a cross-type operator changes the fix.
func TestImplicitCastCatalog(t *testing.T) {
	cat := &model.CastCatalog{Binary: map[string]bool{"character varying>text": true}, Columns: map[string]model.CastColumn{}}
	add := func(table, col, typ, index, input string, accepts ...string) {
		base, _, _ := strings.Cut(typ, "(")
		cat.Columns[model.CastKey("public", table, col)] = model.CastColumn{Schema: "public", Table: table, Column: col, Type: typ, BaseType: base,
			Indexes: []model.CastIndex{{Name: index, InputType: input, Accepts: accepts}}}
	}
	add("orders", "customer_id", "integer", "orders_customer_idx", "integer", "integer", "smallint", "bigint")
	add("readings", "sensor", "character(8)", "readings_sensor_idx", "character", "character")
	add("orders", "placed_at", "timestamp without time zone", "orders_placed_at_idx", "timestamp without time zone",
		"timestamp without time zone", "timestamp with time zone", "date")
	add("orders", "amount", "numeric(12,2)", "orders_amount_idx", "numeric", "numeric")
	for _, c := range []struct {
		fixture, fix string
	}{
		{"implicit-cast.bad.txt", "$1::integer"},
		{"implicit-cast-char.bad.txt", "$1::character(8)"},
		{"implicit-cast-float.bad.json", "$1::numeric(12,2)"},
		{"implicit-cast-timestamp.bad.txt", "drop the cast"},
	} {
		e := loadPlan(t, "pg15/"+c.fixture)
		fs := implicitCast(PlanInput{Explain: e, Catalog: cat})
		if len(fs) != 1 {
			t.Fatalf("%s: %d findings", c.fixture, len(fs))
		}
		f := fs[0]
		if !strings.Contains(f.Fix.Summary, c.fix) || f.Experiment == nil || f.Experiment.Kind != model.ExpCast || f.Severity < model.Warning {
			t.Errorf("%s: %+v", c.fixture, f)
		}
	}
	varchar := &plan.Explain{Plan: plan.Node{NodeType: "Seq Scan", RelationName: "items", Schema: "public", Alias: "items",
		Filter: "((items.sku)::text = 'k5'::text)"}}
	varchar.Derive()
	cat.Columns[model.CastKey("public", "items", "sku")] = model.CastColumn{Schema: "public", Table: "items", Column: "sku", Type: "character varying", BaseType: "character varying"}
	if fs := implicitCast(PlanInput{Explain: varchar, Catalog: cat}); len(fs) != 0 {
		t.Errorf("varchar = text flagged: %+v", fs)
	}
	if fs := implicitCast(PlanInput{Explain: varchar}); len(fs) != 1 || fs[0].Severity != model.Info || !strings.Contains(fs[0].Verification.Reason, "unconfirmed") {
		t.Errorf("without catalog: %+v", fs)
	}
}

// TestCapPerRule: one rule's findings beyond maxPerRule are counted in a
// skip, not listed; other rules keep theirs.
func TestCapPerRule(t *testing.T) {
	var fs []model.Finding
	for i := 0; i < maxPerRule+3; i++ {
		fs = append(fs, model.Finding{Rule: MisestimateID})
	}
	fs = append(fs, model.Finding{Rule: SortSpillID}, model.Finding{Rule: SortSpillID})
	kept, skips := capPerRule(fs, nil)
	if len(fired(kept, MisestimateID)) != maxPerRule || len(fired(kept, SortSpillID)) != 2 {
		t.Fatalf("kept %d findings", len(kept))
	}
	if len(skips) != 1 || skips[0].Rule != MisestimateID || !strings.HasPrefix(skips[0].Reason, "3 more findings") {
		t.Fatalf("skips %+v", skips)
	}
}

// TestGuessedTypesCast: a cast that appears only because pgmedic guessed
// the parameters' types ($2 + $3 prepared as numeric) is not a warning
// unless what the server ran shows it: the application's buffers per
// call near the table's pages, and time worth a finding.
func TestGuessedTypesCast(t *testing.T) {
	cat := &model.CastCatalog{Columns: map[string]model.CastColumn{
		model.CastKey("public", "counters", "project_id"): {Schema: "public", Table: "counters", Column: "project_id", Type: "integer", BaseType: "integer",
			Indexes: []model.CastIndex{{Name: "counters_project_idx", InputType: "integer", Accepts: []string{"integer", "bigint", "smallint"}}}},
	}}
	ex := &plan.Explain{Plan: plan.Node{NodeType: "Seq Scan", RelationName: "counters", Schema: "public", Alias: "counters",
		Filter: "((counters.project_id)::numeric = ($2 + $3))"}}
	ex.Derive()
	pages := int64(2000)
	snap := func(guessed bool, blocksPerCall int64, meanMS float64) *model.Snapshot {
		st := model.Statement{QueryID: 7, Query: "UPDATE counters SET n = n + $1 WHERE project_id = $2 + $3", Calls: 1000,
			TotalExecMS: meanMS * 1000, SharedBlksHit: blocksPerCall * 1000}
		s := &model.Snapshot{Statements: []model.Statement{st}, Plans: map[int64]*plan.Explain{7: ex}, Casts: cat,
			GuessedTypes: map[int64]bool{7: guessed},
			Tables:       []model.Table{{Schema: "public", Name: "counters", RelPages: pages}}}
		return s
	}
	tiny := func(s *model.Snapshot) *model.Snapshot {
		s.Tables[0].RelPages = 7
		return s
	}
	for _, c := range []struct {
		name      string
		s         *model.Snapshot
		atWarning bool
	}{
		{"types PostgreSQL inferred: the cast is the application's", snap(false, 3, 0.12), true},
		{"guessed types, an index-sized read, 0.12 ms", snap(true, 3, 0.12), false},
		{"guessed types, a full read but fast", snap(true, 2000, 0.5), false},
		{"guessed types, the application reads the table: 40 ms", snap(true, 2000, 40), true},
		// A 7-page table scanned whole costs well under a millisecond: a
		// mean of 40 ms is waiting (a lock), not the cast.
		{"inferred types, 7 pages, 40 ms of waiting", tiny(snap(false, 7, 40)), false},
		{"guessed types, 7 pages read whole, 40 ms of waiting", tiny(snap(true, 7, 40)), false},
	} {
		fs, _ := implicitCastStatements(c.s)
		warned := false
		for _, f := range fs {
			if f.Severity >= model.Warning {
				warned = true
			}
			if !c.atWarning && f.Experiment != nil {
				t.Errorf("%s: a cast that cannot cost the statement's time would be re-measured", c.name)
			}
			if c.s.Tables[0].RelPages == 7 && !strings.Contains(f.Verification.Reason, "7 pages") {
				t.Errorf("%s: the reason does not name the table's size: %s", c.name, f.Verification.Reason)
			}
		}
		if warned != c.atWarning {
			t.Errorf("%s: warning %v, want %v (%+v)", c.name, warned, c.atWarning, fs)
		}
	}
}

func TestTruncatingCasts(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"timestamp with time zone", "date", true},
		{"timestamp without time zone", "time without time zone", true},
		{"numeric", "integer", true},
		{"timestamp without time zone", "timestamp with time zone", false},
		{"integer", "numeric", false},
		{"character", "text", false},
	} {
		if got := truncates(c.from, c.to); got != c.want {
			t.Errorf("truncates(%s, %s) = %v", c.from, c.to, got)
		}
	}
}

// TestUnservedFilters: a scan whose filter no plain index on its columns
// serves is given the fix that serves it, never "index the columns of the
// filter": LIKE 'A1F%' on text under an ICU collation gets a
// text_pattern_ops index (collation-prefix's class), and 30 partitions
// scanned under date_trunc('day', started_at) = ... get the range on the
// bare key that brings pruning back, with no index to paste
// (partition-pruning's class). Plans from PostgreSQL 15.
func TestUnservedFilters(t *testing.T) {
	for _, c := range []struct {
		fixture, title, sql, summary string
	}{
		{"missing-index-like-prefix", "(see collation-prefix)", "CREATE INDEX CONCURRENTLY ON public.parts (sku text_pattern_ops);", "text_pattern_ops"},
		{"missing-index-hidden-key", "sequential scans of 30 partitions", "", "call_records.started_at >= (date_trunc('day'::text"},
	} {
		for _, ext := range []string{"txt", "json"} {
			fs, _, err := RunPlan(PlanInput{Explain: loadPlan(t, "pg15/"+c.fixture+".bad."+ext)}, []string{MissingIndexID})
			if err != nil || len(fs) != 1 {
				t.Fatalf("%s.%s: %d findings, %v", c.fixture, ext, len(fs), err)
			}
			f := fs[0]
			if !strings.Contains(f.Title, c.title) || f.Fix.SQL != c.sql || !strings.Contains(f.Fix.Summary, c.summary) || strings.Contains(f.Fix.Summary, "index the columns of the filter") {
				t.Errorf("%s.%s: %q\nfix %q\n%q", c.fixture, ext, f.Title, f.Fix.Summary, f.Fix.SQL)
			}
			if f.Impact.Share > 1 || f.Evidence[0].Value > loadPlan(t, "pg15/"+c.fixture+".bad."+ext).TotalMS() {
				t.Errorf("%s.%s: saves more than the plan takes: %+v", c.fixture, ext, f.Evidence[0])
			}
		}
	}
}
