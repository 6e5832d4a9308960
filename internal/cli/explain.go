package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/model"
)

// explainShort is the line help lists the command with.
const explainShort = "analyse one plan (EXPLAIN JSON or TEXT), or compare two plans of the same query"

type explainFlags struct {
	outputFlags
	dsn              string
	query            string
	analyze          bool
	compare          bool
	runs             int
	statementTimeout time.Duration
	allowFunctions   []string
}

// explainMemoryLimit is the heap size at which explain's collector starts
// (it is off until then): a 17 MB plan of 1,200 nodes peaks near 50 MB.
const explainMemoryLimit = 512 << 20

// newExplain is `pgmedic explain`: one plan, --compare of two, or
// --query run on --dsn.
func newExplain(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain [FILE|-] | explain --dsn DSN --query SQL [--analyze] | explain --compare A B",
		Short: explainShort,
		Long: `explain reads a plan as EXPLAIN printed it, in JSON or TEXT, with or without
ANALYZE/BUFFERS/VERBOSE/SETTINGS (from a file, or - for stdin), shows the tree with
each node's own time and the hot path, and lists what is wrong ranked by the time
the fix could save.

With --dsn and --query, pgmedic runs EXPLAIN itself inside its safety envelope;
--analyze executes the query, which it does only for a SELECT, in a read-only
transaction that is rolled back, and only when every function it calls (through
views too) is a built-in that acts on nothing, or is declared IMMUTABLE or STABLE:
a rollback does not undo what a VOLATILE function does outside the transaction.
--allow-function vouches for one. With --dsn, implicit casts are checked against
the catalogs and, with --query, re-planned and timed with the fix.

--compare A B aligns two plans of the same query (JSON, TEXT or one of each) and
names the difference that decides which is faster.

Exit codes: 0 nothing at or above --min-severity, 1 findings, 2 bad input or
connection error, 3 internal error.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			min, ids, err := f.validate()
			if err != nil {
				return err
			}
			if f.compare {
				if len(args) != 2 {
					return usageErr("--compare needs two plans: pgmedic explain --compare A B (- reads one of them from stdin)")
				}
				return runCompare(cmd.Context(), args, stdin, f, stdout)
			}
			if len(args) > 1 {
				return usageErr("explain takes one plan; to compare two, add --compare")
			}
			return runExplain(cmd.Context(), args, stdin, f, ids, min, stdout, stderr)
		},
	}
	// A pasted plan gets every tip: info findings are shown too.
	addReport(cmd, &f.outputFlags, "info")
	addDSN(cmd, &f.dsn)
	cmd.Flags().StringVar(&f.query, "query", "", "SQL to EXPLAIN on --dsn (no $n parameters: put the values in)")
	cmd.Flags().BoolVar(&f.analyze, "analyze", false, "with --query: EXPLAIN ANALYZE (SELECT only, rolled back)")
	cmd.Flags().BoolVar(&f.compare, "compare", false, "compare two plans: explain --compare A B")
	addExperimentRuns(cmd, &f.runs)
	addStatementTimeout(cmd, &f.statementTimeout, diagnose.ExplainTimeout)
	addAllowFunction(cmd, &f.allowFunctions)
	return cmd
}

// explainQuiet: explain of a plan file (or stdin) to stdout opens no
// connection and writes no file, so Ctrl-C may end it at once; with --dsn
// it has statements to cancel, with --out a file to remove.
func explainQuiet(cmd *cobra.Command) bool {
	return !cmd.Flags().Changed("dsn") && !cmd.Flags().Changed("out")
}

// runExplain checks the flags and hands them to diagnose.Explain.
func runExplain(ctx context.Context, args []string, stdin io.Reader, f explainFlags, ids []string, min model.Severity, stdout, stderr io.Writer) error {
	if f.query != "" && f.dsn == "" {
		return usageErr("--query needs --dsn: the database to EXPLAIN it on")
	}
	if f.query != "" && len(args) > 0 {
		return usageErr("give a plan file or --query, not both")
	}
	if f.analyze && f.query == "" {
		return usageErr("--analyze goes with --query (a plan file already has or lacks its ANALYZE figures)")
	}
	if f.runs < 5 {
		return usageErr("--runs must be at least 5: a median of fewer runs is noise")
	}
	if f.query == "" && len(args) == 0 {
		return usageErr("give a plan file, - for stdin, or --dsn with --query")
	}
	// explain is a short process over one plan held in memory: with the
	// collector on, a 2,000-node plan spends a third of its time (and a
	// second core) collecting a heap that is about to be thrown away. The
	// collector waits instead until the heap nears a limit no plan
	// explain reads (64 MB at most) comes near in practice.
	defer tuneCollector(-1, explainMemoryLimit)()
	o := diagnose.ExplainOptions{Stdin: stdin, DSN: f.dsn, Query: f.query, Analyze: f.analyze,
		PlanOptions: diagnose.PlanOptions{Rules: ids, Runs: f.runs, StatementTimeout: f.statementTimeout, AllowFunctions: f.allowFunctions, Log: progress(stderr)},
		Warn:        func(s string) { fmt.Fprintln(stderr, "pgmedic: "+s) }}
	if len(args) == 1 {
		o.Path = args[0]
	}
	rep, err := diagnose.Explain(ctx, Version, o, min)
	if err != nil {
		return err
	}
	return emit(rep, f.outputFlags, min, stdout)
}

// runCompare reads two plans and prints what changed between them.
func runCompare(ctx context.Context, args []string, stdin io.Reader, f explainFlags, stdout io.Writer) error {
	rep, err := diagnose.ComparePlans(ctx, Version, args[0], args[1], stdin)
	if err != nil {
		return err
	}
	return write(rep, f.outputFlags, stdout)
}
