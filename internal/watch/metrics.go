package watch

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Metrics is what /metrics serves, in Prometheus's text format: per
// target, the sampler's sessions by state and wait at the last tick, pool
// waits, the triggers firing, incidents, the findings of the last
// incident's bundle by rule and severity; and watch's own cost. A nil
// *Metrics records nothing.
type Metrics struct {
	mu      sync.Mutex
	started time.Time
	targets map[string]*targetMetrics
}

type targetMetrics struct {
	labels    map[string]string
	connected bool
	sessions  map[[2]string]int // state, wait
	pools     map[[2]string]model.Pool
	firing    map[string]bool
	counters  map[string]float64 // ticks, incidents, reconnects
	queryMS   float64
	findings  map[[2]string]int // rule, severity
	cores     int
}

// NewMetrics starts the metrics of a watch process.
func NewMetrics() *Metrics {
	return &Metrics{started: time.Now(), targets: map[string]*targetMetrics{}}
}

func (m *Metrics) target(name string) *targetMetrics {
	t := m.targets[name]
	if t == nil {
		t = &targetMetrics{counters: map[string]float64{}}
		m.targets[name] = t
	}
	return t
}

// Register names a target and its labels before its first tick.
func (m *Metrics) Register(t Target) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.target(t.Name).labels = t.Labels
}

func (m *Metrics) connected(name string, up bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.target(name).connected = up
}

func (m *Metrics) add(name, counter string, n float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.target(name).counters[counter] += n
}

func (m *Metrics) tick(name string, rec Record, fired []Firing, st Stats, cores int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.target(name)
	t.counters["ticks"] = float64(st.Ticks)
	t.queryMS, t.cores = st.QueryMS, cores
	t.sessions = map[[2]string]int{}
	if rec.Sample != nil {
		for _, b := range rec.Sample.Backends {
			wait := b.WaitType
			if b.Wait != "" {
				wait += "/" + b.Wait
			}
			if wait == "" {
				wait = "CPU"
			}
			t.sessions[[2]string{b.State, wait}]++
		}
	}
	t.pools = map[[2]string]model.Pool{}
	if rec.Pools != nil {
		for _, p := range rec.Pools.Pools {
			t.pools[[2]string{p.Database, p.User}] = p
		}
	}
	t.firing = map[string]bool{}
	for _, f := range fired {
		t.firing[f.Kind] = true
	}
}

// Findings sets the findings of a target's last incident bundle.
func (m *Metrics) Findings(name string, fs []model.Finding) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.target(name)
	t.findings = map[[2]string]int{}
	for _, f := range fs {
		t.findings[[2]string{f.Rule, f.Severity.String()}]++
	}
}

// Family is one metric watch exports. Its series carry the target's
// labels (target, and the fleet file's labels of that target) and then
// Labels, in that order; a family of the watch process has neither.
// deploy/prometheus and deploy/grafana may name only these families and
// labels (a test holds them to it).
type Family struct {
	Name, Type, Help string
	Labels           []string
	// PerTarget: one series or more per target; otherwise one for the
	// watch process.
	PerTarget bool
	// series gives a target's values, each with its Labels' values in
	// order; process families read the process instead.
	series func(t *targetMetrics, emit func(v float64, labels ...string))
}

// Families are the metrics of /metrics, in the order it writes them.
var Families = []Family{
	{Name: "pgmedic_up", Type: "gauge", Help: "1 while watch holds its connection to the target", PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) { emit(bool01(t.connected)) }},
	{Name: "pgmedic_sessions", Type: "gauge", Help: "client sessions at the last tick, by state and wait event", Labels: []string{"state", "wait"}, PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) {
			for _, k := range sortedKeys(t.sessions) {
				emit(float64(t.sessions[k]), k[0], k[1])
			}
		}},
	{Name: "pgmedic_pool_clients_waiting", Type: "gauge", Help: "PgBouncer clients waiting for a server connection at the last tick", Labels: []string{"database", "user"}, PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) {
			for _, k := range sortedKeys(t.pools) {
				emit(float64(t.pools[k].ClWaiting), k[0], k[1])
			}
		}},
	{Name: "pgmedic_pool_maxwait_seconds", Type: "gauge", Help: "PgBouncer's longest current client wait at the last tick", Labels: []string{"database", "user"}, PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) {
			for _, k := range sortedKeys(t.pools) {
				emit(t.pools[k].MaxWaitMS/1000, k[0], k[1])
			}
		}},
	{Name: "pgmedic_trigger_firing", Type: "gauge", Help: "1 for each incident trigger that fired at the last tick", Labels: []string{"trigger"}, PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) {
			for _, k := range TriggerIDs() {
				emit(bool01(t.firing[k]), k)
			}
		}},
	{Name: "pgmedic_incident_findings", Type: "gauge", Help: "findings of the target's last incident bundle, by rule and severity", Labels: []string{"rule", "severity"}, PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) {
			for _, k := range sortedKeys(t.findings) {
				emit(float64(t.findings[k]), k[0], k[1])
			}
		}},
	{Name: "pgmedic_incidents_total", Type: "counter", Help: "incident bundles written", PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) { emit(t.counters["incidents"]) }},
	{Name: "pgmedic_watch_ticks_total", Type: "counter", Help: "sampler ticks", PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) { emit(t.counters["ticks"]) }},
	{Name: "pgmedic_watch_reconnects_total", Type: "counter", Help: "connections opened again after one was lost", PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) { emit(t.counters["reconnects"]) }},
	{Name: "pgmedic_watch_query_seconds_total", Type: "counter", Help: "time watch's own queries took, round trips included", PerTarget: true,
		series: func(t *targetMetrics, emit func(float64, ...string)) { emit(t.queryMS / 1000) }},
	{Name: "pgmedic_watch_cpu_seconds_total", Type: "counter", Help: "CPU time of the watch process"},
	{Name: "pgmedic_watch_overhead_ratio", Type: "gauge", Help: "CPU time of the watch process per second of wall time since it started (0.01 is 1% of one core)"},
}

// Write writes every metric in Prometheus's text exposition format.
func (m *Metrics) Write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &strings.Builder{}
	names := make([]string, 0, len(m.targets))
	for n := range m.targets {
		names = append(names, n)
	}
	sort.Strings(names)
	cpu := CPUSeconds()
	process := map[string]float64{
		"pgmedic_watch_cpu_seconds_total": cpu,
		"pgmedic_watch_overhead_ratio":    cpu / max(time.Since(m.started).Seconds(), 1e-9),
	}
	for _, f := range Families {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.Name, f.Help, f.Name, f.Type)
		if !f.PerTarget {
			fmt.Fprintf(b, "%s %s\n", f.Name, strconv.FormatFloat(process[f.Name], 'g', 6, 64))
			continue
		}
		for _, n := range names {
			t := m.targets[n]
			lbl := targetLabels(n, t.labels)
			f.series(t, func(v float64, values ...string) {
				b.WriteString(f.Name + "{" + lbl)
				for i, val := range values {
					b.WriteString("," + f.Labels[i] + `="` + esc(val) + `"`)
				}
				b.WriteString("} " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
			})
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func targetLabels(name string, labels map[string]string) string {
	parts := []string{`target="` + esc(name) + `"`}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, promName(k)+`="`+esc(labels[k])+`"`)
	}
	return strings.Join(parts, ",")
}

// esc escapes a label value as the exposition format wants.
func esc(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// promName makes a label name Prometheus accepts: letters, digits and _,
// not starting with a digit.
func promName(s string) string {
	var b strings.Builder
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[[2]string]V) [][2]string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	return keys
}
