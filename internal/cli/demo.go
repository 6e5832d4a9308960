package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/scenario"
)

// demoReport is the JSON document of `pgmedic demo --format json`.
type demoReport struct {
	PGMedic   string             `json:"pgmedic"`
	Passed    bool               `json:"passed"`
	Seconds   float64            `json:"seconds"`
	Scenarios []*scenario.Result `json:"scenarios"`
}

// newDemo is `pgmedic demo`: a throwaway lab, every scenario (or those of
// --scenarios) reproduced and checked, the reports, the lab removed.
func newDemo(stdout, stderr io.Writer) *cobra.Command {
	var f checkFlags
	var only []string
	var htmlPath string
	var major int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "start a throwaway lab, reproduce every incident scenario, check each, and tear the lab down",
		Long: `demo is pgmedic's main job on the embedded lab: it starts a throwaway PostgreSQL
cluster, loads every scenario into its own database with a real client workload,
runs check on each, prints the reports, and removes the cluster. With the text
report it writes pgmedic-demo.html (one section per scenario) beside it and says
where. Exit 0 only when every scenario produced the findings it must and none it
must not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			min, ids, err := f.validate()
			if err != nil {
				return err
			}
			// The scenarios are known before a cluster is started for them.
			list, err := selectScenarios(only)
			if err != nil {
				return usageErr("--scenarios: %v", err)
			}
			if err := checkMajor(major); err != nil {
				return err
			}
			doc, notRun, err := runScenarios(cmd.Context(), list, lab.Options{Major: major}, f.options(ids, progress(stderr)), min, stderr)
			if err != nil {
				return err
			}
			page := scenarioDocument(Version, fmt.Sprintf("pgmedic demo: %d incident scenarios on a throwaway lab", len(doc.Scenarios)), doc.Scenarios)
			out := rendered{text: func(w io.Writer) error { return demoText(w, doc) }, json: func(w io.Writer) error { return writeJSON(w, doc) },
				doc: func() *report.Document { return page }}
			if err := write(out, f.outputFlags, stdout); err != nil {
				return err
			}
			if f.format == "text" && htmlPath != "none" {
				if err := writeDemoPage(page, htmlPath, f.out, stdout); err != nil {
					return err
				}
			}
			for _, r := range doc.Scenarios {
				if r.NotRun == "" && r.Skipped == "" && !r.Passed() {
					return &exitError{code: ExitFindings, err: fmt.Errorf("demo: a scenario did not produce what it must")}
				}
			}
			if len(notRun) > 0 {
				return inputErr(fmt.Errorf("demo: %d of %d scenarios could not run here (%s): the summary says what to install", len(notRun), len(doc.Scenarios), strings.Join(notRun, ", ")))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringSliceVar(&only, "scenarios", nil, "reproduce only these scenarios (names from `pgmedic lab list`; default all)")
	addPg(cmd.Flags(), &major)
	cmd.Flags().StringVar(&htmlPath, "html", "", "where the text report's HTML twin goes (default pgmedic-demo.html beside --out, or in the current directory); none for no page")
	return cmd
}

// scenarioDocument is the page of scenario runs: one part per scenario,
// with what it had to show and whether it did.
func scenarioDocument(version, title string, results []*scenario.Result) *report.Document {
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

// runScenarios starts the throwaway lab, runs every scenario of list on it and
// removes it (on every path: success, failure, Ctrl-C). A scenario whose
// client is not installed is listed as not run; the others still run.
func runScenarios(ctx context.Context, list []scenario.Scenario, lo lab.Options, o diagnose.Options, min model.Severity, stderr io.Writer) (demoReport, []string, error) {
	start := time.Now()
	doc := demoReport{PGMedic: Version, Passed: true}
	lo.Log, lo.Started = o.Log, announceThrowaway(stderr)
	c, err := lab.Create(ctx, lo)
	if err != nil {
		return doc, nil, inputErr(err)
	}
	defer c.Destroy(context.Background())
	o.Log("lab server: %s", c.Server().Describe())
	var notRun []string
	results := make([]*scenario.Result, len(list))
	errs := make([]error, len(list))
	missed := make([]bool, len(list))
	run := func(i int, c *lab.Cluster) bool {
		res, err := scenario.Run(ctx, c, list[i], Version, o, min)
		var missing *scenario.MissingClient
		if errors.As(err, &missing) && ctx.Err() == nil {
			res, err, missed[i] = &scenario.Result{Scenario: list[i].Name, NotRun: missing.Error()}, nil, true
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
	if err := scenario.RunLanes(ctx, list, c, second, run); err != nil {
		return doc, nil, inputErr(err)
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

// writeDemoPage writes the text report's HTML twin: to path, or
// pgmedic-demo.html beside --out (or in the current directory), and says
// where.
func writeDemoPage(page *report.Document, path, out string, stdout io.Writer) error {
	if path == "" {
		path = filepath.Join(dirOf(out), "pgmedic-demo.html")
		if out == "" {
			path = "pgmedic-demo.html"
		}
	}
	if err := write(rendered{doc: func() *report.Document { return page }}, outputFlags{format: "html", out: path}, stdout); err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	fmt.Fprintf(stdout, "HTML report: %s\n", abs)
	return nil
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// selectScenarios is the catalogue, or the named scenarios in its order.
func selectScenarios(names []string) ([]scenario.Scenario, error) {
	all, err := scenario.All()
	if err != nil || len(names) == 0 {
		return all, err
	}
	var out []scenario.Scenario
	for _, s := range all {
		for _, n := range names {
			if s.Name == n {
				out = append(out, s)
			}
		}
	}
	for _, n := range names {
		if _, err := scenario.Find(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// demoText prints each scenario's report, its verdict and its metrics.
func demoText(w io.Writer, doc demoReport) error {
	for _, s := range doc.Scenarios {
		fmt.Fprintf(w, "################ scenario %s ################\n", s.Scenario)
		if s.NotRun != "" || s.Skipped != "" {
			fmt.Fprintf(w, "not run: %s%s\n\n", s.NotRun, s.Skipped)
			continue
		}
		if err := s.Text(w); err != nil {
			return err
		}
		writeMetrics(w, s.Metrics)
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

// writeMetrics prints what the scenario's workload measured itself.
func writeMetrics(w io.Writer, m map[string]float64) {
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
