package capture

import (
	"slices"
	"sort"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Stats is what the log holds for a replay.
type Stats struct {
	Sessions     int `json:"sessions"`
	Statements   int `json:"statements"`
	Transactions int `json:"transactions"`
	Extended     int `json:"extended_protocol"`
	// Failed is every statement that failed at capture, as the
	// application saw it; FailedLeftOut those of them the replay leaves
	// out (the log kept no values for them).
	Failed        int            `json:"failed_at_capture"`
	FailedLeftOut int            `json:"failed_left_out,omitempty"`
	Shapes        int            `json:"shapes"`
	DurationS     float64        `json:"duration_s"`
	Start         string         `json:"start"`
	Databases     map[string]int `json:"databases"`
	Skipped       []Skip         `json:"not_replayable"`
	Notes         []string       `json:"notes,omitempty"`
	Files         []FileLine     `json:"files"`
	// Top are the busiest shapes by statements, for a dry run.
	Top []ShapeCount `json:"top_shapes"`
}

// FileLine is one log file as read.
type FileLine struct {
	Name         string `json:"name"`
	Format       string `json:"format"`
	Prefix       string `json:"prefix,omitempty"`
	Lines        int64  `json:"lines"`
	Unrecognised int64  `json:"unrecognised_lines"`
}

// ShapeCount is a statement shape and how often the capture sent it.
type ShapeCount struct {
	Query string `json:"query"`
	Count int    `json:"count"`
}

// Stats summarises the workload for a report.
func (w *Workload) Stats() Stats {
	c := Stats{Sessions: len(w.Sessions), Statements: w.Statements, Transactions: w.Transactions, Extended: w.Extended,
		Failed: w.Failed, Shapes: len(w.Shapes), DurationS: model.Round(w.Duration.Seconds(), 2), Databases: w.Databases,
		Skipped: w.Skipped, Notes: w.Notes, Start: w.Start.Format("2006-01-02 15:04:05.000 MST")}
	for _, sk := range w.Skipped {
		if sk.Reason == skipNoParams {
			c.FailedLeftOut += sk.Count
		}
	}
	c.Failed += c.FailedLeftOut
	if c.Skipped == nil {
		c.Skipped = []Skip{}
	}
	for _, f := range w.Files {
		c.Files = append(c.Files, FileLine{Name: f.Name, Format: string(f.Format), Prefix: f.Prefix, Lines: f.Lines, Unrecognised: f.Unrecognised})
	}
	counts := make([]int, len(w.Shapes))
	for _, s := range w.Sessions {
		for _, st := range s.Statements {
			counts[st.Shape]++
		}
	}
	for i, n := range counts {
		if n > 0 {
			c.Top = append(c.Top, ShapeCount{Query: w.Shapes[i].Query, Count: n})
		}
	}
	sort.SliceStable(c.Top, func(i, j int) bool { return c.Top[i].Count > c.Top[j].Count })
	if len(c.Top) > 10 {
		c.Top = c.Top[:10]
	}
	return c
}

// Users are the roles the captured sessions logged in as, in the order
// they first appear.
func (w *Workload) Users() []string {
	var us []string
	for _, s := range w.Sessions {
		if s.User != "" && !slices.Contains(us, s.User) {
			us = append(us, s.User)
		}
	}
	return us
}
