// pgmedic's report page: sortable tables, copy buttons, and the charts,
// drawn from the JSON data block (the same JSON --format json prints).
// It loads nothing: uPlot is inlined before this script.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("pgmedic-data").textContent);
  var COLORS = ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#57606a", "#953800"];

  // Tables: a header with data-sort sorts its column (click, Enter or
  // Space); numbers sort by their data-v value.
  function sortTable(table, th) {
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-sort") === "num";
    var asc = th.getAttribute("aria-sort") === "descending";
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var key = function (tr) {
      var td = tr.cells[col];
      if (!td) return numeric ? 0 : "";
      var v = td.getAttribute("data-v");
      if (numeric) return parseFloat(v !== null ? v : td.textContent) || 0;
      return (v !== null ? v : td.textContent).toLowerCase();
    };
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      var c = x < y ? -1 : x > y ? 1 : 0;
      return asc ? c : -c;
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r); });
    body.appendChild(frag);
  }
  document.querySelectorAll("table.sortable th[data-sort]").forEach(function (th) {
    th.tabIndex = 0;
    var table = th.closest("table");
    th.addEventListener("click", function () { sortTable(table, th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, th); }
    });
  });

  // Copy buttons copy the fix's SQL as text.
  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(ta);
    return ok;
  }
  document.querySelectorAll("button.copy").forEach(function (b) {
    b.addEventListener("click", function () {
      var text = document.getElementById(b.getAttribute("data-target")).textContent;
      var done = function () {
        b.textContent = "Copied";
        b.setAttribute("data-copied", "1");
        setTimeout(function () { b.textContent = "Copy"; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { if (fallbackCopy(text)) done(); });
      } else if (fallbackCopy(text)) {
        done();
      }
    });
  });

  // Printing shows every plan node.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });

  function chart(el, title, xs, series) {
    if (!xs.length || typeof uPlot === "undefined") {
      el.textContent = "no data to chart";
      el.setAttribute("data-points", "0");
      return;
    }
    var width = Math.max(320, Math.min(1160, el.clientWidth || 900));
    var opts = {
      title: title, width: width, height: 220,
      scales: { x: { time: true } },
      series: [{}].concat(series.map(function (s, k) {
        return { label: s.label, stroke: COLORS[k % COLORS.length], width: 1.5, points: { show: xs.length < 60 } };
      })),
      legend: { live: false }
    };
    new uPlot(opts, [xs].concat(series.map(function (s) { return s.values; })), el);
    el.setAttribute("data-points", String(xs.length * series.length));
  }

  // Active sessions by wait event, one line per event (the eight most
  // seen; the rest summed), from check's samples of pg_stat_activity.
  function activity(el, sessions) {
    var samples = (sessions && sessions.samples) || [];
    var totals = {}, ticks = [];
    samples.forEach(function (s) {
      var counts = {};
      (s.backends || []).forEach(function (b) {
        if (b.state !== "active") return;
        var k = b.wait_type ? b.wait_type + ": " + b.wait : "CPU (no wait)";
        counts[k] = (counts[k] || 0) + 1;
        totals[k] = (totals[k] || 0) + 1;
      });
      ticks.push({ at: Date.parse(s.at) / 1000, counts: counts });
    });
    var keys = Object.keys(totals).sort(function (a, b) { return totals[b] - totals[a]; });
    var top = keys.slice(0, 8), rest = keys.slice(8);
    var series = top.map(function (k) {
      return { label: k, values: ticks.map(function (t) { return t.counts[k] || 0; }) };
    });
    if (rest.length) {
      series.push({ label: "other", values: ticks.map(function (t) {
        return rest.reduce(function (n, k) { return n + (t.counts[k] || 0); }, 0);
      }) });
    }
    if (!series.length) series.push({ label: "active sessions", values: ticks.map(function () { return 0; }) });
    chart(el, "active sessions by wait event", ticks.map(function (t) { return t.at; }), series);
  }

  // The server log per minute: statements, errors, lock waits and
  // connections.
  function minutes(el, perMinute) {
    var keys = Object.keys(perMinute || {}).filter(function (k) { return k !== "unknown"; }).sort();
    var xs = keys.map(function (k) { return Date.parse(k) / 1000; });
    var pick = function (f) { return keys.map(function (k) { return perMinute[k][f] || 0; }); };
    chart(el, "per minute", xs, [
      { label: "statements", values: pick("statements") },
      { label: "errors", values: pick("errors") },
      { label: "lock waits", values: pick("lock_waits") },
      { label: "connections", values: pick("connections") }
    ]);
  }

  document.querySelectorAll(".chart[data-chart]").forEach(function (el) {
    var i = parseInt(el.getAttribute("data-part").slice(1), 10);
    var part = data.parts[i] || {};
    try {
      if (el.getAttribute("data-chart") === "activity" && part.check) activity(el, part.check.sessions);
      if (el.getAttribute("data-chart") === "minutes" && part.logs) minutes(el, part.logs.per_minute);
    } catch (e) {
      el.textContent = "the chart could not be drawn: " + e.message;
      throw e;
    }
  });
  document.body.setAttribute("data-ready", "1");
})();
