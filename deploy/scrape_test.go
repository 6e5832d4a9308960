package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/scenario"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Remove()
	os.Exit(code)
}

// TestPrometheusScrapesWatch: Debian's Prometheus, with pgmedic's rules,
// scrapes watch --metrics on a lab cluster while the lock-chain scenario
// runs; through Prometheus's HTTP API the series come back: watch
// connected, sessions waiting on a lock (recorded by a rule), the
// lock-queue trigger firing, and the trigger's alert pending.
func TestPrometheusScrapesWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster, a scenario, watch and Prometheus")
	}
	prom := testkit.Tool(t, "prometheus", installedBy)
	c := labtest.Cluster(t, lab.Options{})
	s, err := scenario.Find("lock-chain")
	if err != nil {
		t.Fatal(err)
	}
	s, _ = s.On(c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := scenario.Setup(ctx, c, s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- env.Run(ctx, s) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("lock-chain: %v", err)
		}
	}()

	dir := t.TempDir()
	w := testkit.Start(t, testkit.Pgmedic(t), "watch", c.DSN("postgres"), "--dir", filepath.Join(dir, "watch"), "--metrics", "127.0.0.1:0", "--interval", "200ms")
	metrics := waitFor(t, w, regexp.MustCompile(`http://([0-9.:]+)/metrics`))

	rules, err := filepath.Abs("prometheus/pgmedic-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(config, fmt.Appendf(nil, `global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: pgmedic
    static_configs: [{targets: [%q]}]
`, rules, metrics), 0o644)
	addr := freeAddr(t)
	p := testkit.Start(t, prom, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	api := "http://" + addr + "/api/v1/"

	// Each query must return a series, within a minute of Prometheus's
	// start: the scenario holds its lock queue the whole time.
	for _, q := range []string{
		`pgmedic_up{job="pgmedic",target=~".*/postgres"} == 1`,
		`max_over_time(pgmedic_trigger_firing{trigger="lock-queue"}[1m]) == 1`,
		`max_over_time(target:pgmedic_sessions_lock_waiting:sum[1m]) > 0`,
		`max_over_time(pgmedic_sessions{wait=~"Lock/.*"}[1m]) > 0`,
		`pgmedic_watch_ticks_total > 0`,
		`rate(pgmedic_watch_cpu_seconds_total[30s]) >= 0`,
	} {
		got := poll(t, p, func() (string, bool) {
			var r struct {
				Status string
				Data   struct {
					Result []struct {
						Metric map[string]string
						Value  []any
					}
				}
			}
			if err := getJSON(api+"query?query="+url.QueryEscape(q), &r); err != nil {
				return err.Error(), false
			}
			return fmt.Sprint(r.Data.Result), r.Status == "success" && len(r.Data.Result) > 0
		})
		t.Logf("%s: %s", q, got)
	}
	alert := poll(t, p, func() (string, bool) {
		var r struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string
					State  string
				}
			}
		}
		if err := getJSON(api+"alerts", &r); err != nil {
			return err.Error(), false
		}
		for _, a := range r.Data.Alerts {
			if a.Labels["alertname"] == "PgmedicTriggerFiring" && a.Labels["trigger"] == "lock-queue" && a.State == "pending" {
				return fmt.Sprint(a), true
			}
		}
		return fmt.Sprint(r.Data.Alerts), false
	})
	t.Logf("alert: %s", alert)
	for _, proc := range []*testkit.Process{p, w} {
		if err := proc.Stop(); err != nil {
			t.Errorf("%s exited %v after SIGTERM:\n%s", filepath.Base(proc.Cmd.Path), err, proc)
		}
	}
}

// waitFor waits for a line of the process's output and returns the
// regexp's first group.
func waitFor(t *testing.T, p *testkit.Process, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	poll(t, p, func() (string, bool) {
		m = re.FindStringSubmatch(p.String())
		return "", m != nil
	})
	return m[1]
}

// poll calls try until it says done, for up to a minute, failing with
// what try said last and the process's output.
func poll(t *testing.T, p *testkit.Process, try func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		said, done := try()
		if done {
			return said
		}
		if p.Cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("gave up: %s\n%s's output:\n%s", said, filepath.Base(p.Cmd.Path), p)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// freeAddr is a port on 127.0.0.1 nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
