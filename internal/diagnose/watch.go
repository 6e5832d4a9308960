package diagnose

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/watch"
)

// WatchOptions are `watch`'s: the servers, the recorder's settings, where
// /metrics is served, and what the bundles' reports keep.
type WatchOptions struct {
	Targets []watch.Target
	// Fleet is set when the targets came from a fleet file: an
	// unreachable target is retried there instead of ending watch.
	Fleet       bool
	Config      watch.Config
	Metrics     string
	MinSeverity model.Severity
	// Stderr receives watch's log lines, each stamped.
	Stderr io.Writer
}

// Watch is `pgmedic watch`: the flight recorder on every target until ctx
// ends or the duration is up, /metrics served, each bundle's report
// written beside it. It returns the line that says what watch did and
// what it cost.
func Watch(ctx context.Context, version string, o WatchOptions) (string, error) {
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(o.Stderr, "pgmedic watch: %s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05Z"), fmt.Sprintf(format, args...))
	}
	metrics := watch.NewMetrics()
	if o.Metrics != "" {
		ln, err := net.Listen("tcp", o.Metrics)
		if err != nil {
			return "", InputErrorf("--metrics %s: %v", o.Metrics, err)
		}
		srv := metrics.Serve(ln)
		defer srv.Close()
		logf("serving /metrics on http://%s/metrics", ln.Addr())
	}
	cfg := o.Config
	cfg.Version, cfg.Log, cfg.Metrics = version, logf, metrics
	cfg.Bundled = func(t watch.Target, dir string, inc *watch.Incident) {
		fs, err := ReportBundle(dir, version, o.MinSeverity)
		if err != nil {
			logf("%s: the report of %s could not be written: %v", t.Name, filepath.Base(dir), err)
		}
		metrics.Findings(t.Name, fs)
		var rules []string
		for _, f := range fs {
			rules = append(rules, f.Rule)
		}
		logf("%s: %d findings in %s: %s (pgmedic check --from %s)", t.Name, len(fs), filepath.Base(dir), strings.Join(rules, ", "), dir)
	}
	began, cpu0 := time.Now(), watch.CPUSeconds()
	var stats map[string]watch.Stats
	if !o.Fleet {
		cfg.FailFast = true
		metrics.Register(o.Targets[0])
		st, err := watch.Watch(ctx, o.Targets[0], cfg)
		if err != nil {
			return "", err
		}
		stats = map[string]watch.Stats{o.Targets[0].Name: st}
	} else {
		logf("watching %d targets", len(o.Targets))
		stats = watch.WatchAll(ctx, o.Targets, cfg)
	}
	return watch.OverheadLine(time.Since(began), watch.CPUSeconds()-cpu0, stats), nil
}

// ReportBundle writes a bundle's report beside it (report.txt and
// report.json, as check --from prints them) and returns its findings.
// A bundle that cannot be read gets a report.txt that says why.
func ReportBundle(dir, version string, min model.Severity) ([]model.Finding, error) {
	rep, err := FromBundle(dir, version, Options{}, min)
	if err != nil {
		werr := os.WriteFile(filepath.Join(dir, "report.txt"), []byte("pgmedic check --from failed: "+err.Error()+"\n"), 0o600)
		if werr != nil {
			return nil, fmt.Errorf("reading the bundle: %v; writing why: %w", err, werr)
		}
		return nil, nil
	}
	for _, out := range []struct{ name, format string }{{"report.txt", "text"}, {"report.json", "json"}} {
		var b strings.Builder
		if err := report.Render(&b, rep, out.format); err != nil {
			return rep.Findings, fmt.Errorf("rendering %s: %w", out.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, out.name), []byte(b.String()), 0o600); err != nil {
			return rep.Findings, fmt.Errorf("writing %s: %w", out.name, err)
		}
	}
	return rep.Findings, nil
}
