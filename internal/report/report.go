// Package report renders what the commands found: check, explain (one plan
// or two compared), logs, profile and the demo. Each has a report value
// that writes itself as text and JSON; a Document made of them feeds the
// HTML page and Markdown. Nothing here reads a database or runs a rule.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Report is the top-level JSON document of `pgmedic check`.
type Report struct {
	PGMedic     string       `json:"pgmedic"`
	Target      model.Target `json:"target"`
	CollectedAt time.Time    `json:"collected_at"`
	// Unseen is what check could not see: it heads the report, and with
	// nothing else found it is not the all-clear.
	Unseen   []model.Unseen  `json:"unseen,omitempty"`
	Findings []model.Finding `json:"findings"`
	Skipped  []model.Skip    `json:"skipped"`
	Summary  Summary         `json:"summary"`
	// Sessions is what check --sample saw; absent when it did not sample.
	// Timeline is the same ticks over time (with an incident's triggers,
	// judged stretch and gaps, for check --from), the page's first picture.
	Sessions *model.Sessions `json:"sessions,omitempty"`
	Timeline *model.Timeline `json:"timeline,omitempty"`
	// ElapsedS is how long the check ran; Envelope the session settings
	// it ran under.
	ElapsedS float64  `json:"elapsed_s,omitempty"`
	Envelope []string `json:"envelope,omitempty"`
	// Statements are the statements check read, the most total time
	// first, and Plans the plans it read of them, by queryid.
	Statements []model.StatementRow  `json:"statements,omitempty"`
	Plans      map[string]*plan.Flat `json:"plans,omitempty"`
	// Profile is check --profile's CPU profile of the busiest backends.
	Profile *ProfileReport `json:"profile,omitempty"`
	// Twin says what check --twin copied, from where, and what it cost.
	Twin string `json:"twin,omitempty"`
	// Baseline is the comparison with an earlier report (check --baseline).
	Baseline *baseline.Diff `json:"baseline,omitempty"`
	// Incident is the watch incident a check --from BUNDLE read.
	Incident *IncidentHeader `json:"incident,omitempty"`
}

// IncidentHeader says which incident of pgmedic watch a report is of.
type IncidentHeader struct {
	Bundle   string    `json:"bundle"`
	Triggers []string  `json:"triggers"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// Gaps are the stretches of the window watch was not connected (a
	// restart, an outage): nothing was sampled there.
	Gaps []string `json:"gaps,omitempty"`
}

// Summary counts findings by severity and verification status.
type Summary struct {
	Critical    int `json:"critical"`
	Warning     int `json:"warning"`
	Info        int `json:"info"`
	Confirmed   int `json:"confirmed"`
	Refuted     int `json:"refuted"`
	Estimated   int `json:"estimated"`
	NotRun      int `json:"not_run"`
	RulesRun    int `json:"rules_run"`
	RulesActive int `json:"rules_with_findings"`
}

// New builds a report, keeping findings at or above min.
func New(version string, target model.Target, at time.Time, findings []model.Finding, skipped []model.Skip, rulesRun int, min model.Severity) *Report {
	r := &Report{PGMedic: version, Target: target, CollectedAt: at.UTC(), Findings: []model.Finding{}, Skipped: skipped}
	if r.Skipped == nil {
		r.Skipped = []model.Skip{}
	}
	r.Summary = summarize(findings, rulesRun)
	for _, f := range findings {
		f.Clamp()
		if f.Severity >= min {
			r.Findings = append(r.Findings, f)
		}
	}
	return r
}

// summarize counts findings by severity and verification status.
func summarize(findings []model.Finding, rulesRun int) Summary {
	var s Summary
	active := map[string]bool{}
	for _, f := range findings {
		switch f.Severity {
		case model.Critical:
			s.Critical++
		case model.Warning:
			s.Warning++
		default:
			s.Info++
		}
		switch f.Verification.Status {
		case model.Confirmed:
			s.Confirmed++
		case model.Refuted:
			s.Refuted++
		case model.Estimated:
			s.Estimated++
		default:
			s.NotRun++
		}
		active[f.Rule] = true
	}
	s.RulesRun, s.RulesActive = rulesRun, len(active)
	return s
}

// Filter returns a copy of the report keeping findings at or above min; the
// summary still counts every finding.
func (r *Report) Filter(min model.Severity) *Report {
	c := *r
	c.Findings = []model.Finding{}
	for _, f := range r.Findings {
		if f.Severity >= min {
			c.Findings = append(c.Findings, f)
		}
	}
	return &c
}

// Add appends findings found after the report was made (the statements a
// scenario also runs through explain) and counts them in the summary.
func (r *Report) Add(fs []model.Finding) {
	for _, f := range fs {
		f.Clamp()
		r.Findings = append(r.Findings, f)
	}
	r.Summary = summarize(r.Findings, r.Summary.RulesRun)
}

// Incomplete says check could not see enough of the database to call it
// healthy (see model.Unseen.Blocks).
func (r *Report) Incomplete() bool {
	for _, u := range r.Unseen {
		if u.Blocks {
			return true
		}
	}
	return false
}

// UnseenText is one line for what check could not see: how many, and
// their part of the statement time when known.
func UnseenText(u model.Unseen) string {
	s := u.What
	if u.Count > 0 {
		s = fmt.Sprintf("%d %s", u.Count, u.What)
	}
	if u.Share >= 0 {
		s += fmt.Sprintf(": %s of the statement time", percent(u.Share))
	}
	return s
}

// percent is a share as a whole percentage, or "<1%" for a small one.
func percent(x float64) string {
	if x > 0 && x < 0.005 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// Worst is the highest severity among the reported findings, or -1.
func (r *Report) Worst() model.Severity { return worstOf(r.Findings) }

// worstOf is the highest severity among findings (-1 when none).
func worstOf(fs []model.Finding) model.Severity {
	w := model.Severity(-1)
	for _, f := range fs {
		w = max(w, f.Severity)
	}
	return w
}

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error { return writeJSON(w, r) }

// writeJSON writes v as indented JSON, the form of every pgmedic document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Text writes the report for a person: findings grouped by severity, each
// with its evidence, the fix as SQL to paste, and the measured proof.
func (r *Report) Text(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "pgmedic %s — %s (PostgreSQL %s), %s\n", r.PGMedic, safe(r.Target.String()), safe(r.Target.ServerVersion), r.CollectedAt.Format(time.RFC3339))
	if len(r.Unseen) > 0 {
		b.WriteString("\npgmedic could not see all of this database; what follows covers only what it saw:\n")
		for _, u := range r.Unseen {
			fmt.Fprintf(b, "  - %s\n    fix: %s\n", safe(UnseenText(u)), safe(u.Fix))
		}
	}
	if r.Incident != nil {
		fmt.Fprintf(b, "\nIncident %s, %s to %s: %s\n", safe(r.Incident.Bundle), r.Incident.From.Format(time.RFC3339), r.Incident.To.Format(time.RFC3339), safe(strings.Join(r.Incident.Triggers, "; ")))
		for _, g := range r.Incident.Gaps {
			fmt.Fprintf(b, "  GAP: %s; nothing was sampled then\n", safe(g))
		}
	}
	if r.Baseline != nil {
		baselineText(b, r.Baseline)
	}
	if len(r.Findings) == 0 {
		if r.Incomplete() {
			b.WriteString("\nNo findings at the requested severity in what pgmedic could see: this is not an all-clear (exit code 4).\n")
		} else {
			b.WriteString("\nNo findings at the requested severity.\n")
		}
	}
	for _, sev := range []model.Severity{model.Critical, model.Warning, model.Info} {
		first := true
		for _, f := range r.Findings {
			if f.Severity != sev {
				continue
			}
			if first {
				fmt.Fprintf(b, "\n== %s ==\n", strings.ToUpper(sev.String()))
				first = false
			}
			writeFinding(b, f)
		}
	}
	sessionsText(b, r.Sessions)
	if r.Twin != "" {
		fmt.Fprintf(b, "\n== TWIN ==\n  %s\n", safe(r.Twin))
	}
	if len(r.Skipped) > 0 {
		b.WriteString("\n== SKIPPED ==\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(b, "  %-22s %s\n", safe(s.Rule), safe(s.Reason))
			if s.Fix != "" {
				fmt.Fprintf(b, "  %-22s fix: %s\n", "", safe(s.Fix))
			}
		}
	}
	s := r.Summary
	fmt.Fprintf(b, "\nSummary: %d critical, %d warning, %d info; %d confirmed, %d refuted, %d not verified; %d rules run, %d skipped entries\n",
		s.Critical, s.Warning, s.Info, s.Confirmed, s.Refuted, s.NotRun+s.Estimated, s.RulesRun, len(r.Skipped))
	_, err := io.WriteString(w, b.String())
	return err
}

// FindingsText writes the findings by severity and the skipped entries,
// without the report's header and summary (for reports that embed them).
func (r *Report) FindingsText(w io.Writer) error {
	b := &strings.Builder{}
	for _, sev := range []model.Severity{model.Critical, model.Warning, model.Info} {
		for _, f := range r.Findings {
			if f.Severity == sev {
				writeFinding(b, f)
			}
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(b, "  skipped %s: %s (%s)\n", safe(s.Rule), safe(s.Reason), safe(s.Fix))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// safe is the one escaping every text report applies to what came from a
// database or a file: control characters are shown, never sent.
func safe(s string) string { return printable.String(s) }

// writeFinding prints one finding: title, object, evidence, impact, fix
// and verification.
func writeFinding(b *strings.Builder, f model.Finding) {
	fmt.Fprintf(b, "\n[%s] %s  (id %s)\n", safe(f.Rule), safe(f.Title), safe(f.ID))
	obj := f.Object.Kind + "  " + f.Object.Name
	if f.Object.QueryID != "" {
		obj += "  (queryid " + f.Object.QueryID + ")"
	}
	if f.Object.Role != "" {
		obj += "  role " + f.Object.Role
	}
	fmt.Fprintf(b, "  %-9s %s\n", "object", safe(obj))
	for i, ev := range f.Evidence {
		label := ""
		if i == 0 {
			label = "evidence"
		}
		fmt.Fprintf(b, "  %-9s %s\n", label, safe(evidenceText(ev)))
	}
	if f.Impact.Summary != "" {
		fmt.Fprintf(b, "  %-9s %s\n", "impact", safe(f.Impact.Summary))
	}
	if f.Fix.Summary != "" {
		fmt.Fprintf(b, "  %-9s %s\n", "fix", safe(f.Fix.Summary))
	}
	// The SQL keeps its own line breaks (one statement per line); the
	// identifiers in it never hold one (sqlparse.QuoteIdent escapes them).
	for _, line := range printable.Lines(f.Fix.SQL) {
		if line != "" {
			fmt.Fprintf(b, "  %-9s   %s\n", "", line)
		}
	}
	fmt.Fprintf(b, "  %-9s %s\n", "verified", safe(verificationText(f.Verification)))
	fmt.Fprintf(b, "  %-9s %s\n", "docs", safe(f.Docs))
}

func evidenceText(ev model.Evidence) string {
	if ev.Fact {
		return ev.Label // a labelled fact, e.g. "jit = on (default)"
	}
	return fmt.Sprintf("%s: %s%s", ev.Label, num(ev.Value), unitSuffix(ev.Unit))
}

func unitSuffix(u string) string {
	switch u {
	case "":
		return ""
	case "%":
		return "%"
	}
	return " " + u
}

// num prints a figure compactly: whole numbers and figures from 100 on
// without decimals, two decimals below, three digits and an exponent from
// 1e15.
func num(v float64) string {
	if math.Abs(v) >= 1e15 {
		return fmt.Sprintf("%.3g", math.Min(math.Max(v, -math.MaxFloat64), math.MaxFloat64))
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// shownParameters is how many re-run values the text report lists; a
// driver's catalog query can have dozens, which the JSON report keeps.
const shownParameters = 3

// parametersText lists the first re-run values.
func parametersText(ps []string) string {
	if len(ps) == 0 {
		return ""
	}
	s := "; parameters: " + strings.Join(ps[:min(len(ps), shownParameters)], ", ")
	if len(ps) > shownParameters {
		s += fmt.Sprintf(" and %d more (in the JSON report)", len(ps)-shownParameters)
	}
	return s
}

// verificationText is the verdict line: status, before and after, method.
func verificationText(v model.Verification) string {
	switch {
	case v.Before != nil && v.After != nil:
		ratio := ""
		if g := v.Gain(); math.IsInf(g, 1) {
			ratio = " (from none)"
		} else if g > 0 {
			ratio = fmt.Sprintf(" (%.1fx)", g)
		}
		return fmt.Sprintf("%s%s: %s %s -> %s %s%s — %s%s", v.Status, whereText(v), num(v.Before.Value), v.Before.Unit, num(v.After.Value), v.After.Unit, ratio, v.Method, parametersText(v.Parameters))
	case v.Reason != "":
		return v.Status + whereText(v) + ": " + v.Reason
	}
	return v.Status + whereText(v)
}

func whereText(v model.Verification) string {
	if v.Where == "" {
		return ""
	}
	return " on the " + v.Where
}
