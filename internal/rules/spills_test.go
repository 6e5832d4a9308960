package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

func TestSpillStatements(t *testing.T) {
	sorted := &plan.Explain{Plan: plan.Node{NodeType: "Limit", Plans: []plan.Node{{NodeType: "Sort", Plans: []plan.Node{{NodeType: "Seq Scan", RelationName: "tickets"}}}}}}
	hashed := &plan.Explain{Plan: plan.Node{NodeType: "Hash Join", Plans: []plan.Node{{NodeType: "Seq Scan"}, {NodeType: "Hash"}}}}
	grouped := &plan.Explain{Plan: plan.Node{NodeType: "Aggregate", Strategy: "Hashed"}}
	both := &plan.Explain{Plan: plan.Node{NodeType: "Sort", Plans: []plan.Node{{NodeType: "Hash Join", Plans: []plan.Node{{NodeType: "Hash"}}}}}}
	for _, c := range []struct {
		name     string
		blocks   int64 // temp blocks written over 10 calls
		execMS   float64
		plan     *plan.Explain
		query    string
		hidden   int
		wantSort model.Severity
		wantHash model.Severity
	}{
		{name: "a sort past work_mem", blocks: 10 * 3500, execMS: 500, plan: sorted, query: "SELECT * FROM tickets ORDER BY opened_at LIMIT 10", wantSort: model.Warning, wantHash: -1},
		{name: "a hash join in batches", blocks: 10 * 1200, execMS: 900, plan: hashed, query: "SELECT * FROM a JOIN b USING (id)", wantSort: -1, wantHash: model.Warning},
		{name: "a hash aggregate", blocks: 10 * 200, execMS: 900, plan: grouped, query: "SELECT k, count(*) FROM a GROUP BY k", wantSort: -1, wantHash: model.Warning},
		{name: "a sort above a hash goes to sort-spill", blocks: 10 * 1200, execMS: 900, plan: both, query: "SELECT * FROM a JOIN b USING (id) ORDER BY 1", wantSort: model.Warning, wantHash: -1},
		{name: "under a megabyte a call is not a spill worth memory", blocks: 10 * 100, execMS: 900, plan: sorted, query: "SELECT 1", wantSort: -1, wantHash: -1},
		{name: "without a plan, a join without ORDER BY is a hash", blocks: 10 * 1200, execMS: 900, query: "SELECT * FROM a JOIN b USING (id)", wantSort: -1, wantHash: model.Warning},
		{name: "without a plan, ORDER BY is a sort", blocks: 10 * 1200, execMS: 900, query: "SELECT * FROM a ORDER BY x", wantSort: model.Warning, wantHash: -1},
		{name: "without a plan, neither a sort nor a join is neither rule's", blocks: 10 * 1200, execMS: 900, query: "SELECT count(*) FROM generate_series(1, $1) g", wantSort: -1, wantHash: -1},
		{name: "a function scan's tuplestore is neither rule's", blocks: 10 * 1200, execMS: 900, plan: &plan.Explain{Plan: plan.Node{NodeType: "Aggregate", Strategy: "Plain", Plans: []plan.Node{{NodeType: "Function Scan"}}}}, query: "SELECT count(*) FROM generate_series(1, $1) g", wantSort: -1, wantHash: -1},
		{name: "a small share of the time is info", blocks: 10 * 200, execMS: 1, plan: sorted, query: "SELECT * FROM a ORDER BY x", wantSort: model.Info, wantHash: -1},
		{name: "a gigabyte written is a warning whatever its time", blocks: 140000, execMS: 1, plan: sorted, query: "SELECT * FROM a ORDER BY x", wantSort: model.Warning, wantHash: -1},
		{name: "hidden statements are said, not ignored", blocks: 0, execMS: 1, plan: sorted, query: "SELECT 1", hidden: 3, wantSort: -1, wantHash: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := sqlparse.Parse(c.query)
			if err != nil {
				t.Fatal(err)
			}
			st := model.Statement{QueryID: 7, Query: c.query, Parsed: parsed, Role: "app", Calls: 10, TotalExecMS: c.execMS, TempBlksWritten: c.blocks}
			other := model.Statement{QueryID: 8, Query: "SELECT 2", Calls: 1000, TotalExecMS: 1000}
			s := &model.Snapshot{Database: "shop", User: "pgmedic", Statements: []model.Statement{st, other}, StatementsHidden: c.hidden,
				Plans: map[int64]*plan.Explain{}, Settings: map[string]model.Setting{"work_mem": {Value: "4096"}},
				Activity: model.Activity{MaxConnections: 100, Total: 12}}
			if c.plan != nil {
				s.Plans[7] = c.plan
			}
			for _, r := range []struct {
				fn   func(*model.Snapshot) ([]model.Finding, []model.Skip)
				want model.Severity
				id   string
			}{{sortSpillStatements, c.wantSort, SortSpillID}, {hashBatchesStatements, c.wantHash, HashBatchesID}} {
				fs, skips := r.fn(s)
				if c.hidden > 0 && (len(skips) == 0 || !strings.Contains(skips[0].Reason, "could not see 3 statements")) {
					t.Errorf("%s: hidden statements not said: %+v", r.id, skips)
				}
				if r.want < 0 {
					if len(fs) > 0 {
						t.Errorf("%s fired: %s", r.id, fs[0].Title)
					}
					continue
				}
				if len(fs) != 1 {
					t.Fatalf("%s: %d findings, want 1", r.id, len(fs))
				}
				f := fs[0]
				if f.Severity != r.want || f.Rule != r.id || f.Experiment == nil || f.Experiment.Kind != model.ExpWorkMem {
					t.Errorf("%s: got %v %s %+v", r.id, f.Severity, f.Rule, f.Experiment)
				}
				if f.Experiment.FixSettings["work_mem"] == "" || !strings.Contains(f.Fix.SQL, "SET LOCAL work_mem = '"+f.Experiment.FixSettings["work_mem"]+"'") {
					t.Errorf("%s: fix %q does not carry the proposed work_mem %v", r.id, f.Fix.SQL, f.Experiment.FixSettings)
				}
				if !strings.Contains(f.Impact.Summary, "100 connections") {
					t.Errorf("%s: the cost at max_connections is not said: %s", r.id, f.Impact.Summary)
				}
			}
		})
	}
}

func TestMemorySettings(t *testing.T) {
	for in, want := range map[string]float64{"4096": 4096, "64MB": 65536, "1GB": 1 << 20, " 512kB": 512, "x": 0, "-1": 0, "2TB": 2 << 30} {
		if got := model.MemoryKB(in); got != want {
			t.Errorf("MemoryKB(%q) = %v, want %v", in, got, want)
		}
	}
	for kb, want := range map[float64]string{1: "4MB", 4096: "4MB", 4097: "8MB", 28048 * 3: "128MB", 3 << 20: "4GB"} {
		if got := model.MemorySetting(kb); got != want {
			t.Errorf("MemorySetting(%v) = %q, want %q", kb, got, want)
		}
	}
	for kb, want := range map[float64]string{4096: "4MB", 1 << 20: "1GB", 1500: "1500kB", 0: "unknown", 1638400: "1600MB"} {
		if got := model.MemoryText(kb); got != want {
			t.Errorf("MemoryText(%v) = %q, want %q", kb, got, want)
		}
	}
}
