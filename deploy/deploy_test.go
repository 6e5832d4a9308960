// Package deploy holds what people start from to run pgmedic watch under
// their own monitoring: Prometheus's scrape example, recording and alert
// rules (prometheus/), and a Grafana dashboard (grafana/). The tests hold
// them to the series watch exports and run them in a real Prometheus.
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pgmedic/pgmedic/internal/testkit"
	"github.com/pgmedic/pgmedic/internal/watch"
)

const installedBy = "scripts/install-deps.sh unpacks Debian's prometheus package"

// TestPromtool: the scrape example and the rules are valid for Debian's
// Prometheus, and the alerts' unit tests pass.
func TestPromtool(t *testing.T) {
	promtool := testkit.Tool(t, "promtool", installedBy)
	for _, args := range [][]string{
		{"check", "config", "prometheus/prometheus.yml"},
		{"check", "rules", "prometheus/pgmedic-rules.yml"},
		{"test", "rules", "prometheus/pgmedic-rules.test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// series is what a selector may name: watch's families (with the
// target's labels, the family's own, and job and instance that
// Prometheus adds), the rules' recorded series, and Prometheus's up.
type series map[string][]string

func known(t *testing.T, rules []rule) series {
	s := series{"up": {"job", "instance"}}
	for _, f := range watch.Families {
		labels := []string{"job", "instance"}
		if f.PerTarget {
			labels = append(labels, "target")
		}
		s[f.Name] = append(labels, f.Labels...)
	}
	for _, r := range rules {
		if r.Record != "" {
			s[r.Record] = []string{"job", "instance", "target"}
		}
	}
	return s
}

type rule struct {
	Record, Alert, Expr string
	Labels              map[string]string
}

func readRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("prometheus/pgmedic-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct{ Rules []rule }
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("prometheus/pgmedic-rules.yml: %v", err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

var (
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	grouping = regexp.MustCompile(`\b(by|on|without|ignoring)\s*\(([^)]*)\)`)
	// A series name: ours start with pgmedic_ or are recorded (level:
	// metric:operations); functions, keywords and durations are neither.
	name = regexp.MustCompile(`\b(pgmedic_[a-z_]+|[a-z_]+:[a-z_]+:[a-z0-9_]+)\b`)
)

// problems lists what a PromQL expression names that watch does not
// export: unknown series, labels a series does not have, grouping by
// labels none of its series has. extra are labels allowed besides
// (a fleet file's, in test series).
func (s series) problems(expr string, extra ...string) []string {
	var out []string
	// Label values are free text: blank them so that a value is never
	// taken for a name.
	e := quoted.ReplaceAllString(expr, `""`)
	var labels []string
	for _, n := range name.FindAllString(e, -1) {
		l, ok := s[n]
		if !ok {
			out = append(out, "unknown series "+n)
		}
		labels = append(labels, l...)
	}
	for _, m := range selector.FindAllStringSubmatch(e, -1) {
		l, ok := s[m[1]]
		if !ok {
			if !strings.Contains(m[1], ":") && !strings.HasPrefix(m[1], "pgmedic_") {
				out = append(out, "unknown series "+m[1])
			}
			continue
		}
		labels = append(labels, l...)
		for _, mm := range matcher.FindAllStringSubmatch(m[2], -1) {
			if mm[1] != "__name__" && !slices.Contains(l, mm[1]) && !slices.Contains(extra, mm[1]) {
				out = append(out, fmt.Sprintf("%s has no label %s", m[1], mm[1]))
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) && !slices.Contains(extra, l) {
				out = append(out, fmt.Sprintf("%s (%s) names a label no series here has", g[1], l))
			}
		}
	}
	if len(name.FindAllString(e, -1)) == 0 && !strings.Contains(e, "up{") {
		out = append(out, "names no series watch exports")
	}
	return out
}

// TestSeriesWatchExports: the rules, the series the alerts' unit tests
// feed them, and every query of the dashboard name only series watch
// exports, with their labels.
func TestSeriesWatchExports(t *testing.T) {
	rules := readRules(t)
	s := known(t, rules)
	for _, r := range rules {
		for _, p := range s.problems(r.Expr) {
			t.Errorf("rule %s%s: %s", r.Record, r.Alert, p)
		}
	}
	b, err := os.ReadFile("prometheus/pgmedic-rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			InputSeries []struct{ Series string } `yaml:"input_series"`
		}
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fed := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			// env is a label of the fleet file the tests pretend to.
			for _, p := range s.problems(in.Series, "env") {
				t.Errorf("test series %s: %s", in.Series, p)
			}
			n, _, _ := strings.Cut(in.Series, "{")
			fed[n] = true
		}
	}
	// Each family an alert reads is fed to the alerts' tests.
	for _, r := range rules {
		for _, n := range name.FindAllString(r.Expr, -1) {
			if _, family := s[n]; family && !strings.Contains(n, ":") && !fed[n] {
				t.Errorf("rule %s%s reads %s, which no unit test feeds", r.Record, r.Alert, n)
			}
		}
	}

	var dash struct {
		UID    string
		Panels []struct {
			ID      int
			Type    string
			Title   string
			GridPos struct{ X, Y, W, H int }
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
		Annotations struct {
			List []struct{ Name, Expr string }
		}
	}
	b, err = os.ReadFile("grafana/pgmedic.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/pgmedic.json: %v", err)
	}
	// A dashboard Grafana imports: a uid, panels with distinct ids placed
	// inside its 24 columns, every panel that queries with a title.
	if dash.UID == "" {
		t.Error("the dashboard has no uid")
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is placed at %+v, outside Grafana's 24 columns", p.Title, p.GridPos)
		}
		if p.Type != "row" && (p.Title == "" || len(p.Targets) == 0) {
			t.Errorf("panel %d (%s) has no title or no query", p.ID, p.Type)
		}
	}
	queries := map[string]string{}
	for _, p := range dash.Panels {
		for i, q := range p.Targets {
			queries[fmt.Sprintf("panel %q query %d", p.Title, i)] = q.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			queries["variable "+v.Name] = fmt.Sprint(q["query"])
		}
	}
	for _, a := range dash.Annotations.List {
		queries["annotation "+a.Name] = a.Expr
	}
	keys := make([]string, 0, len(queries))
	for k := range queries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	panels := 0
	for _, k := range keys {
		if strings.HasPrefix(k, "panel") {
			panels++
		}
		// Grafana's variables are not labels: $target is a value, $__
		// ranges are durations.
		q := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m").Replace(queries[k])
		if strings.TrimSpace(q) == "" {
			t.Errorf("%s is empty", k)
		}
		for _, p := range s.problems(q) {
			t.Errorf("dashboard %s: %s in %s", k, p, queries[k])
		}
	}
	// What the dashboard must show: sessions by state and wait, the
	// triggers, incidents, pool waits and watch's overhead.
	all := strings.Join(slices.Collect(func(yield func(string) bool) {
		for _, k := range keys {
			if !yield(queries[k]) {
				return
			}
		}
	}), "\n")
	for _, n := range []string{"pgmedic_sessions", "pgmedic_trigger_firing", "pgmedic_incidents_total", "pgmedic_incident_findings",
		"pgmedic_pool_clients_waiting", "pgmedic_pool_maxwait_seconds", "pgmedic_watch_cpu_seconds_total", "pgmedic_watch_query_seconds_total"} {
		if !strings.Contains(all, n) {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
	if panels < 8 {
		t.Errorf("%d queries in the dashboard's panels", panels)
	}
}

// TestProblemsCatches: the check itself finds what it must, so that a
// dashboard that names a series watch does not export cannot pass.
func TestProblemsCatches(t *testing.T) {
	s := known(t, readRules(t))
	for _, c := range []struct {
		expr string
		bad  bool
	}{
		{`sum by (state, wait) (pgmedic_sessions{target=~"$target"})`, false},
		{`rate(pgmedic_watch_cpu_seconds_total[5m]) > 0.01`, false},
		{`sum(pgmedic_session{target="a"})`, true},
		{`pgmedic_sessions{database="app"}`, true},
		{`sum by (datname) (pgmedic_sessions)`, true},
		{`pg_stat_activity_count{state="active"}`, true},
		{`target:pgmedic_sessions_active:sum > 3`, false},
		{`target:pgmedic_sessions_busy:sum > 3`, true},
		{`pgmedic_sessions{wait="pgmedic_made_up"}`, false},
	} {
		if got := s.problems(c.expr); (len(got) > 0) != c.bad {
			t.Errorf("%s: problems %v, want any: %v", c.expr, got, c.bad)
		}
	}
}
