package report

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Document is what the HTML and Markdown renderers draw: the reports of
// one command (one part), or of the demo (a part per scenario). Its JSON,
// embedded in the HTML page, is the data block the page's charts read:
// each part holds the same JSON its command prints with --format json.
type Document struct {
	PGMedic string `json:"pgmedic"`
	Title   string `json:"title"`
	Parts   []Part `json:"parts"`
}

// Part is one command's report; exactly one of the pointers is set.
type Part struct {
	Name    string         `json:"name,omitempty"` // the scenario, in the demo
	Note    string         `json:"note,omitempty"` // what the demo checked of it
	Check   *Report        `json:"check,omitempty"`
	Plan    *PlanReport    `json:"plan,omitempty"`
	Compare *CompareReport `json:"compare,omitempty"`
	Logs    *LogsReport    `json:"logs,omitempty"`
	Profile *ProfileReport `json:"profile,omitempty"`
	Replay  *ReplayReport  `json:"replay,omitempty"`
}

// Document is the report as a one-part document.
func (r *Report) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic check " + r.Target.String(), Parts: []Part{{Check: r}}}
}

// Document is the plan report as a one-part document.
func (r *PlanReport) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic explain " + r.Source, Parts: []Part{{Plan: r}}}
}

// Document is the comparison as a one-part document.
func (r *CompareReport) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic explain --compare " + r.A + " " + r.B, Parts: []Part{{Compare: r}}}
}

// Document is the logs report as a one-part document.
func (r *LogsReport) Document() *Document {
	var names []string
	for _, f := range r.Summary.Files {
		names = append(names, f.Name)
	}
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic logs " + strings.Join(names, " "), Parts: []Part{{Logs: r}}}
}

// dataBlock is the document's JSON for the page. encoding/json writes <,
// > and & as \u escapes, so no text in it can close the script element
// that holds it.
func (d *Document) dataBlock() (string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

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
	// PlanShape is the generic plan's nodes, outermost first ("Limit(Index
	// Scan using jobs_poll on public.jobs)"), when check planned it.
	PlanShape string `json:"plan_shape,omitempty"`
	// JITShare is JIT's share of the statement's execution time.
	JITShare float64 `json:"jit_share"`
	HasPlan  bool    `json:"has_plan,omitempty"`
}

// StatementsOf lists the snapshot's statements, the most total time
// first, with the plans check read (generic plans, from EXPLAIN without
// ANALYZE) keyed by queryid.
func StatementsOf(snap *model.Snapshot) ([]StatementRow, map[string]*PlanSummary) {
	rows := make([]StatementRow, 0, len(snap.Statements))
	plans := map[string]*PlanSummary{}
	for _, st := range snap.Statements {
		id := strconv.FormatInt(st.QueryID, 10)
		r := StatementRow{QueryID: id, Query: st.Query, Role: st.Role, Calls: st.Calls, TotalMS: model.Round(st.TotalExecMS, 3)}
		if r.Fingerprint = st.Fingerprint; r.Fingerprint == "" {
			r.Fingerprint, _ = sqlparse.Fingerprint(st.Query)
		}
		if st.Calls > 0 {
			r.MeanMS = model.Round(st.TotalExecMS/float64(st.Calls), 3)
			r.RowsPerCall = model.Round(float64(st.Rows)/float64(st.Calls), 2)
			r.BuffersPerCall = model.Round(float64(st.SharedBlksHit+st.SharedBlksRead)/float64(st.Calls), 1)
		}
		if st.TotalExecMS > 0 {
			r.JITShare = model.Round(min(1, st.JIT.TotalMS()/st.TotalExecMS), 4)
		}
		if e := snap.Plans[st.QueryID]; e != nil {
			p := flattenPlan(e)
			plans[id] = &p
			r.HasPlan = true
			r.PlanShape = PlanShape(e)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].TotalMS > rows[j].TotalMS })
	return rows, plans
}

// Worst is the most severe finding (the exit code's).
func (r *LogsReport) Worst() model.Severity { return worstOf(r.Findings) }

// planTree is a plan's flat rows nested again, for the page.
type planTree struct {
	Row  NodeRow
	Kids []*planTree
}

// treeOf nests a plan summary's rows by their parent ids (p is a
// PlanSummary or a pointer to one).
func treeOf(v any) *planTree {
	var p *PlanSummary
	switch x := v.(type) {
	case PlanSummary:
		p = &x
	case *PlanSummary:
		p = x
	}
	if p == nil {
		return nil
	}
	byID := map[int]*planTree{}
	var root *planTree
	for _, n := range p.Nodes {
		t := &planTree{Row: n}
		byID[n.ID] = t
		if parent := byID[n.Parent]; parent != nil && n.Parent != n.ID {
			parent.Kids = append(parent.Kids, t)
		} else if root == nil {
			root = t
		}
	}
	return root
}

// PlanShape writes a plan's nodes as one line, outermost first, children
// in parentheses: what changed when a statement got another plan, without
// its costs and row counts.
func PlanShape(e *plan.Explain) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	var rec func(n *plan.Node)
	rec = func(n *plan.Node) {
		b.WriteString(n.Label())
		if len(n.Plans) == 0 {
			return
		}
		b.WriteString("(")
		for i := range n.Plans {
			if i > 0 {
				b.WriteString(", ")
			}
			rec(&n.Plans[i])
		}
		b.WriteString(")")
	}
	rec(&e.Plan)
	return b.String()
}
