package report

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// activityColor gives each kind of activity a colour a reader learns
// once: on CPU green, locks red, I/O blue, waiting for the client purple,
// internal locks olive; others grey.
func activityColor(key string, rank int) string {
	shade := func(colors ...string) string { return colors[rank%len(colors)] }
	switch {
	case key == "CPU":
		return "#3a9d5d"
	case strings.HasPrefix(key, "Lock/"):
		return shade("#c0392b", "#e67e22", "#a93226", "#f1948a")
	case strings.HasPrefix(key, "LWLock/"):
		return shade("#b7950b", "#d4ac0d")
	case strings.HasPrefix(key, "IO/"):
		return shade("#2a5d9f", "#5dade2", "#1b4f72")
	case strings.HasPrefix(key, "Client/"), strings.HasPrefix(key, "idle in transaction"):
		return shade("#7d3c98", "#af7ac5")
	}
	return shade("#7f8c8d", "#aab7b8", "#566573")
}

// triggerColors colour the triggers' rows in turn.
var triggerColors = []string{"#c0392b", "#e67e22", "#7d3c98", "#2a5d9f", "#3a9d5d", "#b7950b", "#566573"}

// sessionsTimelineSVG draws a timeline as lanes on one time axis: the sessions
// stacked by activity at each tick, the lock queue with its head at the
// worst tick, PgBouncer's waiting clients (when sampled), and the
// triggers as they fired; the stretch the rules judged is shaded across
// every lane and the gaps are hatched. Drawn in Go, so it needs no script
// and prints as it shows.
func sessionsTimelineSVG(t *model.Timeline) template.HTML {
	if t == nil || len(t.Ticks) == 0 {
		return ""
	}
	d := newTimelineDrawing(t)
	d.sessionsLane()
	d.lockLane()
	d.poolLane()
	d.triggersLane()
	bottom := d.y - 10
	over := d.overlays(bottom)
	axis := d.axis(bottom)
	height := bottom + 24

	var out strings.Builder
	fmt.Fprintf(&out, `<svg class="timeline" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" font-size="11" font-family="system-ui,sans-serif" aria-label="%s">`,
		timelineW, height, timelineW, height, esc(fmt.Sprintf("timeline of %d ticks from %s to %s", len(t.Ticks), d.from.UTC().Format(time.RFC3339), d.to.UTC().Format(time.RFC3339))))
	out.WriteString(`<defs><pattern id="gap" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f4f4f4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern></defs>`)
	out.WriteString(d.b.String())
	out.WriteString(over)
	out.WriteString(axis)
	out.WriteString(`</svg>`)
	d.key(&out)
	return template.HTML(out.String())
}

// The timeline's geometry: its width, the labels' column on the left, the
// margin on the right, and the most activities shown by colour.
const (
	timelineW, timelineLeft, timelineRight = 960.0, 150.0, 12.0
	timelinePlotW                          = timelineW - timelineLeft - timelineRight
	timelineShown                          = 8
)

var esc = template.HTMLEscapeString

// timelineDrawing is a timeline being drawn: its time scale, the
// activities by rank with their colours, and the lanes drawn so far,
// down to y.
type timelineDrawing struct {
	t        *model.Timeline
	from, to time.Time
	span     float64
	barW     float64
	keys     []string
	color    map[string]string
	peak     int
	b        *strings.Builder
	y        float64
}

func newTimelineDrawing(t *model.Timeline) *timelineDrawing {
	d := &timelineDrawing{t: t, from: t.From, to: t.To, b: &strings.Builder{}, y: 8}
	// The last tick's bar reaches one interval past it.
	if n := len(t.Ticks); n > 1 {
		last := t.Ticks[n-1].At.Add(t.Ticks[n-1].At.Sub(t.Ticks[0].At) / time.Duration(n-1))
		if last.After(d.to) {
			d.to = last
		}
	}
	if !d.to.After(d.from) {
		d.to = d.from.Add(time.Second)
	}
	d.span = d.to.Sub(d.from).Seconds()
	// A tick's bar reaches to the next tick (its last, one interval).
	d.barW = timelinePlotW / float64(max(len(t.Ticks), 1))
	if n := len(t.Ticks); n > 1 {
		d.barW = math.Min(d.barW, timelinePlotW*t.Ticks[n-1].At.Sub(t.Ticks[0].At).Seconds()/d.span/float64(n-1))
	}
	d.barW = math.Max(d.barW, 1)
	d.rankActivities()
	return d
}

func (d *timelineDrawing) x(at time.Time) float64 {
	return timelineLeft + timelinePlotW*at.Sub(d.from).Seconds()/d.span
}

// rankActivities orders the activities, the busiest first, and colours
// the first eight; beyond them, "other".
func (d *timelineDrawing) rankActivities() {
	totals := map[string]int{}
	d.peak = 1
	for _, tk := range d.t.Ticks {
		n := 0
		for k, c := range tk.Sessions {
			totals[k] += c
			n += c
		}
		d.peak = max(d.peak, n)
	}
	d.keys = make([]string, 0, len(totals))
	for k := range totals {
		d.keys = append(d.keys, k)
	}
	sort.Slice(d.keys, func(i, j int) bool {
		if totals[d.keys[i]] != totals[d.keys[j]] {
			return totals[d.keys[i]] > totals[d.keys[j]]
		}
		return d.keys[i] < d.keys[j]
	})
	d.color = map[string]string{}
	rank := map[string]int{}
	for i, k := range d.keys {
		if i < timelineShown {
			prefix, _, _ := strings.Cut(k, "/")
			d.color[k] = activityColor(k, rank[prefix])
			rank[prefix]++
		}
	}
}

// lane starts a lane of height h, labelled, and returns its top.
func (d *timelineDrawing) lane(label, sub string, h float64) (top float64) {
	fmt.Fprintf(d.b, `<text x="4" y="%.1f" font-weight="bold">%s</text>`, d.y+12, esc(label))
	if sub != "" {
		fmt.Fprintf(d.b, `<text x="4" y="%.1f" fill="#666">%s</text>`, d.y+26, esc(sub))
	}
	fmt.Fprintf(d.b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ccc"/>`, timelineLeft, timelineW-timelineRight, d.y+h, d.y+h)
	top = d.y
	d.y += h + 10
	return top
}

// sessionsLane stacks the sessions by activity at each tick.
func (d *timelineDrawing) sessionsLane() {
	const sessH = 150.0
	top := d.lane("sessions", fmt.Sprintf("peak %d", d.peak), sessH)
	for _, tk := range d.t.Ticks {
		base := top + sessH
		other := 0
		for i, k := range d.keys {
			c := tk.Sessions[k]
			if c == 0 {
				continue
			}
			if i >= timelineShown {
				other += c
				continue
			}
			h := sessH * float64(c) / float64(d.peak)
			base -= h
			fmt.Fprintf(d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %d %s</title></rect>`,
				d.x(tk.At), base, d.barW, h, d.color[k], tk.At.UTC().Format("15:04:05.000"), c, esc(k))
		}
		if other > 0 {
			h := sessH * float64(other) / float64(d.peak)
			fmt.Fprintf(d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#bbb"><title>%s: %d other</title></rect>`, d.x(tk.At), base-h, d.barW, h, tk.At.UTC().Format("15:04:05.000"), other)
		}
	}
}

// lockLane draws the lock queue, and its head where it was longest.
func (d *timelineDrawing) lockLane() {
	worst := -1
	peakWaiters := 0
	for i, tk := range d.t.Ticks {
		if tk.LockWaiters > peakWaiters {
			worst, peakWaiters = i, tk.LockWaiters
		}
	}
	// The head's line sits above the bars, in a row of its own; a lane
	// with no waiter is one line saying so.
	lockH, headRow := 56.0, 16.0
	if peakWaiters == 0 {
		lockH, headRow = 0, 16
	}
	top := d.lane("lock waiters", "", lockH+headRow)
	if peakWaiters == 0 {
		fmt.Fprintf(d.b, `<text x="%.0f" y="%.1f" fill="#666">no session waited for a lock</text>`, timelineLeft+4, top+12)
	} else {
		fmt.Fprintf(d.b, `<text x="4" y="%.1f" fill="#666">peak %d</text>`, top+26, peakWaiters)
	}
	for _, tk := range d.t.Ticks {
		if tk.LockWaiters == 0 {
			continue
		}
		h := lockH * float64(tk.LockWaiters) / float64(max(peakWaiters, 1))
		head := ""
		if tk.Head != nil {
			head = fmt.Sprintf("; head pid %d", tk.Head.PID)
		}
		fmt.Fprintf(d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#c0392b"><title>%s: %d waiting for a lock%s</title></rect>`,
			d.x(tk.At), top+headRow+lockH-h, d.barW, h, tk.At.UTC().Format("15:04:05.000"), tk.LockWaiters, head)
	}
	if worst >= 0 && d.t.Ticks[worst].Head != nil {
		d.queueHead(d.t.Ticks[worst], top, headRow, lockH)
	}
}

// queueHead names the head of the lock queue at its longest, above the
// lane's bars: its pid, state, how many wait behind it, its statement.
func (d *timelineDrawing) queueHead(tk model.TimelineTick, top, headRow, lockH float64) {
	h := tk.Head
	what := h.State
	if h.WaitType != "" {
		what += ", waiting on " + h.WaitType + "/" + h.Wait
	}
	label := fmt.Sprintf("head of the queue at %s: pid %d (%s), %d behind it", tk.At.UTC().Format("15:04:05"), h.PID, what, tk.HeadQueue)
	if h.Query != "" {
		label += ": " + printable.Clip(strings.Join(strings.Fields(h.Query), " "), 90)
	}
	hx := d.x(tk.At) + d.barW/2
	anchor := "start"
	room := timelineW - timelineRight - hx
	if hx > timelineLeft+timelinePlotW/2 {
		anchor, room = "end", hx-timelineLeft
	}
	// About 6 px a character at this size: cut what would not fit
	// (the whole line is its tooltip).
	full := label
	label = printable.Clip(label, max(20, int(room/6.2)))
	fmt.Fprintf(d.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="3 2"/>`, hx, hx, top+2, top+headRow+lockH)
	fmt.Fprintf(d.b, `<text class="head" x="%.1f" y="%.1f" text-anchor="%s" fill="#333">%s<title>%s</title></text>`, hx+map[string]float64{"start": 4, "end": -4}[anchor], top+11, anchor, esc(printable.String(label)), esc(printable.String(full)))
}

// poolLane draws PgBouncer's waiting clients, when its pools were sampled.
func (d *timelineDrawing) poolLane() {
	if !d.t.PoolsSampled {
		return
	}
	const poolH = 48.0
	peakPool, peakWait := 0, 0.0
	for _, tk := range d.t.Ticks {
		peakPool, peakWait = max(peakPool, tk.PoolWaiting), math.Max(peakWait, tk.PoolMaxWaitMS)
	}
	sub := "no client waited"
	if peakPool > 0 {
		sub = fmt.Sprintf("peak %d, longest %s", peakPool, printable.MS(peakWait))
	}
	top := d.lane("pool waits", sub, poolH)
	for _, tk := range d.t.Ticks {
		if tk.PoolWaiting == 0 {
			continue
		}
		h := poolH * float64(tk.PoolWaiting) / float64(max(peakPool, 1))
		fmt.Fprintf(d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#e67e22"><title>%s: %d clients waiting in PgBouncer, the longest %s</title></rect>`,
			d.x(tk.At), top+poolH-h, d.barW, h, tk.At.UTC().Format("15:04:05.000"), tk.PoolWaiting, printable.MS(tk.PoolMaxWaitMS))
	}
}

// triggersLane draws the triggers, a row each, in the order they first
// fired.
func (d *timelineDrawing) triggersLane() {
	if len(d.t.Fired) == 0 {
		return
	}
	var kinds []string
	for _, f := range d.t.Fired {
		if !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	const rowH = 16.0
	fmt.Fprintf(d.b, `<text x="4" y="%.1f" font-weight="bold">triggers</text>`, d.y+12)
	for i, k := range kinds {
		ry := d.y + float64(i)*rowH
		fmt.Fprintf(d.b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, timelineLeft-6, ry+12, esc(k))
		for _, f := range d.t.Fired {
			if f.Kind != k {
				continue
			}
			fmt.Fprintf(d.b, `<rect class="fired" x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s"><title>%s fired %s to %s</title></rect>`,
				d.x(f.From), ry+2, math.Max(d.barW, d.x(f.To)-d.x(f.From)+d.barW), rowH-4, triggerColors[i%len(triggerColors)], esc(k), f.From.UTC().Format("15:04:05"), f.To.UTC().Format("15:04:05"))
		}
	}
	d.y += float64(len(kinds))*rowH + 10
}

// overlays shade, over every lane, the judged stretch and then the gaps.
func (d *timelineDrawing) overlays(bottom float64) string {
	var over strings.Builder
	if j := d.t.Judged; j != nil {
		x0, x1 := d.x(j.From), d.x(j.To)+d.barW
		fmt.Fprintf(&over, `<rect class="judged" x="%.1f" y="4" width="%.1f" height="%.1f" fill="#2a5d9f" fill-opacity="0.08" stroke="#2a5d9f" stroke-dasharray="4 3"><title>%s</title></rect>`,
			x0, math.Max(1, x1-x0), bottom-4, esc(j.Note))
	}
	for _, g := range d.t.Gaps {
		x0, x1 := math.Max(timelineLeft, d.x(g.From)), math.Min(timelineW-timelineRight, d.x(g.To))
		if x1 <= x0 {
			x1 = x0 + 2
		}
		fmt.Fprintf(&over, `<rect class="gap" x="%.1f" y="4" width="%.1f" height="%.1f" fill="url(#gap)"><title>not sampled %s to %s: %s</title></rect>`,
			x0, x1-x0, bottom-4, g.From.UTC().Format("15:04:05"), g.To.UTC().Format("15:04:05"), esc(g.Note))
		fmt.Fprintf(&over, `<text x="%.1f" y="18" fill="#555" font-size="10">gap</text>`, x0+2)
	}
	return over.String()
}

// axis draws the time axis under the lanes.
func (d *timelineDrawing) axis(bottom float64) string {
	var axis strings.Builder
	layout := "15:04:05"
	if d.to.Sub(d.from) < 30*time.Second {
		layout = "15:04:05.0"
	}
	for i := 0; i <= 5; i++ {
		at := d.from.Add(time.Duration(float64(d.to.Sub(d.from)) * float64(i) / 5))
		anchor := map[int]string{0: "start", 5: "end"}[i]
		if anchor == "" {
			anchor = "middle"
		}
		fmt.Fprintf(&axis, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#999"/><text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`,
			d.x(at), d.x(at), bottom, bottom+4, d.x(at), bottom+16, anchor, at.UTC().Format(layout))
	}
	fmt.Fprintf(&axis, `<text x="4" y="%.1f" fill="#666">UTC, %s</text>`, bottom+16, spanText(d.to.Sub(d.from)))
	return axis.String()
}

// key writes the legend: each activity shown, the other, the judged
// stretch, the gaps.
func (d *timelineDrawing) key(out *strings.Builder) {
	out.WriteString(`<p class="key">`)
	for i, k := range d.keys {
		if i == timelineShown {
			out.WriteString(`<span style="background:#bbb"></span>other `)
			break
		}
		fmt.Fprintf(out, `<span style="background:%s"></span>%s `, d.color[k], esc(k))
	}
	if d.t.Judged != nil {
		out.WriteString(`<span style="background:#e9eef5;border:1px dashed #2a5d9f"></span>judged by the rules `)
	}
	if len(d.t.Gaps) > 0 {
		out.WriteString(`<span style="background:#ddd"></span>not sampled`)
	}
	out.WriteString(`</p>`)
}

// spanText says how long a timeline is, to the tenth of a second below
// ten seconds.
func spanText(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
