package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// baselineLines is the comparison for a person, line by line: the counts,
// then the new and resolved findings and the statements that moved.
// Persisting findings are counted, not listed: the report lists them.
func baselineLines(d *baseline.Diff) []string {
	c := d.Counts
	out := []string{fmt.Sprintf("against %s (%s): %d new, %d persisting, %d resolved; statements: %d slower (%d regressions), %d faster",
		d.Baseline, d.BaselineAt.Format(time.RFC3339), c.New, c.Persisting, c.Resolved, c.Slower, c.Regressions, c.Faster)}
	for _, ch := range d.Findings {
		if ch.Status == baseline.StatusPersisting && ch.Was == "" {
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
		case s.Verdict == baseline.Slower && s.Regression && s.Measured:
			verdict = "REGRESSION"
		case s.Verdict == baseline.Slower && s.Regression:
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
		if s.Verdict == baseline.Slower && s.Regression && !s.Measured {
			out = append(out, "             not re-run: judged on the two reports' figures")
		}
	}
	return out
}

// baselineText writes the comparison at the head of a check's text report.
func baselineText(b *strings.Builder, d *baseline.Diff) {
	b.WriteString("\n== BASELINE ==\n")
	for _, l := range baselineLines(d) {
		b.WriteString("  " + safe(l) + "\n")
	}
}

// baselineMarkdown writes the comparison for a pull-request comment: what is new
// first, as a reviewer reads it.
func baselineMarkdown(b *strings.Builder, d *baseline.Diff) {
	c := d.Counts
	fmt.Fprintf(b, "**Against the baseline** `%s` (%s): **%d new**, %d persisting, %d resolved · statements: **%d regressions**, %d slower, %d faster\n\n",
		mdCode(d.Baseline), d.BaselineAt.Format("2006-01-02 15:04 MST"), c.New, c.Persisting, c.Resolved, c.Regressions, c.Slower, c.Faster)
	rows := 0
	for _, ch := range d.Findings {
		if ch.Status == baseline.StatusPersisting && ch.Was == "" {
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
			if s.Verdict == baseline.Slower && s.Regression {
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
