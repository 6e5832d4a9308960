package watch

import (
	"fmt"
	"io"
	"net/http"
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
	family := func(name, typ, help string, each func(emit func(labels string, v float64))) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		each(func(labels string, v float64) {
			fmt.Fprintf(b, "%s{%s} %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64))
		})
	}
	perTarget := func(fn func(lbl string, t *targetMetrics, emit func(string, float64))) func(func(string, float64)) {
		return func(emit func(string, float64)) {
			for _, n := range names {
				t := m.targets[n]
				fn(targetLabels(n, t.labels), t, emit)
			}
		}
	}
	family("pgmedic_up", "gauge", "1 while watch holds its connection to the target", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		emit(l, bool01(t.connected))
	}))
	family("pgmedic_sessions", "gauge", "client sessions at the last tick, by state and wait event", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		for _, k := range sortedKeys(t.sessions) {
			emit(l+`,state="`+esc(k[0])+`",wait="`+esc(k[1])+`"`, float64(t.sessions[k]))
		}
	}))
	family("pgmedic_pool_clients_waiting", "gauge", "PgBouncer clients waiting for a server connection at the last tick", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		for _, k := range sortedKeys(t.pools) {
			emit(l+`,database="`+esc(k[0])+`",user="`+esc(k[1])+`"`, float64(t.pools[k].ClWaiting))
		}
	}))
	family("pgmedic_pool_maxwait_seconds", "gauge", "PgBouncer's longest current client wait at the last tick", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		for _, k := range sortedKeys(t.pools) {
			emit(l+`,database="`+esc(k[0])+`",user="`+esc(k[1])+`"`, t.pools[k].MaxWaitMS/1000)
		}
	}))
	family("pgmedic_trigger_firing", "gauge", "1 for each incident trigger that fired at the last tick", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		for _, k := range TriggerIDs() {
			emit(l+`,trigger="`+k+`"`, bool01(t.firing[k]))
		}
	}))
	family("pgmedic_incident_findings", "gauge", "findings of the target's last incident bundle, by rule and severity", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		for _, k := range sortedKeys(t.findings) {
			emit(l+`,rule="`+esc(k[0])+`",severity="`+esc(k[1])+`"`, float64(t.findings[k]))
		}
	}))
	for _, c := range []struct{ key, name, help string }{
		{"incidents", "pgmedic_incidents_total", "incident bundles written"},
		{"ticks", "pgmedic_watch_ticks_total", "sampler ticks"},
		{"reconnects", "pgmedic_watch_reconnects_total", "connections opened again after one was lost"},
	} {
		family(c.name, "counter", c.help, perTarget(func(l string, t *targetMetrics, emit func(string, float64)) { emit(l, t.counters[c.key]) }))
	}
	family("pgmedic_watch_query_seconds_total", "counter", "time watch's own queries took, round trips included", perTarget(func(l string, t *targetMetrics, emit func(string, float64)) {
		emit(l, t.queryMS/1000)
	}))
	cpu := CPUSeconds()
	up := time.Since(m.started).Seconds()
	fmt.Fprintf(b, "# HELP pgmedic_watch_cpu_seconds_total CPU time of the watch process\n# TYPE pgmedic_watch_cpu_seconds_total counter\npgmedic_watch_cpu_seconds_total %s\n", strconv.FormatFloat(cpu, 'g', -1, 64))
	fmt.Fprintf(b, "# HELP pgmedic_watch_overhead_ratio CPU time of the watch process per second of wall time (0.01 is 1%% of one core)\n# TYPE pgmedic_watch_overhead_ratio gauge\npgmedic_watch_overhead_ratio %s\n", strconv.FormatFloat(cpu/max(up, 1e-9), 'g', 4, 64))
	_, err := io.WriteString(w, b.String())
	return err
}

// ServeHTTP serves /metrics.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.Write(w)
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
