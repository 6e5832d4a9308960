package model

import (
	"sort"
	"strconv"

	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// StatementRow is one statement of check's statements table.
type StatementRow struct {
	QueryID string `json:"queryid"`
	// Fingerprint names the statement across servers and databases
	// created again (its queryid hashes table OIDs): check --baseline
	// matches statements by it.
	Fingerprint    string  `json:"fingerprint,omitempty"`
	Query          string  `json:"query"`
	Role           string  `json:"role,omitempty"`
	Calls          int64   `json:"calls"`
	TotalMS        float64 `json:"total_ms"`
	MeanMS         float64 `json:"mean_ms"`
	RowsPerCall    float64 `json:"rows_per_call"`
	BuffersPerCall float64 `json:"buffers_per_call,omitempty"`
	// TempPerCall is the 8 kB blocks written to temporary files per call:
	// a sort or hash that no longer fits work_mem spills with the same
	// plan and the same shared buffers.
	TempPerCall float64 `json:"temp_blocks_per_call,omitempty"`
	// PlanShape is the generic plan's nodes, outermost first ("Limit(Index
	// Scan using jobs_poll on public.jobs)"), when check planned it.
	PlanShape string `json:"plan_shape,omitempty"`
	// JITShare is JIT's share of the statement's execution time.
	JITShare float64 `json:"jit_share"`
	HasPlan  bool    `json:"has_plan,omitempty"`
}

// StatementRows lists the snapshot's statements, the most total time
// first, with the plans check read (generic plans, from EXPLAIN without
// ANALYZE) keyed by queryid.
func (snap *Snapshot) StatementRows() ([]StatementRow, map[string]*plan.Flat) {
	rows := make([]StatementRow, 0, len(snap.Statements))
	plans := map[string]*plan.Flat{}
	for _, st := range snap.Statements {
		id := strconv.FormatInt(st.QueryID, 10)
		r := StatementRow{QueryID: id, Query: st.Query, Role: st.Role, Calls: st.Calls, TotalMS: Round(st.TotalExecMS, 3)}
		if r.Fingerprint = st.Fingerprint; r.Fingerprint == "" {
			r.Fingerprint, _ = sqlparse.Fingerprint(st.Query)
		}
		if st.Calls > 0 {
			r.MeanMS = Round(st.TotalExecMS/float64(st.Calls), 3)
			r.RowsPerCall = Round(float64(st.Rows)/float64(st.Calls), 2)
			r.BuffersPerCall = Round(float64(st.SharedBlksHit+st.SharedBlksRead)/float64(st.Calls), 1)
			r.TempPerCall = Round(float64(st.TempBlksWritten)/float64(st.Calls), 1)
		}
		if st.TotalExecMS > 0 {
			r.JITShare = Round(min(1, st.JIT.TotalMS()/st.TotalExecMS), 4)
		}
		if e := snap.Plans[st.QueryID]; e != nil {
			p := plan.Flatten(e)
			plans[id] = &p
			r.HasPlan = true
			r.PlanShape = plan.Shape(e)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].TotalMS > rows[j].TotalMS })
	return rows, plans
}

// Shown is a sampled statement's text as a report shows it: normalised
// (its literals, the application's values, replaced by $n) unless the
// user asked for values (check --show-values, ShowValues).
func (s *Snapshot) Shown(q string) string {
	if s.ShowValues {
		return q
	}
	return sqlparse.Normalised(q)
}
