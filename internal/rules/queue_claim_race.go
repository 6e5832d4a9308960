package rules

import (
	"fmt"
	"math"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// QueueClaimRaceID is the rule id.
const QueueClaimRaceID = "queue-claim-race"

// queueClaimRace finds job-queue claims that let two workers take the same
// rows. In READ COMMITTED an `UPDATE ... FROM (SELECT ... LIMIT n)` whose
// subquery does not lock rows lets a second worker pick the same rows; it
// blocks on the first worker's row locks, and when that worker commits,
// EvalPlanQual re-checks only the outer join condition, so the second
// worker updates (claims) the rows again. `FOR UPDATE` alone is correct
// but makes every worker wait for the one ahead of it; `FOR UPDATE SKIP
// LOCKED` lets each worker pass over rows another one holds.
func queueClaimRace(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	total := totalExecMS(s)
	for _, st := range s.Statements {
		sh := s.Shapes[st.QueryID]
		if sh == nil || sh.Claim == nil || sh.Claim.Wait == sqlparse.WaitSkipLocked || sh.Claim.Wait == sqlparse.WaitNoWait {
			continue
		}
		c := sh.Claim
		waits := 0
		for _, w := range s.LockWaits {
			if w.QueryID == st.QueryID && st.QueryID != 0 {
				waits += w.Samples
			}
		}
		share := 0.0
		if total > 0 {
			share = math.Min(st.TotalExecMS/total, 1)
		}
		table := c.Table.Name
		if t := s.Table(c.Table); t != nil {
			table = t.Schema + "." + t.Name
		}
		f := model.Finding{
			Rule:   QueueClaimRaceID,
			Object: model.Object{Kind: "statement", Name: table + ": " + printable.Shorten(st.Query, 100), QueryID: fmt.Sprint(st.QueryID), Role: st.Role, Database: s.Database},
			Evidence: []model.Evidence{
				{Label: "calls", Value: float64(st.Calls)},
				{Label: "rows claimed per call", Value: model.Round(float64(st.Rows)/math.Max(float64(st.Calls), 1), 2)},
				{Label: "mean execution time", Value: model.Round(st.MeanExecMS(), 2), Unit: "ms"},
				{Label: "sampled lock waits on this statement", Value: float64(waits)},
			},
			Fix:  model.Fix{SQL: c.Rewrite},
			Docs: docsPath(QueueClaimRaceID),
		}
		if ex := s.Plans[st.QueryID]; ex != nil {
			f.Evidence = append(f.Evidence, model.Evidence{Label: "LockRows nodes in the plan", Value: float64(lockRows(ex))})
		}
		reason := "a race needs concurrent writers and pgmedic does not write to a target; `pgmedic lab run queue-claim-race` reproduces it and counts the rows claimed twice"
		switch {
		case c.Lock == sqlparse.LockNone && sh.Command != "SELECT":
			f.Severity = model.Warning
			if waits > 0 || st.Calls >= 1000 {
				f.Severity = model.Critical
			}
			f.Title = fmt.Sprintf("queue claim on %s picks rows without locking them: concurrent workers claim the same rows", table)
			f.Impact = model.Impact{Summary: "duplicate work: two workers that poll at the same moment both update (and process) the same rows; the second one also waits for the first one's row locks", Share: share}
			f.Fix.Summary = "lock the picked rows with FOR UPDATE SKIP LOCKED in the subquery, so each worker takes rows no other worker holds"
		default:
			f.Severity = model.Info
			if waits > 0 {
				f.Severity = model.Warning
			}
			f.Title = fmt.Sprintf("queue claim on %s locks rows with %s and waits: workers queue behind each other", table, c.Lock)
			f.Impact = model.Impact{Summary: fmt.Sprintf("correct, but each worker blocks until the worker ahead of it commits (%d lock waits sampled)", waits), Share: share}
			f.Fix.Summary = "add SKIP LOCKED so that workers pass over rows another worker holds instead of waiting"
			reason = "serialisation shows as lock waits; pgmedic samples them but does not start concurrent writers on a target"
		}
		f.Verification = model.Verification{Status: model.NotRun, Method: "parse tree of the statement; plan inspection; pg_stat_activity lock-wait samples", Reason: reason}
		if c.Lock == sqlparse.LockNone && sh.Command != "SELECT" && c.Rewrite != "" {
			// The race itself runs where pgmedic may write: a twin or the lab.
			f.Experiment = &model.Experiment{Kind: model.ExpClaimRace, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID,
				Role: st.Role, Calls: st.Calls, Rows: st.Rows, Table: c.Table, Rewrite: c.Rewrite}
		}
		out = append(out, f)
	}
	return out, nil
}

func lockRows(ex *plan.Explain) int {
	n := 0
	ex.Plan.Walk(func(x, _ *plan.Node) {
		if x.NodeType == "LockRows" {
			n++
		}
	})
	return n
}
