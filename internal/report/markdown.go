package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Markdown writes the document as a compact summary for a pull-request
// comment or a ticket: counts, a table of the findings, then each
// finding's fix and verification figures. Plain Markdown: tables and code
// blocks, no HTML.
func Markdown(w io.Writer, d *Document) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "## pgmedic: %s\n\n", mdText(d.Title))
	for i, p := range d.Parts {
		v := viewOf(i, p)
		if p.Name != "" {
			fmt.Fprintf(b, "### %s\n\n", mdText(p.Name))
			if p.Note != "" {
				fmt.Fprintf(b, "%s\n\n", mdText(p.Note))
			}
		}
		if p.Compare != nil {
			mdCompare(b, p.Compare)
			continue
		}
		if p.Replay != nil {
			p.Replay.markdown(b)
			continue
		}
		if p.Rehearsal != nil {
			p.Rehearsal.markdown(b)
			continue
		}
		if p.Upgrade != nil {
			p.Upgrade.markdown(b)
			continue
		}
		mdHeader(b, p)
		if p.Check != nil && p.Check.Baseline != nil {
			baselineMarkdown(b, p.Check.Baseline)
		}
		s := v.Summary
		fmt.Fprintf(b, "**%d critical, %d warning, %d info** · %d confirmed, %d refuted, %d estimated, %d not run\n\n",
			s.Critical, s.Warning, s.Info, s.Confirmed, s.Refuted, s.Estimated, s.NotRun)
		mdFindings(b, v.Findings)
		if p.Check != nil && p.Check.Twin != "" {
			fmt.Fprintf(b, "%s\n\n", mdText(p.Check.Twin))
		}
		mdSkipped(b, v.Skipped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdHeader says what the part is about: the check's target (and what it
// could not see), the plan, the profile or the logs.
func mdHeader(b *strings.Builder, p Part) {
	switch {
	case p.Check != nil:
		c := p.Check
		fmt.Fprintf(b, "Target `%s`, PostgreSQL %s, %s", mdCode(c.Target.String()), mdText(c.Target.ServerVersion), c.CollectedAt.Format("2006-01-02 15:04 MST"))
		if c.ElapsedS > 0 {
			fmt.Fprintf(b, ", ran %.1f s", c.ElapsedS)
		}
		b.WriteString(".\n\n")
		if c.Incident != nil {
			fmt.Fprintf(b, "Incident `%s`, %s to %s: %s.\n\n", mdCode(c.Incident.Bundle), c.Incident.From.Format("15:04:05"), c.Incident.To.Format("15:04:05 MST"), mdText(strings.Join(c.Incident.Triggers, "; ")))
			for _, g := range c.Incident.Gaps {
				fmt.Fprintf(b, "- **gap**: %s; nothing was sampled then\n", mdText(g))
			}
			if len(c.Incident.Gaps) > 0 {
				b.WriteString("\n")
			}
		}
		if len(c.Unseen) > 0 {
			b.WriteString("**pgmedic could not see all of this database; what follows covers only what it saw:**\n\n")
			for _, u := range c.Unseen {
				fmt.Fprintf(b, "- %s (fix: `%s`)\n", mdCell(UnseenText(u)), mdCode(u.Fix))
			}
			b.WriteString("\n")
		}
	case p.Plan != nil:
		fmt.Fprintf(b, "Plan `%s`: execution %s, planning %s.\n\n", mdCode(p.Plan.Source), printable.PlanMS(p.Plan.Plan.ExecutionMS), printable.PlanMS(p.Plan.Plan.PlanningMS))
	case p.Profile != nil:
		r := p.Profile
		fmt.Fprintf(b, "Profile of %s: %d samples in %.1f s.\n\n", mdText(r.Target), r.Samples, r.Seconds)
		if len(r.Kinds) > 0 {
			b.WriteString("| share | kind | hottest frames |\n|--:|---|---|\n")
			for _, k := range r.Kinds {
				fmt.Fprintf(b, "| %.1f%% | %s | %s |\n", 100*k.Share, mdCell(k.Name), mdCell(strings.Join(k.Frames, ", ")))
			}
			b.WriteString("\n")
		}
	case p.Logs != nil:
		fmt.Fprintf(b, "%d statements by fingerprint, %d kinds of errors", len(p.Logs.Statements), len(p.Logs.Errors))
		if !p.Logs.First.IsZero() {
			fmt.Fprintf(b, ", from %s to %s", p.Logs.First.Format("2006-01-02 15:04"), p.Logs.Last.Format("2006-01-02 15:04 MST"))
		}
		b.WriteString(".\n\n")
	}
}

// mdCompare is a plan comparison's table.
func mdCompare(b *strings.Builder, c *CompareReport) {
	fmt.Fprintf(b, "**%s**\n\n| A | B | change (%s) | what changed |\n|---|---|--:|---|\n", mdText(c.Summary), c.Unit)
	for _, r := range c.Pairs {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdCell(r.A), mdCell(r.B), num(r.Delta), mdCell(strings.Join(r.Changes, "; ")))
	}
	b.WriteString("\n")
}

// mdFindings is the findings' table, then each finding with its fix.
func mdFindings(b *strings.Builder, findings []model.Finding) {
	if len(findings) == 0 {
		b.WriteString("No findings at the severity shown.\n\n")
		return
	}
	b.WriteString("| severity | rule | finding | verified |\n|---|---|---|---|\n")
	for _, f := range findings {
		fmt.Fprintf(b, "| %s | `%s` | %s | %s |\n", f.Severity, f.Rule, mdCell(f.Title), mdCell(verifiedShort(f.Verification)))
	}
	b.WriteString("\n")
	for _, f := range findings {
		fmt.Fprintf(b, "#### %s `%s`: %s\n\n", f.Severity, f.Rule, mdText(f.Title))
		if f.Object.Name != "" {
			fmt.Fprintf(b, "%s: `%s`\n\n", mdText(f.Object.Kind), mdCode(printable.Clip(f.Object.Name, 200)))
		}
		if f.Impact.Summary != "" {
			fmt.Fprintf(b, "%s\n\n", mdText(f.Impact.Summary))
		}
		fmt.Fprintf(b, "**Fix.** %s\n\n", mdText(f.Fix.Summary))
		if f.Fix.SQL != "" {
			fmt.Fprintf(b, "%s\n", fence("sql", f.Fix.SQL))
		}
		fmt.Fprintf(b, "**Verified:** %s\n\n", mdText(verificationText(f.Verification)))
	}
}

// mdSkipped lists what did not run and the fix.
func mdSkipped(b *strings.Builder, skipped []model.Skip) {
	if len(skipped) == 0 {
		return
	}
	fmt.Fprintf(b, "Skipped (%d):\n\n", len(skipped))
	for _, sk := range skipped {
		fmt.Fprintf(b, "- `%s`: %s", mdCode(sk.Rule), mdText(sk.Reason))
		if sk.Fix != "" {
			fmt.Fprintf(b, " Fix: %s", mdText(sk.Fix))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// verifiedShort is the verification in a table cell: the status and,
// when measured, before → after.
func verifiedShort(v model.Verification) string {
	if v.Before != nil && v.After != nil {
		return fmt.Sprintf("%s: %s%s → %s%s", v.Status, num(v.Before.Value), unitSuffix(v.Before.Unit), num(v.After.Value), unitSuffix(v.After.Unit))
	}
	return v.Status
}

// mdText is a text for Markdown: control characters shown, line breaks
// folded, and the characters that would start markup or HTML escaped.
func mdText(s string) string {
	s = strings.Join(strings.Fields(pageText(s)), " ")
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "<", "&lt;", ">", "&gt;", "[", `\[`, "]", `\]`, "|", `\|`, "#", `\#`)
	return r.Replace(s)
}

// mdCell is mdText for a table cell.
func mdCell(s string) string { return mdText(printable.Clip(s, 300)) }

// mdCode is a text inside `...`: backticks cannot be escaped there, so
// they become quotes; control characters are shown.
func mdCode(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(pageText(s)), " "), "`", "'")
}

// fence is a fenced code block long enough that the text cannot close it.
func fence(lang, s string) string {
	s = pageText(s)
	f := "```"
	for strings.Contains(s, f) {
		f += "`"
	}
	return f + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + f + "\n"
}
