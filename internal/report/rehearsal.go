package report

import (
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// RehearsalReport is `rehearse migration`'s output: the migration read
// statement by statement and, when it was rehearsed, each run (as
// written, then its safe form) with what each statement did to the
// application.
type RehearsalReport struct {
	PGMedic   string               `json:"pgmedic"`
	Migration *migration.Migration `json:"migration"`
	// Static: read only, not rehearsed (no --source).
	Static  bool           `json:"static"`
	Logs    []string       `json:"logs,omitempty"`
	Capture *capture.Stats `json:"capture,omitempty"`
	Twin    string         `json:"twin,omitempty"`
	// Runs are the migration as written, then its safe form (when it
	// has one).
	Runs      []*rehearse.Run `json:"runs,omitempty"`
	MaxWaitMS float64         `json:"max_wait_ms"`
	// Source says whether the source was written while pgmedic
	// rehearsed (its write counters before and after).
	Source string `json:"source,omitempty"`
	// FailOn are the outcomes that make the exit code 1; Failing the
	// ones that did.
	FailOn  []string `json:"fail_on"`
	Failing []string `json:"failing,omitempty"`
	// Inconclusive says why the rehearsal measured nothing of the
	// application (no call of it overlapped the migration): no verdict.
	Inconclusive string `json:"inconclusive,omitempty"`
}

// JSON writes the report as JSON.
func (r *RehearsalReport) JSON(w io.Writer) error { return writeJSON(w, r) }

// Document is the rehearsal as a one-part document.
func (r *RehearsalReport) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic rehearse migration " + r.Migration.Name, Parts: []Part{{Rehearsal: r}}}
}

// run is the run of that name, or nil.
func (r *RehearsalReport) run(i int) *rehearse.Run {
	if i < len(r.Runs) {
		return r.Runs[i]
	}
	return nil
}

// stepsOf are a run's steps for statement n.
func stepsOf(run *rehearse.Run, n int) []*rehearse.StepResult {
	if run == nil {
		return nil
	}
	var out []*rehearse.StepResult
	for _, s := range run.Steps {
		if s.Of == n {
			out = append(out, s)
		}
	}
	return out
}

// Text writes the report for a terminal.
func (r *RehearsalReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "pgmedic %s: rehearse migration %s\n", r.PGMedic, printable.String(r.Migration.Name))
	r.setting(b, "")
	b.WriteString("\n")
	for _, s := range r.Migration.Statements {
		fmt.Fprintf(b, "%d. line %d: %s\n", s.N, s.Line, printable.Clip(s.SQL, 150))
		fmt.Fprintf(b, "   reads as: %s\n", staticText(s))
		for i, name := range []string{"as written", "safe form"} {
			steps := stepsOf(r.run(i), s.N)
			if len(steps) == 0 {
				continue
			}
			fmt.Fprintf(b, "   %s: %s\n", name, strings.Join(stepTexts(steps, i == 1), "\n      then "))
		}
		b.WriteString("\n")
	}
	r.summary(b, "")
	if safe := r.run(1); safe != nil {
		fmt.Fprintf(b, "\nThe safe form (%s):\n", safe.Plan.Why)
		b.WriteString(indent(safeScript(safe.Plan), "  "))
	}
	if r.Source != "" {
		fmt.Fprintf(b, "\nSource: %s\n", r.Source)
	}
	r.failing(b, "")
	_, err := io.WriteString(w, b.String())
	return err
}

// setting says what was rehearsed against, and with what traffic.
func (r *RehearsalReport) setting(b *strings.Builder, bullet string) {
	if r.Static {
		fmt.Fprintf(b, "%sRead only, not rehearsed: give --source DSN (and --log with the captured workload) to run it on a twin under the application's traffic.\n", bullet)
		return
	}
	if r.Twin != "" {
		fmt.Fprintf(b, "%sTwin: %s\n", bullet, printable.String(r.Twin))
	}
	if run := r.run(0); run != nil {
		fmt.Fprintf(b, "%sEach run: %s\n", bullet, printable.String(run.Where))
	}
	if c := r.Capture; c != nil {
		fmt.Fprintf(b, "%sTraffic: %d sessions, %d statements captured over %.1f s (%s), replayed at the captured pace, repeated until the migration was over\n",
			bullet, c.Sessions, c.Statements, c.DurationS, printable.String(strings.Join(r.Logs, ", ")))
	} else {
		fmt.Fprintf(b, "%sTraffic: none captured (--log): the migration ran alone; its duration, locks and rewrites are measured, not what it does to the application\n", bullet)
	}
}

// summary gives the application's p99 before, during the migration as
// written, and during its safe form.
func (r *RehearsalReport) summary(b *strings.Builder, bullet string) {
	written, safe := r.run(0), r.run(1)
	if written == nil || r.Capture == nil {
		return
	}
	fmt.Fprintf(b, "%sThe application's p99: %s before the migration (%d calls, %s); %s while it ran as written (%s, %d calls, %s)",
		bullet, printable.MS(written.Before.P99), written.Before.Calls, errorsText(written.Before), printable.MS(written.During.P99), printable.MS(written.MigrationMS), written.During.Calls, errorsText(written.During))
	if safe != nil {
		fmt.Fprintf(b, "; %s with the safe form (%s, %d calls, %s)", printable.MS(safe.During.P99), printable.MS(safe.MigrationMS), safe.During.Calls, errorsText(safe.During))
	}
	b.WriteString(".\n")
	for _, run := range r.Runs {
		if run.TrafficEnded {
			fmt.Fprintf(b, "%sNote: the captured traffic ran out before the %s run ended; the rest ran alone.\n", bullet, run.Plan.Name)
		}
	}
	if len(written.Shapes) > 0 {
		fmt.Fprintf(b, "%sSlowest statements of the application while it ran as written (p99 before -> during):\n", bullet)
		for i, sh := range written.Shapes {
			if i == 5 {
				break
			}
			fmt.Fprintf(b, "%s  %s -> %s  %s\n", bullet, printable.MS(sh.Before.P99), printable.MS(sh.During.P99), printable.Clip(sh.Query, 100))
		}
	}
}

// failing says the exit code's reasons.
func (r *RehearsalReport) failing(b *strings.Builder, bullet string) {
	if r.Inconclusive != "" && len(r.Failing) == 0 {
		fmt.Fprintf(b, "\nVerdict: INCONCLUSIVE: %s\n", printable.String(r.Inconclusive))
		return
	}
	if len(r.Failing) == 0 {
		fmt.Fprintf(b, "\nVerdict: nothing --fail-on %s names.\n", strings.Join(r.FailOn, ","))
		return
	}
	fmt.Fprintf(b, "\nVerdict: risky as written (--fail-on %s):\n", strings.Join(r.FailOn, ","))
	for _, f := range r.Failing {
		fmt.Fprintf(b, "%s- %s\n", bullet, printable.String(f))
	}
}

// errorsText counts a window's failed calls by SQLSTATE ("2 failed:
// 23505 x2"); the application's own failures at capture fail again in
// the replay, so they are compared with before the migration.
func errorsText(w rehearse.Window) string {
	if w.Errors == 0 {
		return "0 failed"
	}
	var states []string
	for _, k := range slices.Sorted(maps.Keys(w.States)) {
		states = append(states, fmt.Sprintf("%s x%d", k, w.States[k]))
	}
	return fmt.Sprintf("%d failed: %s", w.Errors, strings.Join(states, ", "))
}

// staticText says what a statement does, read without running it.
func staticText(s *migration.Statement) string {
	switch {
	case s.Transaction:
		return "transaction control: every lock taken in the block is held until it ends"
	case s.Unread:
		return s.What + ": what it locks is not read from its text; the rehearsal measures it"
	case s.Lock == "":
		return s.What + ": takes no lock the application waits for"
	}
	on := s.Table.Name
	for _, a := range s.Also {
		on += " and on " + a.Name + " (the table it references)"
	}
	parts := []string{fmt.Sprintf("%s: %s on %s", s.What, s.Lock, on)}
	switch {
	case s.BlocksReads:
		parts = append(parts, "stops reads and writes while held or waited for")
	case s.BlocksWrites:
		parts = append(parts, "stops writes while held or waited for")
	default:
		parts = append(parts, "reads and writes go on")
	}
	if s.Rewrites != "" {
		parts = append(parts, "rewrites the table "+s.Rewrites)
	}
	if s.Scans != "" {
		parts = append(parts, s.Scans)
	}
	out := strings.Join(parts, "; ")
	if len(s.Lighter) > 0 {
		out += ". Lighter: " + strings.Join(s.Lighter, "; ")
	}
	if s.Kept != "" {
		out += ". The safe form keeps it as written, under lock_timeout with retries: " + s.Kept
	}
	return printable.String(out)
}

// stepTexts says what each step did.
func stepTexts(steps []*rehearse.StepResult, safe bool) []string {
	var out []string
	for _, s := range steps {
		var p []string
		if safe && !s.Written {
			p = append(p, printable.Clip(s.SQL, 110))
		}
		p = append(p, fmt.Sprintf("%s", printable.MS(s.MS)))
		if s.Attempts > 1 {
			p = append(p, fmt.Sprintf("%d attempts", s.Attempts))
		}
		if s.Rounds > 0 {
			p = append(p, fmt.Sprintf("%s rows in %d batches", printable.Count(float64(s.Rows)), s.Rounds))
		}
		if s.WaitedMS > 0 {
			p = append(p, fmt.Sprintf("waited %s for its lock", printable.MS(s.WaitedMS)))
		}
		if s.Met != "" {
			p = append(p, "started while "+s.Met)
		}
		if s.Lock != "" {
			p = append(p, fmt.Sprintf("held %s %s", s.Lock, printable.MS(s.HeldMS)))
		}
		for _, o := range s.AlsoHeld {
			p = append(p, "and "+o)
		}
		if s.Rewrote {
			p = append(p, "rewrote the table")
		}
		if s.Queued > 0 {
			p = append(p, fmt.Sprintf("%d sessions queued behind it, the longest %s", s.Queued, printable.MS(s.QueuedMaxMS)))
		}
		if s.During.Calls > 0 {
			p = append(p, fmt.Sprintf("the application's p99 meanwhile %s over %d calls (%s)", printable.MS(s.During.P99), s.During.Calls, errorsText(s.During)))
		}
		if s.Error != "" {
			p = append(p, "error: "+printable.String(s.Error))
		}
		if s.Broke != "" {
			p = append(p, "it broke the application: "+printable.String(s.Broke))
		}
		out = append(out, strings.ToUpper(s.Verdict)+": "+strings.Join(p, "; "))
	}
	return out
}

// safeScript is the safe form as a script to run: each step in its own
// transaction, with the lock_timeout and retries written as comments
// where a migration tool must loop.
//
// lock_timeout is set for the steps that retry and reset for the others:
// a CREATE INDEX CONCURRENTLY waits for older transactions through locks
// too, and one a lock_timeout ended would leave an invalid index behind.
// A step of several statements (a switch made in one transaction) is
// written inside BEGIN and COMMIT.
func safeScript(p rehearse.Plan) string {
	b := &strings.Builder{}
	timed := false
	for _, s := range p.Steps {
		sql := strings.TrimRight(strings.TrimSpace(s.SQL), ";")
		if parts, err := sqlparse.Split(sql); err == nil && len(parts) > 1 {
			sql = "BEGIN; " + sql + "; COMMIT"
		}
		switch {
		case s.Retry && !timed:
			fmt.Fprintf(b, "SET lock_timeout = '%dms';\n", p.LockTimeout.Milliseconds())
			timed = true
		case !s.Retry && timed:
			fmt.Fprintf(b, "RESET lock_timeout;\n")
			timed = false
		}
		switch {
		case s.Retry:
			fmt.Fprintf(b, "%s;  -- on 55P03 (lock_not_available): wait %s, doubling to 2 s, and run it again, for up to %s\n", sql, p.Pause, p.Budget)
		case s.Batches:
			fmt.Fprintf(b, "%s;  -- run again until it updates 0 rows\n", sql)
		default:
			fmt.Fprintf(b, "%s;\n", sql)
		}
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		lines = append(lines, printable.String(l))
	}
	return strings.Join(lines, "\n") + "\n"
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return by + strings.Join(lines, "\n"+by) + "\n"
}

// markdown writes the report for a pull request.
func (r *RehearsalReport) markdown(b *strings.Builder) {
	verdict := "nothing risky"
	switch {
	case len(r.Failing) > 0:
		verdict = "risky as written"
	case r.Inconclusive != "":
		verdict = "inconclusive: " + mdText(r.Inconclusive)
	}
	fmt.Fprintf(b, "**Verdict: %s** (`--fail-on %s`)\n\n", verdict, strings.Join(r.FailOn, ","))
	for _, f := range r.Failing {
		fmt.Fprintf(b, "- %s\n", mdText(f))
	}
	if len(r.Failing) > 0 {
		b.WriteString("\n")
	}
	var setting strings.Builder
	r.setting(&setting, "- ")
	r.summary(&setting, "- ")
	b.WriteString(mdText(setting.String()))
	b.WriteString("\n| # | statement | reads as | as written | safe form |\n|---:|---|---|---|---|\n")
	for _, s := range r.Migration.Statements {
		var cells [2]string
		for i := range cells {
			cells[i] = mdText(strings.Join(stepTexts(stepsOf(r.run(i), s.N), i == 1), "; then "))
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n", s.N, mdCode(printable.Clip(s.SQL, 90)), mdText(staticText(s)), cells[0], cells[1])
	}
	if safe := r.run(1); safe != nil {
		fmt.Fprintf(b, "\nThe safe form (%s):\n\n```sql\n%s```\n", mdText(safe.Plan.Why), strings.ReplaceAll(safeScript(safe.Plan), "```", "` ` `"))
	}
	if r.Source != "" {
		fmt.Fprintf(b, "\nSource: %s\n", mdText(r.Source))
	}
}

// html writes one self-contained page: for each run, the application's
// latency over time with the migration's statements drawn over it
// (inline SVG, no script), then the text report.
func (r *RehearsalReport) html(w io.Writer) error {
	return rehearsalPage().Execute(w, map[string]any{"Title": "pgmedic rehearse migration " + r.Migration.Name, "Body": r.body()})
}

// body is the page's content: the verdict, the charts, the text report
// (a part of the demo's page too).
func (r *RehearsalReport) body() template.HTML {
	var text strings.Builder
	if err := r.Text(&text); err != nil {
		return template.HTML(template.HTMLEscapeString(err.Error()))
	}
	type chart struct {
		Name string
		SVG  template.HTML
	}
	var charts []chart
	top := 1.0
	end := 1.0
	for _, run := range r.Runs {
		for _, c := range run.Calls {
			top = math.Max(top, c.Seen())
			end = math.Max(end, c.Due()+c.Seen())
		}
		for _, s := range run.Steps {
			end = math.Max(end, s.EndMS)
		}
	}
	for _, run := range r.Runs {
		charts = append(charts, chart{Name: run.Plan.Name, SVG: timelineSVG(run, top, end)})
	}
	var b strings.Builder
	if err := rehearsalBody().Execute(&b, map[string]any{"Failing": r.Failing, "Charts": charts, "Text": text.String()}); err != nil {
		return template.HTML(template.HTMLEscapeString(err.Error()))
	}
	return template.HTML(b.String())
}

// timelineSVG draws each call of the application as a dot (x: when it
// was sent, y: its latency on a log scale, red when it failed) and each
// step of the migration as a shaded band, on axes shared by every run.
func timelineSVG(run *rehearse.Run, topMS, endMS float64) template.HTML {
	const w, h, left, bottom = 900.0, 220.0, 50.0, 20.0
	x := func(ms float64) float64 { return left + (w-left-10)*ms/endMS }
	ly := math.Log10(math.Max(topMS, 1)) + 1
	y := func(ms float64) float64 {
		return (h - bottom) * (1 - (math.Log10(math.Max(ms, 0.1))+1)/ly)
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, `<svg width="%.0f" height="%.0f" role="img" font-size="11">`, w, h)
	for i, s := range run.Steps {
		fmt.Fprintf(b, `<rect x="%.1f" y="0" width="%.1f" height="%.0f" fill="%s" opacity="0.35"><title>%s</title></rect>`,
			x(s.StartMS), math.Max(1, x(s.EndMS)-x(s.StartMS)), h-bottom, stepColor(s.Verdict), template.HTMLEscapeString(fmt.Sprintf("step %d (statement %d), %s: %s", i+1, s.Of, s.Verdict, printable.Clip(s.SQL, 120))))
	}
	for _, c := range run.Calls {
		color := "#2a5d9f"
		if c.Failed {
			color = "#c0392b"
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="1.6" fill="%s"/>`, x(c.Due()), y(c.Seen()), color)
	}
	for ms := 0.1; ms <= topMS*10; ms *= 10 {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="2" y="%.1f">%s</text>`, left, w-10, y(ms), y(ms), y(ms)+4, printable.MS(ms))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f">0 s</text><text x="%.0f" y="%.0f" text-anchor="end">%.1f s</text></svg>`, left, h-4, w-10, h-4, endMS/1000)
	return template.HTML(b.String())
}

func stepColor(verdict string) string {
	switch verdict {
	case rehearse.Queued:
		return "#e67e22"
	case rehearse.Failed:
		return "#c0392b"
	}
	return "#7fb77e"
}

var rehearsalPage = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("rehearsal").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
.verdict{font-size:1.4em;font-weight:bold}.key span{display:inline-block;width:1em;height:1em;vertical-align:middle;margin:0 .3em}</style></head>
<body data-ready="1"><!-- drawn without a script: ready as soon as it is parsed -->
<h1>{{.Title}}</h1>
{{.Body}}
</body></html>
`))
})

var rehearsalBody = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("rehearsal-body").Parse(`<div class="rehearsal">
{{if .Failing}}<p class="verdict">Risky as written</p><ul>{{range .Failing}}<li>{{.}}</li>{{end}}</ul>{{else}}<p class="verdict">Nothing risky</p>{{end}}
{{if .Charts}}<h3>The application's latency over the migration</h3>
<p class="key">Each dot is one statement of the application (when it was due, how long it took from then, log scale; <span style="display:inline-block;width:1em;height:1em;vertical-align:middle;background:#c0392b"></span>failed). Bands are the migration's steps: <span style="display:inline-block;width:1em;height:1em;vertical-align:middle;background:#7fb77e"></span>ok <span style="display:inline-block;width:1em;height:1em;vertical-align:middle;background:#e67e22"></span>queued the application <span style="display:inline-block;width:1em;height:1em;vertical-align:middle;background:#c0392b"></span>failed.</p>
{{range .Charts}}<h4>{{.Name}}</h4>{{.SVG}}{{end}}{{end}}
<pre>{{.Text}}</pre>
</div>
`))
})
