package report

import (
	"encoding/json"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
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
	// Rehearsal is `rehearse migration`'s.
	Rehearsal *RehearsalReport `json:"rehearsal,omitempty"`
	// Upgrade is `rehearse upgrade`'s.
	Upgrade *UpgradeReport `json:"upgrade,omitempty"`
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

// Worst is the most severe finding (the exit code's).
func (r *LogsReport) Worst() model.Severity { return worstOf(r.Findings) }

// planTree is a plan's flat rows nested again, for the page.
type planTree struct {
	Row  plan.FlatNode
	Kids []*planTree
}

// treeOf nests a plan summary's rows by their parent ids (p is a
// plan.Flat or a pointer to one).
func treeOf(v any) *planTree {
	var p *plan.Flat
	switch x := v.(type) {
	case plan.Flat:
		p = &x
	case *plan.Flat:
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
