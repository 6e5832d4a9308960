package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// The page's own template, style and script, and the vendored uPlot
// (scripts/vendor-uplot.sh): everything is inlined, so the report opens
// offline and makes no request.
var (
	//go:embed assets/report.html.tmpl
	pageTemplate string
	//go:embed assets/report.css
	pageCSS string
	//go:embed assets/report.js
	pageJS string
	//go:embed assets/vendor/uplot/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/vendor/uplot/uPlot.min.css
	uplotCSS string
)

var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"t":          pageText,
		"short":      func(s string, n int) string { return pageText(printable.Clip(s, n)) },
		"num":        num,
		"pct":        func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"ms":         printable.PlanMS,
		"sev":        func(s model.Severity) string { return s.String() },
		"stamp":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"bars":       barsOf,
		"plural":     func(n int, one, many string) string { return map[bool]string{true: one, false: many}[n == 1] },
		"unseenText": UnseenText,
		"hasKey":     func(m map[string]*plan.Flat, k string) bool { return m[k] != nil },
		"tree":       treeOf,
		"div": func(total float64, n int64) float64 {
			if n == 0 {
				return 0
			}
			return total / float64(n)
		},
		"ev":      evidenceValue,
		"add":     func(a, b int) int { return a + b },
		"minutes": minutesOf,
		// The flame graph is drawn by profile.FlameSVG, which escapes every
		// name it writes: the SVG is markup.
		"flame": func(r *ProfileReport) template.HTML { return template.HTML(r.FlameSVG) },
		"width": func(share float64) string { return fmt.Sprintf("%.1f%%", 100*math.Max(0, math.Min(1, share))) },
	}).Parse(pageTemplate))
})

// HTML writes the document as one self-contained page: the findings with
// their evidence, fix and verification, the statements, plans and charts,
// drawn from the document's JSON embedded in the page.
func HTML(w io.Writer, d *Document) error {
	if len(d.Parts) == 1 && d.Parts[0].Replay != nil {
		// A replay has no findings to list: its page is the verdict and
		// each shape's latencies, drawn without a script.
		return d.Parts[0].Replay.html(w)
	}
	if len(d.Parts) == 1 && d.Parts[0].Upgrade != nil {
		// An upgrade's page is replay's: the verdict and each shape's
		// latencies on both majors.
		return d.Parts[0].Upgrade.html(w)
	}
	if len(d.Parts) == 1 && d.Parts[0].Rehearsal != nil {
		// A rehearsal's page is its verdict and the application's latency
		// over the migration, drawn without a script.
		return d.Parts[0].Rehearsal.html(w)
	}
	data, err := d.dataBlock()
	if err != nil {
		return fmt.Errorf("encoding the report's data: %w", err)
	}
	v := struct {
		Doc               *Document
		Parts             []partView
		CSS, UplotCSS     template.CSS
		JS, UplotJS, Data template.JS
	}{Doc: d, CSS: template.CSS(pageCSS), UplotCSS: template.CSS(uplotCSS), JS: template.JS(pageJS), UplotJS: template.JS(uplotJS), Data: template.JS(data)}
	for i, p := range d.Parts {
		v.Parts = append(v.Parts, viewOf(i, p))
	}
	return page().Execute(w, v)
}

// partView is one part as the template draws it.
type partView struct {
	Part
	ID       string
	Findings []model.Finding
	Skipped  []model.Skip
	Summary  Summary
	// ByQuery lists the findings' anchors per queryid, for the
	// statements table's links.
	ByQuery map[string][]string
	// RehearsalBody is a rehearsal's charts and report, drawn without a
	// script (a rehearsal has no findings).
	RehearsalBody template.HTML
	// Timeline is a sampled check's or an incident's timeline, which the
	// part opens with.
	Timeline template.HTML
}

func viewOf(i int, p Part) partView {
	v := partView{Part: p, ID: fmt.Sprintf("p%d", i), ByQuery: map[string][]string{}}
	if p.Rehearsal != nil {
		v.RehearsalBody = p.Rehearsal.body()
	}
	if p.Upgrade != nil {
		var text strings.Builder
		p.Upgrade.Text(&text)
		v.RehearsalBody = template.HTML("<pre>" + template.HTMLEscapeString(text.String()) + "</pre>")
	}
	switch {
	case p.Check != nil:
		v.Findings, v.Skipped, v.Summary = p.Check.Findings, p.Check.Skipped, p.Check.Summary
		v.Timeline = sessionsTimelineSVG(p.Check.Timeline)
	case p.Plan != nil:
		v.Findings, v.Skipped, v.Summary = p.Plan.Findings, p.Plan.Skipped, p.Plan.Summary
	case p.Logs != nil:
		v.Findings, v.Skipped = p.Logs.Findings, p.Logs.Skipped
		v.Summary = summarize(p.Logs.Findings, 0)
	case p.Profile != nil:
		v.Findings, v.Skipped, v.Summary = p.Profile.Findings, p.Profile.Skipped, p.Profile.Summary
	}
	for n, f := range v.Findings {
		if f.Object.QueryID != "" {
			v.ByQuery[f.Object.QueryID] = append(v.ByQuery[f.Object.QueryID], fmt.Sprintf("%s-f%d", v.ID, n))
		}
	}
	return v
}

// pageText keeps line breaks (SQL is read as written) and shows every
// other control character visibly: an ANSI escape in a query text is
// data, not markup or a terminal command.
func pageText(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\t", "    ")
	return strings.Join(printable.Lines(s), "\n")
}

func evidenceValue(e model.Evidence) string {
	if e.Fact {
		return "" // a labelled fact: the label says it
	}
	return num(e.Value) + unitSuffix(e.Unit)
}

// bar is one side of a verification's before/after chart.
type bar struct {
	Label, Value string
	Width        string // of the longer bar
	Better       bool
}

// barsOf draws a verification's two measured numbers as bars scaled to
// the larger; nil when it has not two numbers.
func barsOf(v model.Verification) []bar {
	if v.Before == nil || v.After == nil {
		return nil
	}
	top := math.Max(math.Abs(v.Before.Value), math.Abs(v.After.Value))
	if top == 0 || math.IsInf(top, 0) || math.IsNaN(top) {
		top = 1
	}
	w := func(x float64) string { return fmt.Sprintf("%.1f%%", math.Max(0.5, 100*math.Abs(x)/top)) }
	better := v.Gain() > 1
	return []bar{
		{Label: "before", Value: num(v.Before.Value) + unitSuffix(v.Before.Unit), Width: w(v.Before.Value)},
		{Label: "after", Value: num(v.After.Value) + unitSuffix(v.After.Unit), Width: w(v.After.Value), Better: better},
	}
}

// minutesOf is the logs' per-minute series in time order, for the table
// under the chart.
func minutesOf(r *LogsReport) []string {
	keys := make([]string, 0, len(r.PerMinute))
	for k := range r.PerMinute {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
