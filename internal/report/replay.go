package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/replay"
)

// ReplayReport is `pgmedic replay`'s output: what the log captured, and
// one replay or an A/B comparison.
type ReplayReport struct {
	PGMedic string        `json:"pgmedic"`
	Logs    []string      `json:"logs"`
	Capture capture.Stats `json:"capture"`
	Speed   float64       `json:"speed"`
	DryRun  bool          `json:"dry_run,omitempty"`
	// Twin says what the twin copied (--twin); Fix the finding whose fix
	// side B has (--fix).
	Twin string `json:"twin,omitempty"`
	Fix  string `json:"fix,omitempty"`
	// Where the single replay ran, and its result.
	Where      string             `json:"where,omitempty"`
	Single     *replay.Result     `json:"replay,omitempty"`
	Comparison *replay.Comparison `json:"comparison,omitempty"`
}

// JSON writes the report as JSON.
func (r *ReplayReport) JSON(w io.Writer) error { return writeJSON(w, r) }

// Text writes the report for a person.
func (r *ReplayReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "pgmedic %s — replay of %s\n\n", r.PGMedic, safe(strings.Join(r.Logs, " ")))
	r.captureText(b)
	if r.Twin != "" {
		fmt.Fprintf(b, "TWIN: %s\n", safe(r.Twin))
	}
	if r.Fix != "" {
		fmt.Fprintf(b, "FIX: %s\n", safe(r.Fix))
	}
	switch {
	case r.DryRun:
		b.WriteString("\nDRY RUN: nothing was sent.\n")
		if len(r.Capture.Top) > 0 {
			b.WriteString("\nBusiest statements:\n")
			for _, t := range r.Capture.Top {
				fmt.Fprintf(b, "  %8d  %s\n", t.Count, safe(printable.Clip(printable.OneLine(t.Query), 110)))
			}
		}
	case r.Single != nil:
		fmt.Fprintf(b, "\nREPLAY on %s, speed %s\n", safe(r.Where), speedText(r.Speed))
		resultText(b, r.Single)
	case r.Comparison != nil:
		compareText(b, r.Comparison, r.Speed)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *ReplayReport) captureText(b *strings.Builder) {
	c := r.Capture
	for _, f := range c.Files {
		fmt.Fprintf(b, "LOG %s: %s", safe(f.Name), f.Format)
		if f.Prefix != "" {
			fmt.Fprintf(b, ", log_line_prefix %q", f.Prefix)
		}
		fmt.Fprintf(b, ", %s lines", printable.Count(float64(f.Lines)))
		if f.Unrecognised > 0 {
			fmt.Fprintf(b, " (%s not recognised)", printable.Count(float64(f.Unrecognised)))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "CAPTURE: %d sessions, %s statements (%s extended protocol, %d transactions, %s), %d shapes, over %.2f s from %s\n",
		c.Sessions, printable.Count(float64(c.Statements)), printable.Count(float64(c.Extended)), c.Transactions, failedText(c), c.Shapes, c.DurationS, c.Start)
	for _, s := range c.Skipped {
		fmt.Fprintf(b, "  not replayable: %d %s", s.Count, s.Reason)
		if s.Example != "" {
			fmt.Fprintf(b, " (e.g. %s)", safe(printable.Clip(s.Example, 80)))
		}
		b.WriteString("\n")
	}
	for _, n := range c.Notes {
		fmt.Fprintf(b, "  note: %s\n", safe(n))
	}
}

func speedText(s float64) string {
	if s == 0 {
		return "0 (as fast as the server answers)"
	}
	return fmt.Sprintf("%g", s)
}

func resultText(b *strings.Builder, r *replay.Result) {
	fmt.Fprintf(b, "  took %.2f s", r.WallS)
	if r.ScheduleS > 0 {
		fmt.Fprintf(b, " for a capture of %.2f s at this speed (%+.1f%%)", r.ScheduleS, 100*(r.WallS-r.ScheduleS)/r.ScheduleS)
	}
	fmt.Fprintf(b, "\n  %d sessions (%d could not connect), %s statements sent, %s failed (%d failed at capture too, %d timed out), %s not run; goodput %.1f statements/s\n",
		r.Sessions, r.ConnectFailed, printable.Count(float64(r.Statements)), printable.Count(float64(r.Errors)), r.CaptureFailed, r.TimedOut, printable.Count(float64(r.NotRun)), r.Goodput())
	for _, e := range r.ConnectErrors {
		fmt.Fprintf(b, "  could not connect: %s\n", safe(e))
	}
	if r.Speed > 0 {
		l := r.Lag
		fmt.Fprintf(b, "  LAG behind schedule: p50 %.1f ms, p95 %.1f ms, max %.1f ms; the most behind session ended %.2f s behind:\n", l.BehindP50, l.BehindP95, l.BehindMax, l.EndS)
		fmt.Fprintf(b, "    %.2f s the server's (statements that ran past the gap the capture left before the next)\n", l.ServerS)
		fmt.Fprintf(b, "    %.2f s the replayer's (sent late with the session free; p99 %.2f ms on one statement, %.2f s over all sessions)\n", l.ReplayerS, l.ReplayerP99, l.ReplayerTotalS)
		fmt.Fprintf(b, "  waiting for a connection slot: %.2f s; connecting p95 %.1f ms\n", l.SlotWaitS, l.ConnectP95)
	}
	if len(r.ErrorStates) > 0 {
		var ks []string
		for k, n := range r.ErrorStates {
			ks = append(ks, fmt.Sprintf("%s x%d", k, n))
		}
		sort.Strings(ks)
		fmt.Fprintf(b, "  errors by SQLSTATE: %s\n", strings.Join(ks, ", "))
	}
	if r.Stopped != "" {
		fmt.Fprintf(b, "  INCOMPLETE: %s\n", r.Stopped)
	}
	b.WriteString("  statements by total time:\n")
	for i, s := range r.Shapes {
		if i == 10 {
			fmt.Fprintf(b, "    ... %d more shapes\n", len(r.Shapes)-10)
			break
		}
		fmt.Fprintf(b, "    %7d calls  p50 %8.2f  p95 %8.2f  p99 %8.2f ms", s.Calls, s.P50, s.P95, s.P99)
		if s.CapturedMS > 0 {
			fmt.Fprintf(b, "  (captured: %.2f on the server)", s.CapturedMS)
		}
		if s.Errors > 0 {
			fmt.Fprintf(b, "  %d errors", s.Errors)
		}
		if s.LockWait > 0 {
			fmt.Fprintf(b, "  lock wait %.0f ms", s.LockWait)
		}
		fmt.Fprintf(b, "  %s\n", safe(printable.Clip(printable.OneLine(s.Query), 80)))
	}
}

func compareText(b *strings.Builder, c *replay.Comparison, speed float64) {
	fmt.Fprintf(b, "\nVERDICT: %s\n", strings.ToUpper(c.Verdict))
	for _, w := range c.Why {
		fmt.Fprintf(b, "  %s\n", w)
	}
	for _, s := range []*replay.SideResult{c.A, c.B} {
		fmt.Fprintf(b, "\n%s: %s (%d runs, speed %s)\n", strings.ToUpper(safe(s.Name)), safe(s.Where), len(s.Runs), speedText(speed))
		fmt.Fprintf(b, "  latency of statements that succeeded: p50 %s, p95 %s, p99 %s ms (95%% intervals)\n", est(s.P50), est(s.P95), est(s.P99))
		if s.LockWaitMS > 0 {
			fmt.Fprintf(b, "  lock waits sampled: %.0f ms\n", s.LockWaitMS)
		}
		for i, r := range s.Runs {
			fmt.Fprintf(b, "  run %d: %.2f s, %d statements, %d failed, goodput %.1f/s, lag p95 %.1f ms, ended %.2f s behind (server %.2f s, replayer %.2f s)\n",
				i+1, r.WallS, r.Statements, r.Errors, r.Goodput(), r.Lag.BehindP95, r.Lag.EndS, r.Lag.ServerS, r.Lag.ReplayerS)
		}
	}
	b.WriteString("\nBY STATEMENT (median B/A with its 95% interval):\n")
	for i, s := range c.Shapes {
		if i == 10 {
			fmt.Fprintf(b, "  ... %d more shapes\n", len(c.Shapes)-10)
			break
		}
		fmt.Fprintf(b, "  %-21s %6d calls/run  p50 %s -> %s ms  p95 %.2f -> %.2f  p99 %.2f -> %.2f  x%.2f [%.2f-%.2f]",
			s.Verdict, s.Calls/max(1, len(c.A.Runs)), short(s.A.Value), short(s.B.Value), s.AP95, s.BP95, s.AP99, s.BP99, s.Ratio.Value, s.Ratio.Low, s.Ratio.High)
		if s.AErrors+s.BErrors > 0 {
			fmt.Fprintf(b, "  errors %d -> %d", s.AErrors, s.BErrors)
		}
		if s.ALockMS+s.BLockMS > 0 {
			fmt.Fprintf(b, "  lock wait %.0f -> %.0f ms", s.ALockMS, s.BLockMS)
		}
		if s.Why != "" {
			fmt.Fprintf(b, "  (%s)", s.Why)
		}
		fmt.Fprintf(b, "\n      %s\n", safe(printable.Clip(printable.OneLine(s.Query), 100)))
	}
}

func est(e replay.Estimate) string {
	return fmt.Sprintf("%s [%s-%s]", short(e.Value), short(e.Low), short(e.High))
}

func short(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3f", x)
}

// Document is the replay report as a one-part document.
func (r *ReplayReport) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic replay " + strings.Join(r.Logs, " "), Parts: []Part{{Replay: r}}}
}

// markdown writes the report for a pull request or a ticket.
func (r *ReplayReport) markdown(b *strings.Builder) {
	c := r.Capture
	fmt.Fprintf(b, "Captured: **%d sessions, %d statements** (%d transactions, %s) over %.2f s.\n\n", c.Sessions, c.Statements, c.Transactions, failedText(c), c.DurationS)
	for _, s := range c.Skipped {
		fmt.Fprintf(b, "- not replayable: %d %s\n", s.Count, mdText(s.Reason))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(b, "- note: %s\n", mdText(n))
	}
	switch {
	case r.DryRun:
		b.WriteString("\n**Dry run**: nothing was sent.\n\n| statements | shape |\n|---:|---|\n")
		for _, t := range c.Top {
			fmt.Fprintf(b, "| %d | %s |\n", t.Count, mdCode(printable.Clip(printable.OneLine(t.Query), 120)))
		}
	case r.Single != nil:
		s := r.Single
		fmt.Fprintf(b, "\nReplayed on %s at speed %s: %.2f s (capture %.2f s), %d statements, %d failed, goodput %.1f/s; lag p95 %.1f ms, ended %.2f s behind (server %.2f s, replayer %.2f s).\n\n",
			mdText(r.Where), speedText(r.Speed), s.WallS, s.ScheduleS, s.Statements, s.Errors, s.Goodput(), s.Lag.BehindP95, s.Lag.EndS, s.Lag.ServerS, s.Lag.ReplayerS)
		b.WriteString("| calls | p50 ms | p95 ms | p99 ms | errors | statement |\n|---:|---:|---:|---:|---:|---|\n")
		for i, sh := range s.Shapes {
			if i == 15 {
				break
			}
			fmt.Fprintf(b, "| %d | %.2f | %.2f | %.2f | %d | %s |\n", sh.Calls, sh.P50, sh.P95, sh.P99, sh.Errors, mdCode(printable.Clip(printable.OneLine(sh.Query), 100)))
		}
	case r.Comparison != nil:
		cm := r.Comparison
		fmt.Fprintf(b, "\n### Verdict: %s\n\nA: %s — %s  \nB: %s — %s\n\n", mdText(cm.Verdict), mdText(cm.A.Name), mdText(cm.A.Where), mdText(cm.B.Name), mdText(cm.B.Where))
		for _, w := range cm.Why {
			fmt.Fprintf(b, "- %s\n", mdText(w))
		}
		b.WriteString("\n| verdict | calls/run | p50 A → B ms | p95 A → B | p99 A → B | B/A [95%] | errors | statement |\n|---|---:|---|---|---|---|---|---|\n")
		for i, s := range cm.Shapes {
			if i == 15 {
				break
			}
			verdict := s.Verdict
			if s.Why != "" {
				verdict += " (" + s.Why + ")"
			}
			fmt.Fprintf(b, "| %s | %d | %s → %s | %.2f → %.2f | %.2f → %.2f | %.2f [%.2f–%.2f] | %d → %d | %s |\n", mdText(verdict), s.Calls/max(1, len(cm.A.Runs)),
				short(s.A.Value), short(s.B.Value), s.AP95, s.BP95, s.AP99, s.BP99, s.Ratio.Value, s.Ratio.Low, s.Ratio.High, s.AErrors, s.BErrors,
				mdCode(printable.Clip(printable.OneLine(s.Query), 90)))
		}
	}
}

// html writes one self-contained page: the verdict, and for each
// statement shape both sides' latency distributions side by side (inline
// SVG, no script, so it opens offline and anywhere).
func (r *ReplayReport) html(w io.Writer) error {
	var text strings.Builder
	if err := r.Text(&text); err != nil {
		return err
	}
	var hs []shapePicture
	if r.Comparison != nil {
		for i, s := range r.Comparison.Shapes {
			if i == 12 {
				break
			}
			hs = append(hs, pictureOf(s.Query, s.Verdict, s))
		}
	}
	verdict := ""
	if r.Comparison != nil {
		verdict = r.Comparison.Verdict
	}
	return replayPage().Execute(w, map[string]any{"Title": "pgmedic replay " + strings.Join(r.Logs, " "), "Verdict": verdict, "Text": text.String(), "Hists": hs})
}

// shapePicture is one statement shape on a replay's page (and an
// upgrade's): its verdict, both sides' histograms, and its calls over
// the replay.
type shapePicture struct {
	Query, Verdict string
	Bars, Over     template.HTML
}

func pictureOf(query, verdict string, c *replay.ShapeChange) shapePicture {
	p := shapePicture{Query: printable.Clip(printable.OneLine(query), 160), Verdict: verdict}
	if c != nil {
		p.Bars, p.Over = histSVG(c), overSVG(c)
	}
	return p
}

// histSVG draws A's and B's histograms on one log-scaled axis.
func histSVG(s *replay.ShapeChange) template.HTML {
	if len(s.AHist) == 0 {
		return ""
	}
	top := 1
	for i := range s.AHist {
		top = max(top, s.AHist[i], s.BHist[i])
	}
	const bw, h = 14, 80
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" role="img">`, len(s.AHist)*bw*2+40, h+30)
	for i := range s.AHist {
		for k, n := range []int{s.AHist[i], s.BHist[i]} {
			bh := h * n / top
			color := "#8899aa"
			if k == 1 {
				color = "#2a7f62"
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %d calls, %.3g-%.3g ms</title></rect>`,
				i*bw*2+k*bw, h-bh, bw-1, bh, color, []string{"A", "B"}[k], n, s.HistEdges[i], s.HistEdges[i+1])
		}
	}
	fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11">%.3g ms</text><text x="%d" y="%d" font-size="11" text-anchor="end">%.3g ms</text></svg>`,
		h+14, s.HistEdges[0], len(s.AHist)*bw*2, h+14, s.HistEdges[len(s.HistEdges)-1])
	return template.HTML(b.String())
}

// overSVG draws a shape's calls over the replay, A's and B's first runs
// on shared axes: x when each was sent, y its latency on a log scale,
// failed calls in red. A slowdown that builds up (a queue, a cache that
// empties) shows here where a histogram hides it.
func overSVG(s *replay.ShapeChange) template.HTML {
	if len(s.AOver) == 0 && len(s.BOver) == 0 {
		return ""
	}
	endMS, topMS := 1.0, 1.0
	for _, c := range append(append([]replay.Call{}, s.AOver...), s.BOver...) {
		endMS = math.Max(endMS, float64(c.AtMS+c.MS))
		topMS = math.Max(topMS, float64(c.MS))
	}
	const w, h, left, bottom = 700.0, 140.0, 50.0, 18.0
	x := func(ms float64) float64 { return left + (w-left-10)*ms/endMS }
	decades := math.Log10(topMS) + 2 // from 0.01 ms
	y := func(ms float64) float64 { return 4 + (h-bottom-4)*(1-(math.Log10(math.Max(ms, 0.01))+2)/decades) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="over" width="%.0f" height="%.0f" role="img" font-size="11"><title>latency of each call over the replay: A grey, B green</title>`, w, h)
	for ms := 0.01; ms <= topMS*10; ms *= 10 {
		if y(ms) < 0 {
			break
		}
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="2" y="%.1f">%s</text>`, left, w-10, y(ms), y(ms), y(ms)+4, printable.MS(ms))
	}
	for k, calls := range [][]replay.Call{s.AOver, s.BOver} {
		color := []string{"#8899aa", "#2a7f62"}[k]
		for _, c := range calls {
			fill := color
			if c.Failed {
				fill = "#c0392b"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.8" fill="%s" fill-opacity="0.75"/>`, x(float64(c.AtMS)), y(float64(c.MS)), fill)
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">0 s</text><text x="%.0f" y="%.0f" text-anchor="end">%.1f s into the replay</text></svg>`, left, h-4, w-10, h-4, endMS/1000)
	return template.HTML(b.String())
}

var replayPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("replay").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
.verdict{font-size:1.6em;font-weight:bold}.shape{margin:1.2em 0}.q{font-family:monospace;font-size:.9em}
.key span{display:inline-block;width:1em;height:1em;vertical-align:middle;margin:0 .3em}
.pics{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-end}</style></head>
<body data-ready="1"><!-- drawn without a script: ready as soon as it is parsed -->
<h1>{{.Title}}</h1>
{{if .Verdict}}<p class="verdict">Verdict: {{.Verdict}}</p>{{end}}
{{if .Hists}}<h2>Latency by statement, A and B side by side</h2>
<p class="key"><span style="background:#8899aa"></span>A (as is) <span style="background:#2a7f62"></span>B (with the change) <span style="background:#c0392b"></span>failed; on a log scale: how the calls' latencies are spread, and each call over the first run of each side</p>
{{range .Hists}}<div class="shape"><div class="q">{{.Verdict}} — {{.Query}}</div><div class="pics">{{.Bars}}{{.Over}}</div></div>{{end}}{{end}}
<h2>Report</h2><pre>{{.Text}}</pre>
</body></html>
`))
})

// failedText counts the statements that failed at capture as the
// application saw them, saying how many the replay leaves out.
func failedText(c capture.Stats) string {
	s := fmt.Sprintf("%d failed at capture", c.Failed)
	if c.FailedLeftOut > 0 {
		s += fmt.Sprintf(", %d of them left out of the replay: the log kept no values for them", c.FailedLeftOut)
	}
	return s
}
