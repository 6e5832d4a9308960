package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/scenario"
)

// demoShort is the line help lists the command with.
const demoShort = "start a throwaway lab, reproduce every incident scenario, check each, and tear the lab down"

// newDemo is `pgmedic demo`: a throwaway lab, every scenario (or those of
// --scenarios) reproduced and checked, the reports, the lab removed.
func newDemo(stdout, stderr io.Writer) *cobra.Command {
	var f checkFlags
	var only []string
	var htmlPath string
	var major int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: demoShort,
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
			doc, notRun, err := scenario.RunDemo(cmd.Context(), list, lab.Options{Major: major}, f.options(ids, progress(stderr)), min, Version, announceThrowaway(stderr))
			if err != nil {
				return err
			}
			page := scenario.Document(Version, fmt.Sprintf("pgmedic demo: %d incident scenarios on a throwaway lab", len(doc.Scenarios)), doc.Scenarios)
			out := rendered{text: doc.Text, json: func(w io.Writer) error { return writeJSON(w, doc) },
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
	cmd.Flags().StringVar(&htmlPath, "html", "", "where the text report's HTML page goes (default pgmedic-demo.html beside --out, or in the current directory); none for no page")
	return cmd
}

// writeDemoPage writes the text report's HTML page: to path, or
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
