package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/report"
)

// newLogs is `pgmedic logs`: server logs read and aggregated.
func newLogs(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var format, formatIn, out, prefix, ruleFlag string
	var literals bool
	cmd := &cobra.Command{
		Use:   "logs FILE...",
		Short: "read PostgreSQL server logs (stderr, csvlog, jsonlog, syslog, cloud exports, PgBouncer; plain or .gz; - for stdin)",
		Long: `logs reads PostgreSQL's server logs and reports statements by fingerprint with their
durations (log_min_duration_statement, auto_explain), errors by SQLSTATE, connections, lock
waits, temporary files, checkpoints and autovacuum, and runs the plan rules on the executed
plans auto_explain logged. The formats: stderr with any log_line_prefix, csvlog and jsonlog of
every version, syslog files, journald's JSON (journalctl -o json), Amazon RDS and Aurora files
and CloudWatch exports, Google Cloud SQL's Cloud Logging JSON, Azure Monitor's export, Heroku
logplex, CloudNativePG's JSON, and PgBouncer's own log. The format and the log_line_prefix are
detected from each file and said in the report; --format-in and --prefix give them when they
are not. Every line is counted as read or not recognised; a file with more than 1% of its lines
not recognised is reported as partly understood. Query texts are normalised (values replaced
by $n) unless --show-literals.

Exit codes: 0 read, 2 nothing could be parsed (or bad usage).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := (&outputFlags{format: format}).validateFormat(); err != nil {
				return err
			}
			ids, err := ruleIDs(ruleFlag)
			if err != nil {
				return err
			}
			var in logs.Format
			if formatIn != "" {
				in = logs.Format(formatIn)
				if !slices.Contains(logs.Formats, in) {
					return inputErr(fmt.Errorf("--format-in %s: not a format pgmedic reads (%s)", formatIn, formatList()))
				}
			}
			// Reading a log allocates a string per line that is garbage a
			// moment later, over a live heap of a few megabytes: a heap
			// target of three times the live heap (GOGC=200) halves the
			// collector's work and keeps the process near 50 MB on a
			// 200 MB log. A GOGC the user set wins.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(200)
			}
			var sources []logs.Source
			for _, a := range args {
				sources = append(sources, logs.FileSource(a, stdin))
			}
			s, findings, skipped, err := diagnose.Logs(cmd.Context(), sources, logs.Options{Prefix: prefix, Format: in, ShowLiterals: literals}, ids)
			if err != nil {
				return inputErr(err)
			}
			rep := &report.LogsReport{PGMedic: Version, Summary: s, Findings: findings, Skipped: skipped}
			if !s.Parsed() {
				// One line that says why, and no report that looks complete.
				why := "no entries"
				for _, f := range s.Files {
					if f.Error != "" {
						why = f.Name + ": " + f.Error
						break
					}
					if f.Lines > 0 {
						why = fmt.Sprintf("%s: none of its %d lines reads as %s", f.Name, f.Lines, f.Format)
						if f.Prefix != "" {
							why += fmt.Sprintf(" with log_line_prefix %q", f.Prefix)
						}
						if len(f.Examples) > 0 {
							why += fmt.Sprintf("; the first: %q", f.Examples[0])
						}
						why += "; check --prefix (SHOW log_line_prefix) and --format-in"
						break
					}
				}
				return inputErr(fmt.Errorf("nothing could be parsed (%s)", why))
			}
			return write(rep, outputFlags{format: format, out: out}, stdout)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", formatHelp)
	cmd.Flags().StringVar(&out, "out", "", "write the report to this file instead of stdout")
	cmd.Flags().StringVar(&prefix, "prefix", "", "the server's log_line_prefix, for the formats that carry stderr lines (default: detected)")
	cmd.Flags().StringVar(&formatIn, "format-in", "", "the logs' format: "+formatList()+" (default: detected)")
	cmd.Flags().StringVar(&ruleFlag, "rules", "", "comma-separated rule ids to run on the log's plans and events (default: all)")
	cmd.Flags().BoolVar(&literals, "show-literals", false, "keep each statement's slowest call and each error's first message with their values (default: normalised texts only)")
	return cmd
}

// formatList names the formats --format-in takes.
func formatList() string {
	var names []string
	for _, f := range logs.Formats {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}
