package profile

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"strings"

	"github.com/pgmedic/pgmedic/internal/printable"
)

const (
	flameWidth = 1200.0
	flameRow   = 17.0
	flameTop   = 44.0
	// flameMinShare leaves out frames narrower than this share of the
	// samples: they cannot be read, and a deep profile has thousands.
	flameMinShare = 0.0005
)

// FlameSVG draws folded stacks as an interactive flame graph: one SVG
// that opens on its own in a browser or inside the HTML report. A click
// zooms into a frame, "Search" highlights the frames whose name matches
// and says their share, and colours depend only on the function's name,
// so the same function has the same colour in every graph.
func FlameSVG(w io.Writer, title string, folded map[string]int64) error {
	root := tree(folded)
	depth := maxDepth(root, 0)
	height := flameTop + float64(depth+1)*flameRow + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="flame" version="1.1" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" data-width="%.0f" font-family="Verdana, sans-serif" font-size="12">`+"\n",
		flameWidth, height, flameWidth, height, flameWidth)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#f8f8f8"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" text-anchor="middle" font-size="15">%s</text>`+"\n", flameWidth/2, esc(title))
	fmt.Fprintf(&b, `<text class="reset" x="8" y="36" style="cursor:pointer" tabindex="0">Reset zoom</text>`+
		`<text class="search" x="%.0f" y="36" text-anchor="end" style="cursor:pointer" tabindex="0">Search</text>`+
		`<text class="matched" x="%.0f" y="36" text-anchor="end"></text>`+"\n", flameWidth-8, flameWidth-70)
	if root.count > 0 {
		drawFrames(&b, root, 0, 0, float64(root.count), height)
	}
	b.WriteString(`<script><![CDATA[` + flameJS + `]]></script>` + "\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func maxDepth(n *node, d int) int {
	m := d
	for _, k := range n.kids {
		m = max(m, maxDepth(k, d+1))
	}
	return m
}

// drawFrames draws n at depth d starting at share x of the width, then
// its children side by side above it.
func drawFrames(b *strings.Builder, n *node, d int, x, total, height float64) {
	w := float64(n.count) / total
	if w < flameMinShare {
		return
	}
	y := height - 8 - float64(d+1)*flameRow
	name := printable.String(n.name)
	label := fmt.Sprintf("%s (%d samples, %.2f%%)", name, n.count, 100*w)
	px, pw := x*flameWidth, w*flameWidth
	fmt.Fprintf(b, `<g class="f" data-x="%.6f" data-w="%.6f" data-d="%d" data-n="%s"><title>%s</title>`+
		`<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" rx="2" fill="%s"/><text x="%.1f" y="%.0f">%s</text></g>`+"\n",
		x, w, d, esc(name), esc(label), px, y, max(pw-0.5, 0.1), flameRow-1, colour(n.name, d), px+3, y+12, esc(fit(name, pw)))
	for _, k := range n.kids {
		drawFrames(b, k, d+1, x, total, height)
		x += float64(k.count) / total
	}
}

// fit clips a name to what a frame's width shows (about 7 pixels a
// character at 12 pixels).
func fit(name string, px float64) string {
	n := int((px - 6) / 7)
	switch {
	case n < 3:
		return ""
	case len(name) <= n:
		return name
	}
	return name[:n-2] + ".."
}

// colour is a warm colour fixed by the function's name; statements (the
// roots pgmedic adds) are blue, kernel and unknown frames grey-brown.
func colour(name string, depth int) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	switch {
	case depth == 0 && name == "all":
		return "rgb(200,200,200)"
	case strings.HasPrefix(name, "statement "):
		return fmt.Sprintf("rgb(%d,%d,230)", 90+v%50, 140+v%60)
	case strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 170+v%40, 150+v%40, 120+v%30)
	}
	return fmt.Sprintf("rgb(%d,%d,%d)", 205+v%50, 80+(v>>8)%120, 40+(v>>16)%50)
}

func esc(s string) string { return html.EscapeString(s) }

// flameJS zooms and searches; it finds its own SVG, so several graphs can
// share a page.
const flameJS = `
(function () {
  var svg = document.currentScript && document.currentScript.closest ? document.currentScript.closest("svg") : document.documentElement;
  var W = +svg.getAttribute("data-width");
  var gs = Array.prototype.slice.call(svg.querySelectorAll("g.f"));
  function fit(name, px) { var n = Math.floor((px - 6) / 7); if (n < 3) return ""; return name.length <= n ? name : name.slice(0, n - 2) + ".."; }
  function zoom(x0, w0, d0) {
    gs.forEach(function (g) {
      var x = +g.getAttribute("data-x"), w = +g.getAttribute("data-w"), d = +g.getAttribute("data-d");
      var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9;
      var below = d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
      if (!inside && !below) { g.style.display = "none"; return; }
      g.style.display = "";
      var nx = below ? 0 : (x - x0) / w0 * W, nw = below ? W : w / w0 * W;
      var r = g.querySelector("rect"), t = g.querySelector("text");
      r.setAttribute("x", nx); r.setAttribute("width", Math.max(nw - 0.5, 0.1));
      t.setAttribute("x", nx + 3); t.textContent = fit(g.getAttribute("data-n"), nw);
    });
  }
  gs.forEach(function (g) {
    g.style.cursor = "pointer";
    g.addEventListener("click", function () { zoom(+g.getAttribute("data-x"), +g.getAttribute("data-w"), +g.getAttribute("data-d")); });
  });
  var reset = svg.querySelector(".reset"), search = svg.querySelector(".search"), matched = svg.querySelector(".matched");
  function key(el, fn) { el.addEventListener("click", fn); el.addEventListener("keydown", function (e) { if (e.key === "Enter") fn(); }); }
  key(reset, function () { zoom(0, 1, 0); });
  key(search, function () {
    var term = window.prompt("Highlight the frames whose name matches (a regular expression):", "");
    var re = null;
    try { re = term ? new RegExp(term) : null; } catch (e) { re = null; }
    var spans = [];
    gs.forEach(function (g) {
      var r = g.querySelector("rect");
      if (!r.getAttribute("data-fill")) r.setAttribute("data-fill", r.getAttribute("fill"));
      var hit = re && re.test(g.getAttribute("data-n"));
      r.setAttribute("fill", hit ? "rgb(230,0,230)" : r.getAttribute("data-fill"));
      if (hit) spans.push([+g.getAttribute("data-x"), +g.getAttribute("data-w")]);
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var total = 0, end = -1;
    spans.forEach(function (s) { var a = Math.max(s[0], end), e = s[0] + s[1]; if (e > a) total += e - a; end = Math.max(end, e); });
    matched.textContent = re ? "matched " + (100 * total).toFixed(1) + "%" : "";
  });
})();
`
