package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/logs"
)

// logsShort is the line help lists the command with.
const logsShort = "read PostgreSQL server logs (stderr, csvlog, jsonlog, syslog, cloud exports, PgBouncer; plain or .gz; - for stdin)"

// newLogs is `pgmedic logs`: server logs read and aggregated.
func newLogs(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var out outputFlags
	var in logInput
	var literals bool
	cmd := &cobra.Command{
		Use:   "logs FILE...",
		Short: logsShort,
		Long: `logs reads PostgreSQL's server logs and reports statements by fingerprint with their
durations (log_min_duration_statement, auto_explain), errors by SQLSTATE, connections, lock
waits, temporary files, checkpoints and autovacuum, and runs the plan rules on the executed
plans auto_explain logged. The formats (--format-in):

` + logs.FormatHelp() + `

The format and the log_line_prefix are detected from each file and said in the report;
--format-in and --prefix give them when they are not. Every line is counted as read or not
recognised; a file with more than 1% of its lines not recognised is reported as partly
understood. Query texts are normalised (values replaced by $n) unless --show-literals.

Exit codes: 0 read, 2 nothing could be parsed (or bad usage).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validateFormat(); err != nil {
				return err
			}
			ids, err := ruleIDs(out.rules)
			if err != nil {
				return err
			}
			opt, err := in.options()
			if err != nil {
				return err
			}
			opt.ShowLiterals = literals
			// Reading a log allocates a string per line that is garbage a
			// moment later, over a live heap of a few megabytes: a heap
			// target of three times the live heap (GOGC=200) halves the
			// collector's work and keeps the process near 50 MB on a
			// 200 MB log. A GOGC the user set wins.
			defer tuneCollector(200, 0)()
			var sources []logs.Source
			for _, a := range args {
				sources = append(sources, logs.FileSource(a, stdin))
			}
			rep, err := diagnose.LogsReport(cmd.Context(), Version, sources, opt, ids)
			if err != nil {
				return err
			}
			return write(rep, out, stdout)
		},
	}
	addOutput(cmd, &out)
	addLogInput(cmd, &in)
	addRules(cmd, &out.rules)
	cmd.Flags().BoolVar(&literals, "show-literals", false, "keep each statement's slowest call and each error's first message with their values (default: normalised texts only)")
	return cmd
}
