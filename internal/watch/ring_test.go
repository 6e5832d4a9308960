package watch

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

func TestRingReadsBackWhatItWrote(t *testing.T) {
	r := &Ring{Dir: t.TempDir(), Keep: time.Hour}
	for i := 0; i < 150; i++ { // two and a half minutes: three segments
		at := t0.Add(time.Duration(i) * time.Second)
		if err := r.Append(Record{Kind: "tick", At: at, Sample: &model.ActivitySample{At: at, Backends: busy(i % 3)}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(r.segments()); n != 3 {
		t.Fatalf("%d segments, want one a minute", n)
	}
	got, skipped, err := r.Read(t0.Add(30*time.Second), t0.Add(90*time.Second))
	if err != nil || skipped != 0 {
		t.Fatal(err, skipped)
	}
	if len(got) != 61 || !got[0].At.Equal(t0.Add(30*time.Second)) || len(got[2].Sample.Backends) != 2 {
		t.Fatalf("read %d records from %v", len(got), got[0].At)
	}
}

func TestRingSkipsACutLine(t *testing.T) {
	// kill -9 (or a full disk) in the middle of a write leaves the last
	// line cut: it is skipped and counted, the rest reads.
	dir := t.TempDir()
	r := &Ring{Dir: dir}
	for i := 0; i < 5; i++ {
		r.Append(Record{Kind: "tick", At: t0.Add(time.Duration(i) * time.Second)})
	}
	r.Close()
	f, _ := os.OpenFile(filepath.Join(dir, segmentName(t0)), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"tick","at":"2026-11-25T12:00:05Z","sam`)
	f.Close()
	got, skipped, err := (&Ring{Dir: dir}).Read(t0, t0.Add(time.Minute))
	if err != nil || len(got) != 5 || skipped != 1 {
		t.Fatalf("read %d, skipped %d, err %v", len(got), skipped, err)
	}
}

func TestRingIsBounded(t *testing.T) {
	dir := t.TempDir()
	r := &Ring{Dir: dir, Keep: 10 * time.Minute}
	pad := strings.Repeat("x", 1000)
	for i := 0; i < 30; i++ {
		r.Append(Record{Kind: "gap", At: t0.Add(time.Duration(i) * time.Minute), Note: pad})
	}
	if segs := r.segments(); len(segs) > 12 {
		t.Fatalf("%d minutes kept with --keep 10m", len(segs))
	}
	r.Close()
	small := &Ring{Dir: t.TempDir(), MaxBytes: 5000}
	for i := 0; i < 30; i++ {
		small.Append(Record{Kind: "gap", At: t0.Add(time.Duration(i) * time.Minute), Note: pad})
	}
	var total int64
	for _, s := range small.segments() {
		fi, _ := os.Stat(filepath.Join(small.Dir, s))
		total += fi.Size()
	}
	if total > 5000+1100 {
		t.Fatalf("the ring holds %d bytes with a cap of 5000", total)
	}
	small.Close()
}

func TestMetricsText(t *testing.T) {
	m := NewMetrics()
	m.Register(Target{Name: "orders", Labels: map[string]string{"env": "prod", "team-name": `a"b`}})
	m.connected("orders", true)
	rec := Record{Sample: &model.ActivitySample{Backends: append(waiting(2), busy(1)...)},
		Pools: &model.PoolSample{Pools: []model.Pool{{Database: "app", User: "app", ClWaiting: 4, MaxWaitMS: 1500}}}}
	m.tick("orders", rec, []Firing{{Kind: LockQueue}}, Stats{Ticks: 7, QueryMS: 12}, 2)
	m.Findings("orders", []model.Finding{{Rule: "lock-contention", Severity: model.Critical}, {Rule: "idle-in-transaction", Severity: model.Warning}})
	var b bytes.Buffer
	if err := m.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`pgmedic_up{target="orders",env="prod",team_name="a\"b"} 1`,
		`pgmedic_sessions{target="orders",env="prod",team_name="a\"b",state="active",wait="Lock/transactionid"} 2`,
		`pgmedic_pool_clients_waiting{target="orders",env="prod",team_name="a\"b",database="app",user="app"} 4`,
		`pgmedic_pool_maxwait_seconds{target="orders",env="prod",team_name="a\"b",database="app",user="app"} 1.5`,
		`pgmedic_trigger_firing{target="orders",env="prod",team_name="a\"b",trigger="lock-queue"} 1`,
		`pgmedic_incident_findings{target="orders",env="prod",team_name="a\"b",rule="lock-contention",severity="critical"} 1`,
		`pgmedic_watch_ticks_total{target="orders",env="prod",team_name="a\"b"} 7`,
		"# TYPE pgmedic_watch_overhead_ratio gauge",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	// Every sample line is NAME{LABELS} VALUE or NAME VALUE, of a family
	// of the table with the labels it declares, and every family is
	// written.
	line := regexp.MustCompile(`^[a-z_]+(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)+\})? [0-9.eE+-]+$`)
	label := regexp.MustCompile(`([a-zA-Z_]+)="(?:[^"\\]|\\.)*"`)
	written := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if !line.MatchString(l) {
			t.Errorf("not an exposition line: %q", l)
			continue
		}
		name, _, _ := strings.Cut(strings.Fields(l)[0], "{")
		written[name] = true
		var f *Family
		for i := range Families {
			if Families[i].Name == name {
				f = &Families[i]
			}
		}
		if f == nil {
			t.Errorf("%s is not in Families", name)
			continue
		}
		var labels []string
		for _, m := range label.FindAllStringSubmatch(l, -1) {
			labels = append(labels, m[1])
		}
		want := []string{}
		if f.PerTarget {
			want = append([]string{"target", "env", "team_name"}, f.Labels...)
		}
		if strings.Join(labels, ",") != strings.Join(want, ",") {
			t.Errorf("%s has labels %v, want %v", l, labels, want)
		}
	}
	for _, f := range Families {
		if !written[f.Name] {
			t.Errorf("family %s not written", f.Name)
		}
	}
}

func TestFleetFile(t *testing.T) {
	good := []byte(`targets:
  - name: orders-primary
    dsn: postgres://pgmedic@db1/orders
    pgbouncer: postgres://pgbouncer@db1:6432/pgbouncer
    labels: {env: prod}
  - name: billing
    dsn: host=db2 dbname=billing
    server_cores: 8
`)
	f, err := ParseFleet(good, "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Targets) != 2 || f.Targets[0].Labels["env"] != "prod" || f.Targets[1].ServerCores != 8 || Connections(f.Targets) != 3 {
		t.Fatalf("%+v", f.Targets)
	}
	for _, c := range []struct{ yaml, want string }{
		{"", "is empty"},
		{"targets: []", "lists no targets"},
		{"targets:\n  - name: a\n    dsn: host=x\n    dns: y\n", "dns"},
		{"targets:\n  - name: a\n", "has no dsn"},
		{"targets:\n  - name: a/b\n    dsn: host=x\n", "needs a name"},
		{"targets:\n  - {name: a, dsn: \"host=x\"}\n  - {name: a, dsn: \"host=y\"}\n", "two targets are named"},
		{"targets: [", "fleet.yaml"},
		{"targets:\n  - {name: a, dsn: \"postgres://u:secret@h:notaport/d\"}\n", "does not parse"},
	} {
		_, err := ParseFleet([]byte(c.yaml), "fleet.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", c.yaml, err, c.want)
		}
	}
}

func TestShardsSplitTheFleet(t *testing.T) {
	var f Fleet
	for i := 0; i < 100; i++ {
		f.Targets = append(f.Targets, Target{Name: "db" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), DSN: "x"})
	}
	seen := map[string]int{}
	for i := 1; i <= 4; i++ {
		part := f.Shard(i, 4)
		if len(part) < 10 {
			t.Errorf("shard %d/4 holds %d of 100", i, len(part))
		}
		for _, t := range part {
			seen[t.Name]++
		}
	}
	if len(seen) != 100 {
		t.Fatalf("the shards hold %d of 100 targets", len(seen))
	}
	for n, c := range seen {
		if c != 1 {
			t.Fatalf("%s is in %d shards", n, c)
		}
	}
	for _, bad := range []string{"0/4", "5/4", "1", "a/b", "1/0"} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("--shard %s accepted", bad)
		}
	}
}

// TestNameOf: a single target is named by its server and database, never
// its user or password.
func TestNameOf(t *testing.T) {
	if got := NameOf("postgres://app:s3cret@db.example.com:6543/shop"); got != "db.example.com:6543/shop" {
		t.Errorf("NameOf = %q", got)
	}
	if got := NameOf("host=db.example.com dbname=shop user=app password=s3cret"); strings.Contains(got, "s3cret") || !strings.Contains(got, "db.example.com") {
		t.Errorf("NameOf = %q", got)
	}
	if got := NameOf("postgres://%zz"); got != "target" {
		t.Errorf("NameOf of a DSN that does not parse = %q", got)
	}
}
