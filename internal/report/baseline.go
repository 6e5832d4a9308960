package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Finding statuses.
const (
	StatusNew        = "NEW"
	StatusPersisting = "PERSISTING"
	StatusResolved   = "RESOLVED"
)

// Statement verdicts.
const (
	Slower  = "slower"
	Faster  = "faster"
	Changed = "changed"
)

// FindingChange is one finding's status between the baseline and now.
type FindingChange struct {
	Status  string        `json:"status"`
	Finding model.Finding `json:"finding"`
	// Was is the finding's severity in the baseline, for a persisting one
	// whose severity changed.
	Was string `json:"was_severity,omitempty"`
}

// Figures are one side's figures of a statement.
type Figures struct {
	Calls          int64   `json:"calls"`
	MeanMS         float64 `json:"mean_ms"`
	BuffersPerCall float64 `json:"buffers_per_call"`
	RowsPerCall    float64 `json:"rows_per_call"`
	Plan           string  `json:"plan,omitempty"`
}

// StatementChange is a statement whose figures moved between the two
// reports.
type StatementChange struct {
	Fingerprint string  `json:"fingerprint"`
	QueryID     string  `json:"queryid"`
	Query       string  `json:"query"`
	Role        string  `json:"role,omitempty"`
	Verdict     string  `json:"verdict"`
	Before      Figures `json:"before"`
	After       Figures `json:"after"`
	// Ratio is the mean per call now over the baseline's.
	Ratio   float64  `json:"ratio"`
	Reasons []string `json:"reasons"`
	// Remeasured is the statement run again now (and with the baseline's
	// plan when settings bring it back); nil when nothing was run.
	Remeasured *model.Remeasured `json:"remeasured,omitempty"`
	// Regression says the slowdown stands: re-measured, or from the two
	// reports' figures alone where it could not be run again (Measured
	// false). A slowdown the re-run does not reproduce is not one.
	Regression bool `json:"regression"`
	Measured   bool `json:"measured"`
	// Note says what the re-run showed when it overturned the figures.
	Note string `json:"note,omitempty"`
}

// BaselineDiff is check --baseline's comparison of a check with an
// earlier report (see package baseline).
type BaselineDiff struct {
	Baseline   string            `json:"baseline"`
	BaselineAt time.Time         `json:"baseline_collected_at"`
	Findings   []FindingChange   `json:"findings"`
	Statements []StatementChange `json:"statements"`
	Counts     BaselineCounts    `json:"counts"`
}

// BaselineCounts sums the diff up.
type BaselineCounts struct {
	New         int `json:"new"`
	Persisting  int `json:"persisting"`
	Resolved    int `json:"resolved"`
	Slower      int `json:"slower"`
	Regressions int `json:"regressions"`
	Faster      int `json:"faster"`
}

// lines is the comparison for a person, line by line: the counts,
// then the new and resolved findings and the statements that moved.
// Persisting findings are counted, not listed: the report lists them.
func (d *BaselineDiff) lines() []string {
	c := d.Counts
	out := []string{fmt.Sprintf("against %s (%s): %d new, %d persisting, %d resolved; statements: %d slower (%d regressions), %d faster",
		d.Baseline, d.BaselineAt.Format(time.RFC3339), c.New, c.Persisting, c.Resolved, c.Slower, c.Regressions, c.Faster)}
	for _, ch := range d.Findings {
		if ch.Status == StatusPersisting && ch.Was == "" {
			continue
		}
		line := fmt.Sprintf("%-10s [%s] %s %s  (id %s)", ch.Status, ch.Finding.Rule, ch.Finding.Severity, ch.Finding.Title, ch.Finding.ID)
		if ch.Was != "" {
			line += ", was " + ch.Was
		}
		out = append(out, line)
	}
	for _, s := range d.Statements {
		verdict := strings.ToUpper(s.Verdict)
		switch {
		case s.Verdict == Slower && s.Regression && s.Measured:
			verdict = "REGRESSION"
		case s.Verdict == Slower && s.Regression:
			verdict = "REGRESSION?"
		}
		out = append(out, fmt.Sprintf("%-10s %s", verdict, printable.Clip(s.Query, 100)))
		for _, r := range s.Reasons {
			out = append(out, "             "+r)
		}
		if s.Remeasured != nil {
			out = append(out, "             "+s.Remeasured.String())
		}
		if s.Note != "" {
			out = append(out, "             "+s.Note)
		}
		if s.Verdict == Slower && s.Regression && !s.Measured {
			out = append(out, "             not re-run: judged on the two reports' figures")
		}
	}
	return out
}

// text writes the comparison at the head of a check's text report.
func (d *BaselineDiff) text(b *strings.Builder) {
	b.WriteString("\n== BASELINE ==\n")
	for _, l := range d.lines() {
		b.WriteString("  " + safe(l) + "\n")
	}
}

// markdown writes the comparison for a pull-request comment: what is new
// first, as a reviewer reads it.
func (d *BaselineDiff) markdown(b *strings.Builder) {
	c := d.Counts
	fmt.Fprintf(b, "**Against the baseline** `%s` (%s): **%d new**, %d persisting, %d resolved · statements: **%d regressions**, %d slower, %d faster\n\n",
		mdCode(d.Baseline), d.BaselineAt.Format("2006-01-02 15:04 MST"), c.New, c.Persisting, c.Resolved, c.Regressions, c.Slower, c.Faster)
	rows := 0
	for _, ch := range d.Findings {
		if ch.Status == StatusPersisting && ch.Was == "" {
			continue
		}
		if rows == 0 {
			b.WriteString("| status | severity | rule | finding | id |\n|---|---|---|---|---|\n")
		}
		rows++
		sev := ch.Finding.Severity.String()
		if ch.Was != "" {
			sev = ch.Was + " → " + sev
		}
		fmt.Fprintf(b, "| %s | %s | `%s` | %s | `%s` |\n", ch.Status, sev, ch.Finding.Rule, mdCell(ch.Finding.Title), mdCode(ch.Finding.ID))
	}
	if rows > 0 {
		b.WriteString("\n")
	}
	if len(d.Statements) > 0 {
		b.WriteString("| statement | verdict | what changed |\n|---|---|---|\n")
		for _, s := range d.Statements {
			verdict := s.Verdict
			if s.Verdict == Slower && s.Regression {
				verdict = "**regression**"
				if !s.Measured {
					verdict += " (not re-run)"
				}
			}
			what := strings.Join(s.Reasons, "; ")
			if s.Remeasured != nil {
				what += "; " + s.Remeasured.String()
			}
			if s.Note != "" {
				what += "; " + s.Note
			}
			fmt.Fprintf(b, "| `%s` | %s | %s |\n", mdCode(printable.Clip(s.Query, 80)), verdict, mdCell(what))
		}
		b.WriteString("\n")
	}
}
