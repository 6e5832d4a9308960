package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
)

// newLogs is `pgmedic logs`: server logs read and aggregated.
func newLogs(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var format, out, prefix string
	var literals bool
	cmd := &cobra.Command{
		Use:   "logs FILE...",
		Short: "read PostgreSQL server logs (stderr, csvlog, jsonlog, syslog; plain or .gz; - for stdin)",
		Long: `logs reads PostgreSQL's server logs and reports statements by fingerprint with their
durations (log_min_duration_statement, auto_explain), errors by SQLSTATE, connections, lock
waits, temporary files, checkpoints and autovacuum, and runs the plan rules on the executed
plans auto_explain logged. The format and the log_line_prefix are detected from each file and
said in the report; --prefix gives the prefix when they are not. Query texts are normalised
(values replaced by $n) unless --show-literals.

Exit codes: 0 read, 2 nothing could be parsed (or bad usage).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return usageErr("--format must be text or json")
			}
			var sources []logs.Source
			for _, a := range args {
				sources = append(sources, logs.FileSource(a, stdin))
			}
			s, findings, skipped, err := diagnose.Logs(cmd.Context(), sources, logs.Options{Prefix: prefix, ShowLiterals: literals}, nil)
			if err != nil {
				return inputErr(err)
			}
			rep := &logsReport{Summary: s, Findings: findings, Skipped: skipped}
			render := rep.text
			if format == "json" {
				render = rep.json
			}
			if !s.Parsed() {
				// One line that says why, and no report that looks complete.
				why := "no entries"
				for _, f := range s.Files {
					if f.Error != "" {
						why = f.Name + ": " + f.Error
						break
					}
				}
				return inputErr(fmt.Errorf("nothing could be parsed (%s)", why))
			}
			if err := writeOut(out, stdout, render); err != nil {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.Flags().StringVar(&out, "out", "", "write the report to this file instead of stdout")
	cmd.Flags().StringVar(&prefix, "prefix", "", "the server's log_line_prefix, for stderr and syslog logs (default: detected)")
	cmd.Flags().BoolVar(&literals, "show-literals", false, "keep each statement's slowest call and each error's first message with their values (default: normalised texts only)")
	return cmd
}

// logsReport is `pgmedic logs`' output: the summary and the findings on
// the executed plans.
type logsReport struct {
	*logs.Summary
	Findings []model.Finding `json:"findings"`
	Skipped  []model.Skip    `json:"skipped"`
}

func (r *logsReport) text(w io.Writer) error {
	if err := r.Summary.Text(w); err != nil {
		return err
	}
	if len(r.Findings) == 0 && len(r.Skipped) == 0 {
		return nil
	}
	rep := &report.Report{Findings: r.Findings, Skipped: r.Skipped}
	fmt.Fprintf(w, "\n== FINDINGS on %d executed plans (auto_explain) ==\n", len(r.Summary.Plans()))
	return rep.FindingsText(w)
}

func (r *logsReport) json(w io.Writer) error {
	if r.Findings == nil {
		r.Findings = []model.Finding{}
	}
	if r.Skipped == nil {
		r.Skipped = []model.Skip{}
	}
	// The summary's JSON, with the findings beside it.
	var b strings.Builder
	if err := r.Summary.JSON(&b); err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil {
		return err
	}
	doc["findings"], doc["skipped"] = r.Findings, r.Skipped
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
