package rules

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// Thresholds of slow-planning (see docs/rules/slow-planning.md).
const (
	slowPlanningMinMS = 5.0 // planning at least this long ...
)

// slowPlanning flags plans that took longer to plan than to run.
func slowPlanning(in PlanInput) []model.Finding {
	e := in.Explain
	if !e.HasPlanningTime || e.PlanningMS < slowPlanningMinMS || (e.HasAnalyze && e.PlanningMS < e.ExecutionMS) {
		return nil
	}
	f := planFinding(in, SlowPlanningID, nil, fmt.Sprintf("planning took %s, execution %s", ms(e.PlanningMS), ms(e.ExecutionMS)), e.PlanningMS, "")
	// Planning time is not part of execution time: share against both.
	total := e.PlanningMS + e.ExecutionMS
	f.Impact.Share = model.Round(e.PlanningMS/total, 4)
	f.Impact.Summary = fmt.Sprintf("could save up to %s of %s planning plus execution (%s) per call", ms(e.PlanningMS), ms(total), pct(e.PlanningMS/total))
	joins := 0
	e.Plan.Walk(func(n, _ *plan.Node) {
		if strings.HasSuffix(n.NodeType, "Join") || n.NodeType == "Nested Loop" {
			joins++
		}
	})
	f.Evidence = append(f.Evidence, ev("planning", e.PlanningMS, "ms"), ev("execution", e.ExecutionMS, "ms"), ev("joins", float64(joins), ""))
	f.Fix.Summary = "prepare the statement once and execute it many times (server-side prepared statements keep the plan); with many joins lower join_collapse_limit, with many partitions make sure the partition key is in the WHERE clause"
	return []model.Finding{f}
}

// SlowPlanningID is the stable id of the rule.
const SlowPlanningID = "slow-planning"
