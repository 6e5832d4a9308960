package rules

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// PlanInput is one plan to diagnose, with what is known around it.
type PlanInput struct {
	Explain *plan.Explain
	// Object is what the plan belongs to: a file, a query, a statement of
	// pg_stat_statements (QueryID set). Findings name their node under it.
	Object model.Object
	// Catalog answers the implicit-cast questions; nil without a database.
	Catalog *model.CastCatalog
	// Query is the statement's SQL when known, for experiments, and Stmt
	// the same parsed when the caller has parsed it already.
	Query string
	Stmt  *sqlparse.Statement
}

// RunPlan applies the plan rules (all when ids is empty) and returns the
// findings ranked by the time they could save, plus what was skipped.
func RunPlan(in PlanInput, ids []string) ([]model.Finding, []model.Skip, error) {
	rs, err := Select(ids)
	if err != nil {
		return nil, nil, err
	}
	var findings []model.Finding
	var needAnalyze []string
	for _, r := range rs {
		if r.Plan == nil {
			continue
		}
		if r.PlanNeedsAnalyze && (!in.Explain.HasAnalyze || (r.ID == JITOverheadID && in.Explain.JIT != nil && in.Explain.JIT.TimingMS == nil)) {
			needAnalyze = append(needAnalyze, r.ID)
			continue
		}
		findings = append(findings, r.Plan(in)...)
	}
	var skips []model.Skip
	if len(needAnalyze) > 0 {
		skips = append(skips, model.Skip{Rule: strings.Join(needAnalyze, ", "),
			Reason: "the plan has no ANALYZE figures, so these rules did not run",
			Fix:    "run EXPLAIN (ANALYZE, BUFFERS) (pgmedic explain --dsn ... --query ... --analyze does it safely for a SELECT)"})
	}
	RankPlan(findings)
	findings, skips = capPerRule(findings, skips)
	return findings, skips, nil
}

// maxPerRule bounds one rule's findings on one plan. A plan over
// thousands of partitions can have a thousand small nodes with the same
// problem; the largest are shown and the rest are counted.
const maxPerRule = 10

// capPerRule keeps each rule's maxPerRule largest findings (they come
// ranked) and says how many were left out.
func capPerRule(fs []model.Finding, skips []model.Skip) ([]model.Finding, []model.Skip) {
	seen := map[string]int{}
	kept := fs[:0]
	var order []string
	for _, f := range fs {
		seen[f.Rule]++
		if seen[f.Rule] == 1 {
			order = append(order, f.Rule)
		}
		if seen[f.Rule] <= maxPerRule {
			kept = append(kept, f)
		}
	}
	for _, id := range order {
		if n := seen[id]; n > maxPerRule {
			skips = append(skips, model.Skip{Rule: id,
				Reason: fmt.Sprintf("%d more findings on smaller nodes of this plan are left out; the %d largest are shown", n-maxPerRule, maxPerRule)})
		}
	}
	return kept, skips
}

// RankPlan orders plan findings by the time they could save, then by
// severity.
func RankPlan(f []model.Finding) {
	sort.SliceStable(f, func(i, j int) bool {
		if f[i].Impact.Share != f[j].Impact.Share {
			return f[i].Impact.Share > f[j].Impact.Share
		}
		return f[i].Severity > f[j].Severity
	})
}

// planFinding fills what every plan finding has: the node it is about,
// the time it could save (and its share of the plan), and the severity
// that follows from that share.
func planFinding(in PlanInput, rule string, n *plan.Node, title string, savedMS float64, saving string) model.Finding {
	total := in.Explain.TotalMS()
	obj := in.Object
	if obj.Kind == "" {
		obj.Kind = "plan"
	}
	if n != nil {
		where := fmt.Sprintf("node #%d %s", n.Figures.ID, n.Label())
		if obj.Name != "" {
			where = obj.Name + ": " + where
		}
		obj.Kind, obj.Name = "plan node", where
	}
	f := model.Finding{Rule: rule, Title: title, Object: obj, Docs: docsPath(rule)}
	share := 0.0
	if total > 0 {
		share = math.Min(1, savedMS/total)
	}
	f.Impact.Share = model.Round(share, 4)
	switch {
	case savedMS <= 0 && saving != "":
		f.Impact.Summary = saving
	case savedMS <= 0:
		f.Impact.Summary = "no direct saving measured in this plan"
	default:
		f.Impact.Summary = fmt.Sprintf("could save up to %s of the plan's %s (%s)%s", ms(savedMS), ms(total), pct(share), prefixed(saving))
	}
	f.Evidence = append(f.Evidence, model.Evidence{Label: "could save", Value: model.Round(savedMS, 2), Unit: "ms"})
	switch {
	case share >= 0.5 && savedMS >= 100:
		f.Severity = model.Critical
	case share >= 0.1 || savedMS >= 100:
		f.Severity = model.Warning
	default:
		f.Severity = model.Info
	}
	f.Verification = model.Verification{Status: model.NotRun,
		Reason: "read from the plan; re-run EXPLAIN (ANALYZE, BUFFERS) after the fix to measure it"}
	return f
}

func prefixed(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}

func ev(label string, v float64, unit string) model.Evidence {
	return model.Evidence{Label: label, Value: model.Round(v, 2), Unit: unit}
}

// relName is the relation a scan reads, schema-qualified when the plan
// says (VERBOSE).
func relName(n *plan.Node) string {
	if n.Schema != "" {
		return sqlparse.QuoteIdent(n.Schema) + "." + sqlparse.QuoteIdent(n.RelationName)
	}
	return sqlparse.QuoteIdent(n.RelationName)
}

// workMemFor suggests a work_mem that holds kb kilobytes, rounded up to
// a power of two megabytes (at least 4MB, PostgreSQL's default).
func workMemFor(kb float64) string { return model.MemorySetting(kb) }

// maxWorkMemKB is the largest work_mem PostgreSQL accepts (MAX_KILOBYTES
// on 64-bit builds: INT_MAX kB, about 2 TB).
const maxWorkMemKB = 2147483647

// workMemSQL is the SET that gives a node kb of memory, or "" when no
// work_mem can: then the fix is fewer rows, not more memory.
func workMemSQL(kb float64) string {
	if !(kb <= maxWorkMemKB/2) {
		return ""
	}
	return fmt.Sprintf("SET work_mem = '%s';", workMemFor(kb))
}

// workMemExperiment re-runs a plan's statement, when its text is known
// (a plan from the server's log, whose query text auto_explain printed
// with its values), with work_mem as it is and with kb: the same
// experiment as a spilling statement of pg_stat_statements gets. nil
// without the text, or when no work_mem could hold kb.
func workMemExperiment(in PlanInput, kb float64) *model.Experiment {
	if in.Query == "" || workMemSQL(kb) == "" {
		return nil
	}
	return &model.Experiment{Kind: model.ExpWorkMem, Query: in.Query, Stmt: in.Stmt, Calls: 1, MeanMS: in.Explain.TotalMS(),
		FixSettings: map[string]string{"work_mem": workMemFor(kb)}}
}

// tempIOms is the temp-file I/O time the node spent (track_io_timing).
func tempIOms(n *plan.Node) float64 { return n.IO.TempReadMS + n.IO.TempWriteMS }

// nodes returns the plan's nodes with their parents.
func nodes(e *plan.Explain) (out []*plan.Node, parent map[*plan.Node]*plan.Node) {
	out = allNodes(e)
	parent = make(map[*plan.Node]*plan.Node, len(out))
	e.Plan.Walk(func(n, p *plan.Node) { parent[n] = p })
	return out, parent
}

// allNodes returns the plan's nodes in the order EXPLAIN prints them.
func allNodes(e *plan.Explain) []*plan.Node {
	var out []*plan.Node
	e.Plan.Walk(func(n, _ *plan.Node) { out = append(out, n) })
	return out
}

// plural is the "s" of a count that is not one.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
