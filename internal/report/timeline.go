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
	const w, left, right = 960.0, 150.0, 12.0
	plotW := w - left - right
	from, to := t.From, t.To
	// The last tick's bar reaches one interval past it.
	if n := len(t.Ticks); n > 1 {
		last := t.Ticks[n-1].At.Add(t.Ticks[n-1].At.Sub(t.Ticks[0].At) / time.Duration(n-1))
		if last.After(to) {
			to = last
		}
	}
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	span := to.Sub(from).Seconds()
	x := func(at time.Time) float64 { return left + plotW*at.Sub(from).Seconds()/span }
	// A tick's bar reaches to the next tick (its last, one interval).
	barW := plotW / float64(max(len(t.Ticks), 1))
	if n := len(t.Ticks); n > 1 {
		barW = math.Min(barW, plotW*t.Ticks[n-1].At.Sub(t.Ticks[0].At).Seconds()/span/float64(n-1))
	}
	barW = math.Max(barW, 1)

	// The activities, the busiest first; beyond eight, "other".
	totals := map[string]int{}
	peak := 1
	for _, tk := range t.Ticks {
		n := 0
		for k, c := range tk.Sessions {
			totals[k] += c
			n += c
		}
		peak = max(peak, n)
	}
	keys := make([]string, 0, len(totals))
	for k := range totals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if totals[keys[i]] != totals[keys[j]] {
			return totals[keys[i]] > totals[keys[j]]
		}
		return keys[i] < keys[j]
	})
	const shown = 8
	color := map[string]string{}
	rank := map[string]int{}
	for i, k := range keys {
		if i < shown {
			prefix, _, _ := strings.Cut(k, "/")
			color[k] = activityColor(k, rank[prefix])
			rank[prefix]++
		}
	}
	esc := template.HTMLEscapeString
	b := &strings.Builder{}
	y := 8.0
	lane := func(label, sub string, h float64) (top float64) {
		fmt.Fprintf(b, `<text x="4" y="%.1f" font-weight="bold">%s</text>`, y+12, esc(label))
		if sub != "" {
			fmt.Fprintf(b, `<text x="4" y="%.1f" fill="#666">%s</text>`, y+26, esc(sub))
		}
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ccc"/>`, left, w-right, y+h, y+h)
		top = y
		y += h + 10
		return top
	}

	// Sessions by activity, stacked.
	const sessH = 150.0
	top := lane("sessions", fmt.Sprintf("peak %d", peak), sessH)
	var body strings.Builder
	for _, tk := range t.Ticks {
		base := top + sessH
		other := 0
		for i, k := range keys {
			c := tk.Sessions[k]
			if c == 0 {
				continue
			}
			if i >= shown {
				other += c
				continue
			}
			h := sessH * float64(c) / float64(peak)
			base -= h
			fmt.Fprintf(&body, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %d %s</title></rect>`,
				x(tk.At), base, barW, h, color[k], tk.At.UTC().Format("15:04:05.000"), c, esc(k))
		}
		if other > 0 {
			h := sessH * float64(other) / float64(peak)
			fmt.Fprintf(&body, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#bbb"><title>%s: %d other</title></rect>`, x(tk.At), base-h, barW, h, tk.At.UTC().Format("15:04:05.000"), other)
		}
	}
	b.WriteString(body.String())

	// The lock queue, and its head where it was longest.
	worst := -1
	peakWaiters := 0
	for i, tk := range t.Ticks {
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
	top = lane("lock waiters", "", lockH+headRow)
	if peakWaiters == 0 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" fill="#666">no session waited for a lock</text>`, left+4, top+12)
	} else {
		fmt.Fprintf(b, `<text x="4" y="%.1f" fill="#666">peak %d</text>`, top+26, peakWaiters)
	}
	for _, tk := range t.Ticks {
		if tk.LockWaiters == 0 {
			continue
		}
		h := lockH * float64(tk.LockWaiters) / float64(max(peakWaiters, 1))
		head := ""
		if tk.Head != nil {
			head = fmt.Sprintf("; head pid %d", tk.Head.PID)
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#c0392b"><title>%s: %d waiting for a lock%s</title></rect>`,
			x(tk.At), top+headRow+lockH-h, barW, h, tk.At.UTC().Format("15:04:05.000"), tk.LockWaiters, head)
	}
	if worst >= 0 && t.Ticks[worst].Head != nil {
		tk := t.Ticks[worst]
		h := tk.Head
		what := h.State
		if h.WaitType != "" {
			what += ", waiting on " + h.WaitType + "/" + h.Wait
		}
		label := fmt.Sprintf("head of the queue at %s: pid %d (%s), %d behind it", tk.At.UTC().Format("15:04:05"), h.PID, what, tk.HeadQueue)
		if h.Query != "" {
			label += ": " + printable.Clip(strings.Join(strings.Fields(h.Query), " "), 90)
		}
		hx := x(tk.At) + barW/2
		anchor := "start"
		room := w - right - hx
		if hx > left+plotW/2 {
			anchor, room = "end", hx-left
		}
		// About 6 px a character at this size: cut what would not fit
		// (the whole line is its tooltip).
		full := label
		label = printable.Clip(label, max(20, int(room/6.2)))
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333" stroke-dasharray="3 2"/>`, hx, hx, top+2, top+headRow+lockH)
		fmt.Fprintf(b, `<text class="head" x="%.1f" y="%.1f" text-anchor="%s" fill="#333">%s<title>%s</title></text>`, hx+map[string]float64{"start": 4, "end": -4}[anchor], top+11, anchor, esc(printable.String(label)), esc(printable.String(full)))
	}

	// PgBouncer's waiting clients.
	if t.PoolsSampled {
		const poolH = 48.0
		peakPool, peakWait := 0, 0.0
		for _, tk := range t.Ticks {
			peakPool, peakWait = max(peakPool, tk.PoolWaiting), math.Max(peakWait, tk.PoolMaxWaitMS)
		}
		sub := "no client waited"
		if peakPool > 0 {
			sub = fmt.Sprintf("peak %d, longest %s", peakPool, printable.MS(peakWait))
		}
		top = lane("pool waits", sub, poolH)
		for _, tk := range t.Ticks {
			if tk.PoolWaiting == 0 {
				continue
			}
			h := poolH * float64(tk.PoolWaiting) / float64(max(peakPool, 1))
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#e67e22"><title>%s: %d clients waiting in PgBouncer, the longest %s</title></rect>`,
				x(tk.At), top+poolH-h, barW, h, tk.At.UTC().Format("15:04:05.000"), tk.PoolWaiting, printable.MS(tk.PoolMaxWaitMS))
		}
	}

	// The triggers, a row each, in the order they first fired.
	if len(t.Fired) > 0 {
		var kinds []string
		for _, f := range t.Fired {
			if !slices.Contains(kinds, f.Kind) {
				kinds = append(kinds, f.Kind)
			}
		}
		const rowH = 16.0
		fmt.Fprintf(b, `<text x="4" y="%.1f" font-weight="bold">triggers</text>`, y+12)
		for i, k := range kinds {
			ry := y + float64(i)*rowH
			fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left-6, ry+12, esc(k))
			for _, f := range t.Fired {
				if f.Kind != k {
					continue
				}
				fmt.Fprintf(b, `<rect class="fired" x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s"><title>%s fired %s to %s</title></rect>`,
					x(f.From), ry+2, math.Max(barW, x(f.To)-x(f.From)+barW), rowH-4, triggerColors[i%len(triggerColors)], esc(k), f.From.UTC().Format("15:04:05"), f.To.UTC().Format("15:04:05"))
			}
		}
		y += float64(len(kinds))*rowH + 10
	}
	bottom := y - 10

	// Over every lane: the judged stretch, then the gaps.
	var over strings.Builder
	if j := t.Judged; j != nil {
		x0, x1 := x(j.From), x(j.To)+barW
		fmt.Fprintf(&over, `<rect class="judged" x="%.1f" y="4" width="%.1f" height="%.1f" fill="#2a5d9f" fill-opacity="0.08" stroke="#2a5d9f" stroke-dasharray="4 3"><title>%s</title></rect>`,
			x0, math.Max(1, x1-x0), bottom-4, esc(j.Note))
	}
	for _, g := range t.Gaps {
		x0, x1 := math.Max(left, x(g.From)), math.Min(w-right, x(g.To))
		if x1 <= x0 {
			x1 = x0 + 2
		}
		fmt.Fprintf(&over, `<rect class="gap" x="%.1f" y="4" width="%.1f" height="%.1f" fill="url(#gap)"><title>not sampled %s to %s: %s</title></rect>`,
			x0, x1-x0, bottom-4, g.From.UTC().Format("15:04:05"), g.To.UTC().Format("15:04:05"), esc(g.Note))
		fmt.Fprintf(&over, `<text x="%.1f" y="18" fill="#555" font-size="10">gap</text>`, x0+2)
	}

	// The time axis.
	var axis strings.Builder
	layout := "15:04:05"
	if to.Sub(from) < 30*time.Second {
		layout = "15:04:05.0"
	}
	for i := 0; i <= 5; i++ {
		at := from.Add(time.Duration(float64(to.Sub(from)) * float64(i) / 5))
		anchor := map[int]string{0: "start", 5: "end"}[i]
		if anchor == "" {
			anchor = "middle"
		}
		fmt.Fprintf(&axis, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#999"/><text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`,
			x(at), x(at), bottom, bottom+4, x(at), bottom+16, anchor, at.UTC().Format(layout))
	}
	fmt.Fprintf(&axis, `<text x="4" y="%.1f" fill="#666">UTC, %s</text>`, bottom+16, spanText(to.Sub(from)))
	height := bottom + 24

	var out strings.Builder
	fmt.Fprintf(&out, `<svg class="timeline" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" font-size="11" font-family="system-ui,sans-serif" aria-label="%s">`,
		w, height, w, height, esc(fmt.Sprintf("timeline of %d ticks from %s to %s", len(t.Ticks), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))))
	out.WriteString(`<defs><pattern id="gap" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f4f4f4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern></defs>`)
	out.WriteString(b.String())
	out.WriteString(over.String())
	out.WriteString(axis.String())
	out.WriteString(`</svg>`)

	// The key: each activity shown, the other, the judged stretch.
	out.WriteString(`<p class="key">`)
	for i, k := range keys {
		if i == shown {
			out.WriteString(`<span style="background:#bbb"></span>other `)
			break
		}
		fmt.Fprintf(&out, `<span style="background:%s"></span>%s `, color[k], esc(k))
	}
	if t.Judged != nil {
		out.WriteString(`<span style="background:#e9eef5;border:1px dashed #2a5d9f"></span>judged by the rules `)
	}
	if len(t.Gaps) > 0 {
		out.WriteString(`<span style="background:#ddd"></span>not sampled`)
	}
	out.WriteString(`</p>`)
	return template.HTML(out.String())
}

// spanText says how long a timeline is, to the tenth of a second below
// ten seconds.
func spanText(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
