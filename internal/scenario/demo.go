package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
)

// DemoReport is the JSON document of `pgmedic demo --format json`: every
// scenario's result, and whether all of them passed.
type DemoReport struct {
	PGMedic   string    `json:"pgmedic"`
	Passed    bool      `json:"passed"`
	Seconds   float64   `json:"seconds"`
	Scenarios []*Result `json:"scenarios"`
}

// RunDemo starts the throwaway lab, runs every scenario of list on it and
// removes it (on every path: success, failure, Ctrl-C). A scenario whose
// client is not installed is listed as not run; the others still run.
func RunDemo(ctx context.Context, list []Scenario, lo lab.Options, o diagnose.Options, min model.Severity, version string, announce func(dir string)) (DemoReport, []string, error) {
	start := time.Now()
	doc := DemoReport{PGMedic: version, Passed: true}
	lo.Log, lo.Started = o.Log, announce
	c, err := lab.Create(ctx, lo)
	if err != nil {
		return doc, nil, &diagnose.InputError{Err: err}
	}
	defer c.Destroy(context.Background())
	o.Log("lab server: %s", c.Server().Describe())
	var notRun []string
	results := make([]*Result, len(list))
	errs := make([]error, len(list))
	missed := make([]bool, len(list))
	run := func(i int, c *lab.Cluster) bool {
		res, err := Run(ctx, c, list[i], version, o, min)
		var missing *MissingClient
		if errors.As(err, &missing) && ctx.Err() == nil {
			res, err, missed[i] = &Result{Scenario: list[i].Name, NotRun: missing.Error()}, nil, true
		}
		results[i], errs[i] = res, err
		return err == nil
	}
	second := func() (*lab.Cluster, func(), error) {
		so := lo
		so.Dir, so.Standby = "", false
		c2, err := lab.Create(ctx, so)
		if err != nil {
			return nil, nil, err
		}
		return c2, func() { c2.Destroy(context.Background()) }, nil
	}
	if err := RunLanes(ctx, list, c, second, run); err != nil {
		return doc, nil, &diagnose.InputError{Err: err}
	}
	for _, err := range errs {
		if err != nil {
			return doc, nil, err
		}
	}
	for i, res := range results {
		if res == nil { // not started: interrupted
			return doc, nil, fmt.Errorf("demo interrupted before scenario %s: %w", list[i].Name, context.Cause(ctx))
		}
		if missed[i] {
			notRun = append(notRun, res.Scenario)
		}
		doc.Passed = doc.Passed && (res.Passed() || res.Skipped != "")
		doc.Scenarios = append(doc.Scenarios, res)
	}
	doc.Seconds = float64(time.Since(start).Milliseconds()) / 1000
	return doc, notRun, nil
}

// Document is the page of scenario runs: one part per scenario,
// with what it had to show and whether it did.
func Document(version, title string, results []*Result) *report.Document {
	d := &report.Document{PGMedic: version, Title: title}
	for _, r := range results {
		var must []string
		for _, e := range r.Expected {
			must = append(must, e.Rule)
		}
		note := "passed: every expected finding present, nothing it must not show"
		if r.NotRun != "" {
			d.Parts = append(d.Parts, report.Part{Name: r.Scenario, Note: "NOT RUN: " + r.NotRun})
			continue
		}
		if r.Skipped != "" {
			d.Parts = append(d.Parts, report.Part{Name: r.Scenario, Note: "skipped on this server: " + r.Skipped})
			continue
		}
		if len(r.LeftOut) > 0 {
			note += " · left out on this server: " + strings.Join(r.LeftOut, "; ")
		}
		if !r.Passed() {
			note = "FAILED: missing " + strings.Join(r.Missing, "; ") + "; unexpected " + strings.Join(r.Unexpected, "; ")
		}
		if len(must) > 0 {
			note = "expects " + strings.Join(must, ", ") + " · " + note
		}
		d.Parts = append(d.Parts, r.Parts(note)...)
	}
	return d
}

// Text prints each scenario's report, its verdict and its metrics, then
// the summary: a line a scenario.
func (doc DemoReport) Text(w io.Writer) error {
	for _, s := range doc.Scenarios {
		fmt.Fprintf(w, "################ scenario %s ################\n", s.Scenario)
		if s.NotRun != "" || s.Skipped != "" {
			fmt.Fprintf(w, "not run: %s%s\n\n", s.NotRun, s.Skipped)
			continue
		}
		if err := s.Text(w); err != nil {
			return err
		}
		WriteMetrics(w, s.Metrics)
		fmt.Fprintf(w, "\n")
	}
	fmt.Fprintf(w, "================ demo summary (%.1fs) ================\n", doc.Seconds)
	for _, s := range doc.Scenarios {
		verdict := "ok"
		var notes []string
		if s.NotRun != "" {
			verdict = "NOT RUN"
			notes = append(notes, s.NotRun)
		}
		if s.Skipped != "" {
			verdict = "skipped"
			notes = append(notes, s.Skipped)
		}
		for _, l := range s.LeftOut {
			notes = append(notes, "left out: "+l)
		}
		if len(s.Missing) > 0 {
			verdict = "FAILED"
			notes = append(notes, "missing: "+strings.Join(s.Missing, "; "))
		}
		if len(s.Unexpected) > 0 {
			verdict = "FAILED"
			notes = append(notes, "unexpected: "+strings.Join(s.Unexpected, "; "))
		}
		took := fmt.Sprintf("%5.1fs", s.Seconds)
		if s.NotRun != "" || s.Skipped != "" {
			took = "     -"
		}
		fmt.Fprintf(w, "%-24s %s %s %s\n", s.Scenario, took, verdict, strings.Join(notes, " | "))
	}
	return nil
}

// WriteMetrics prints what a scenario's workload measured itself.
func WriteMetrics(w io.Writer, m map[string]float64) {
	if len(m) == 0 {
		return
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "workload measurements:\n")
	for _, k := range names {
		fmt.Fprintf(w, "  %-48s %g\n", k, m[k])
	}
}

// RunOnLab reproduces one scenario and checks it (lab run): on the lab
// cluster that is up in dir, unless major asks for another major than
// it runs; otherwise on a throwaway cluster, removed afterwards.
func RunOnLab(ctx context.Context, dir string, major int, s Scenario, version string, o diagnose.Options, min model.Severity, announce func(dir string)) (*Result, error) {
	c, err := lab.Load(dir)
	if err != nil || !c.Running() || (major != 0 && c.Major != major) {
		if c, err = lab.Create(ctx, lab.Options{Major: major, Log: o.Log, Started: announce}); err != nil {
			return nil, &diagnose.InputError{Err: err}
		}
		defer c.Destroy(context.Background())
	}
	if o.Log != nil {
		o.Log("lab server: %s", c.Server().Describe())
	}
	return Run(ctx, c, s, version, o, min)
}
