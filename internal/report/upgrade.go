package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/replay"
)

// UpgradeReport is `rehearse upgrade`'s output: what the upgrade changes
// in the settings, the captured workload replayed on both majors with
// replay's verdict per statement shape, each shape's plans, and the
// measured cause of each shape that got slower.
type UpgradeReport struct {
	PGMedic    string                   `json:"pgmedic"`
	From       string                   `json:"from"`
	To         string                   `json:"to"`
	Logs       []string                 `json:"logs"`
	Capture    capture.Stats            `json:"capture"`
	Twins      []string                 `json:"twins"`
	Settings   []rehearse.SettingChange `json:"settings"`
	Comparison *replay.Comparison       `json:"comparison"`
	Shapes     []*rehearse.UpgradeShape `json:"shapes"`
	MinRatio   float64                  `json:"min_ratio"`
	Source     string                   `json:"source,omitempty"`
	// Failing are the shapes that fail the upgrade (exit 1).
	Failing []string `json:"failing,omitempty"`
}

// JSON writes the report as JSON.
func (r *UpgradeReport) JSON(w io.Writer) error { return writeJSON(w, r) }

// Document is the upgrade's rehearsal as a one-part document.
func (r *UpgradeReport) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic rehearse upgrade " + r.From + " to " + r.To, Parts: []Part{{Upgrade: r}}}
}

// Text writes the report for a terminal.
func (r *UpgradeReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "pgmedic %s: rehearse upgrade from PostgreSQL %s to %s\n", r.PGMedic, r.From, r.To)
	r.head(b, "")
	b.WriteString("\n")
	for _, s := range r.Shapes {
		fmt.Fprintf(b, "%s\n", shapeLine(s, r.MinRatio))
		for _, l := range shapeDetails(s) {
			fmt.Fprintf(b, "   %s\n", l)
		}
	}
	if r.Source != "" {
		fmt.Fprintf(b, "\nSource: %s\n", r.Source)
	}
	if len(r.Failing) == 0 {
		fmt.Fprintf(b, "\nVerdict: no statement shape slower by %.2fx or more, none failing only on %s.\n", r.MinRatio, r.To)
	} else {
		fmt.Fprintf(b, "\nVerdict: the upgrade makes the workload slower:\n")
		for _, f := range r.Failing {
			fmt.Fprintf(b, "- %s\n", printable.String(f))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// head says what was rehearsed, and what the upgrade changes in the
// settings.
func (r *UpgradeReport) head(b *strings.Builder, bullet string) {
	for i, t := range r.Twins {
		fmt.Fprintf(b, "%sTwin %s: %s\n", bullet, []string{"A (as is)", "B (upgraded)"}[min(i, 1)], printable.String(t))
	}
	c := r.Capture
	fmt.Fprintf(b, "%sTraffic: %d sessions, %d statements captured over %.1f s (%s), replayed on both, alternating\n", bullet, c.Sessions, c.Statements, c.DurationS, printable.String(strings.Join(r.Logs, ", ")))
	if cm := r.Comparison; cm != nil {
		fmt.Fprintf(b, "%sVerdict of the whole replay: %s", bullet, cm.Verdict)
		if len(cm.Why) > 0 {
			fmt.Fprintf(b, " (%s)", printable.String(strings.Join(cm.Why, "; ")))
		}
		b.WriteString("\n")
	}
	if len(r.Settings) == 0 {
		fmt.Fprintf(b, "%sSettings: the upgrade changes none that plans or runs statements, for this server\n", bullet)
		return
	}
	fmt.Fprintf(b, "%sSettings the upgrade changes for this server:\n", bullet)
	for _, s := range r.Settings {
		line := fmt.Sprintf("%s: %s", s.Name, s.Kind)
		switch {
		case s.Old != "" && s.New != "":
			line += fmt.Sprintf(" (%s -> %s)", s.Old, s.New)
		case s.New != "":
			line += fmt.Sprintf(" (%s on the new major)", s.New)
		case s.Old != "":
			line += fmt.Sprintf(" (the source sets %s)", s.Old)
		}
		if s.Toggle != "" {
			line += "; the old behaviour: " + s.Toggle
		}
		fmt.Fprintf(b, "%s  %s\n", bullet, printable.String(line))
	}
}

// shapeLine is one shape's verdict, ratio and medians.
func shapeLine(s *rehearse.UpgradeShape, minRatio float64) string {
	ch := s.Change
	verdict := ch.Verdict
	if s.Slower(minRatio) {
		verdict = "SLOWER"
	}
	return fmt.Sprintf("%s %.2fx [%.2f-%.2f] median %s -> %s, p99 %s -> %s, errors %d -> %d: %s", verdict, ch.Ratio.Value, ch.Ratio.Low, ch.Ratio.High,
		printable.MS(ch.A.Value), printable.MS(ch.B.Value), printable.MS(ch.AP99), printable.MS(ch.BP99), ch.AErrors, ch.BErrors, printable.Clip(s.Query, 110))
}

// shapeDetails are a shape's plan change and measured cause.
func shapeDetails(s *rehearse.UpgradeShape) []string {
	var out []string
	if s.Change != nil && s.Change.Why != "" {
		out = append(out, "verdict: "+printable.String(s.Change.Why))
	}
	if s.PlanChanged() {
		out = append(out, "plan changed: "+printable.Clip(s.PlanOld, 120)+" -> "+printable.Clip(s.PlanNew, 120))
	}
	c := s.Cause
	rounds := ""
	if c != nil && c.Rounds > 5 {
		rounds = fmt.Sprintf(" (medians of %d rounds: the first five did not decide)", c.Rounds)
	}
	switch {
	case s.CauseError != "":
		out = append(out, "cause not measured: "+printable.String(s.CauseError))
	case c != nil && c.Explains:
		out = append(out, fmt.Sprintf("slower because of %s: %s on the old major, %s on the new, %s on the new with %s%s: fixed by %s (for this application: ALTER ROLE ... %s)",
			c.Setting, printable.MS(c.OldMS), printable.MS(c.NewMS), printable.MS(c.FixedMS), c.Toggle, rounds, c.Toggle, strings.TrimPrefix(c.Toggle, "SET ")))
	case c != nil && !c.Reproduced:
		out = append(out, fmt.Sprintf("the slowdown did not show when its statements were timed one at a time (%s on the old major, %s on the new%s): it came with the workload around it (load, locks, the cache), and no setting is named as its cause", printable.MS(c.OldMS), printable.MS(c.NewMS), rounds))
	case c != nil && c.Toggle != "":
		out = append(out, fmt.Sprintf("no setting the upgrade changes explains it: %s on the old major, %s on the new; the best, %s, gives %s", printable.MS(c.OldMS), printable.MS(c.NewMS), c.Toggle, printable.MS(c.FixedMS)))
	case c != nil:
		out = append(out, fmt.Sprintf("no setting the upgrade changes to try: %s on the old major, %s on the new", printable.MS(c.OldMS), printable.MS(c.NewMS)))
	}
	return out
}

// markdown writes the report for a pull request or a ticket.
func (r *UpgradeReport) markdown(b *strings.Builder) {
	if len(r.Failing) == 0 {
		fmt.Fprintf(b, "**Verdict: nothing slower by %.2fx or more on %s**\n\n", r.MinRatio, mdText(r.To))
	} else {
		b.WriteString("**Verdict: the upgrade makes the workload slower**\n\n")
		for _, f := range r.Failing {
			fmt.Fprintf(b, "- %s\n", mdText(f))
		}
		b.WriteString("\n")
	}
	var head strings.Builder
	r.head(&head, "- ")
	b.WriteString(mdText(head.String()))
	b.WriteString("\n| verdict | B/A [95%] | median A → B | p99 A → B | errors | statement | plan, cause |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Shapes {
		ch := s.Change
		verdict := ch.Verdict
		if s.Slower(r.MinRatio) {
			verdict = "**slower**"
		}
		fmt.Fprintf(b, "| %s | %.2f [%.2f–%.2f] | %s → %s | %s → %s | %d → %d | %s | %s |\n", verdict, ch.Ratio.Value, ch.Ratio.Low, ch.Ratio.High,
			printable.MS(ch.A.Value), printable.MS(ch.B.Value), printable.MS(ch.AP99), printable.MS(ch.BP99), ch.AErrors, ch.BErrors,
			mdCode(printable.Clip(s.Query, 90)), mdText(strings.Join(shapeDetails(s), "; ")))
	}
	if r.Source != "" {
		fmt.Fprintf(b, "\nSource: %s\n", mdText(r.Source))
	}
}

// html writes one self-contained page: the verdict, each shape's
// latencies on both majors side by side, the text report.
func (r *UpgradeReport) html(w io.Writer) error {
	var text strings.Builder
	if err := r.Text(&text); err != nil {
		return err
	}
	var hs []shapePicture
	for i, s := range r.Shapes {
		if i == 12 {
			break
		}
		verdict, _, _ := strings.Cut(shapeLine(s, r.MinRatio), " ")
		hs = append(hs, pictureOf(s.Query, verdict, s.Change))
	}
	verdict := "nothing slower"
	if len(r.Failing) > 0 {
		verdict = "slower"
	}
	return replayPage().Execute(w, map[string]any{"Title": "pgmedic rehearse upgrade " + r.From + " to " + r.To, "Verdict": verdict, "Text": text.String(), "Hists": hs})
}
