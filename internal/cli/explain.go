package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

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

// maxPlanBytes bounds what explain reads: the largest real plans are a
// few megabytes.
const maxPlanBytes = 64 << 20

// explainMemoryLimit is the heap size at which explain's collector starts
// (it is off until then): a 17 MB plan of 1,200 nodes peaks near 50 MB.
const explainMemoryLimit = 512 << 20

// newExplain is `pgmedic explain`: one plan, --compare of two, or
// --query run on --dsn.
func newExplain(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain [FILE|-] | explain --dsn DSN --query SQL [--analyze] | explain --compare A B",
		Short: "analyse one plan (EXPLAIN JSON or TEXT), or compare two plans of the same query",
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
				return runCompare(args, stdin, f, stdout)
			}
			if len(args) > 1 {
				return usageErr("explain takes one plan; to compare two, add --compare")
			}
			return runExplain(cmd.Context(), args, stdin, f, ids, min, stdout, stderr)
		},
	}
	// A pasted plan gets every tip: info findings are shown too.
	f.outputFlags.registerWith(cmd, "info")
	cmd.Flags().StringVar(&f.dsn, "dsn", "", "database to check the plan's casts against, or to EXPLAIN --query on")
	cmd.Flags().StringVar(&f.query, "query", "", "SQL to EXPLAIN on --dsn (no $n parameters: put the values in)")
	cmd.Flags().BoolVar(&f.analyze, "analyze", false, "with --query: EXPLAIN ANALYZE (SELECT only, rolled back)")
	cmd.Flags().BoolVar(&f.compare, "compare", false, "compare two plans: explain --compare A B")
	cmd.Flags().IntVar(&f.runs, "runs", 5, "runs per side of the implicit-cast experiment (at least 5)")
	cmd.Flags().DurationVar(&f.statementTimeout, "statement-timeout", 30*time.Second, "statement_timeout for pgmedic's session (EXPLAIN ANALYZE included)")
	cmd.Flags().StringSliceVar(&f.allowFunctions, "allow-function", nil, "a VOLATILE function (schema.name) that --analyze may execute; repeat or separate with commas")
	return cmd
}

// readPlan reads a plan file or stdin ("-") and parses it.
func readPlan(path string, stdin io.Reader) (*plan.Explain, string, error) {
	var r io.Reader = stdin
	name := "stdin"
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, "", inputErr(fmt.Errorf("cannot read the plan: %w", err))
		}
		defer fh.Close()
		r, name = fh, path
	}
	var buf bytes.Buffer
	if fh, ok := r.(*os.File); ok {
		// A file's size is known: one buffer of that size instead of a
		// doubling one (a large plan is megabytes).
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= maxPlanBytes {
			buf.Grow(int(st.Size()) + bytes.MinRead)
		}
	}
	_, err := buf.ReadFrom(io.LimitReader(r, maxPlanBytes+1))
	b := buf.Bytes()
	if err != nil {
		return nil, "", inputErr(fmt.Errorf("cannot read the plan from %s: %w", name, err))
	}
	if len(b) > maxPlanBytes {
		return nil, "", inputErr(fmt.Errorf("%s is larger than %d MB; that is not one plan", name, maxPlanBytes>>20))
	}
	e, err := plan.Parse(b)
	if err != nil {
		return nil, "", inputErr(fmt.Errorf("%s: %w (pgmedic reads EXPLAIN output in JSON or TEXT format)", name, err))
	}
	return e, name, nil
}

// runExplain checks the flags, reads the plan (a file, stdin or --query on
// --dsn) and hands it to diagnose.Plan.
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
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(explainMemoryLimit)
		defer debug.SetGCPercent(100) // in-process callers (tests) get the collector back
		defer debug.SetMemoryLimit(math.MaxInt64)
	}
	var sess *envelope.Session
	if f.dsn != "" {
		var err error
		sess, err = envelope.Connect(ctx, f.dsn, envelope.Options{StatementTimeout: f.statementTimeout})
		if err != nil {
			return err
		}
		defer sess.Close()
	}
	var e *plan.Explain
	var stmt *sqlparse.Statement
	var source string
	if f.query != "" {
		var err error
		if stmt, e, err = diagnose.Query(ctx, sess, f.query, f.analyze, f.allowFunctions); err != nil {
			return err
		}
		source = "--query on " + sess.Target.String()
	} else {
		var err error
		if e, source, err = readPlan(args[0], stdin); err != nil {
			return err
		}
	}
	in := rules.PlanInput{Explain: e, Object: model.Object{Kind: "plan", Name: source}, Query: f.query, Stmt: stmt}
	opts := diagnose.Options{Rules: ids, Runs: f.runs, StatementTimeout: f.statementTimeout, AllowFunctions: f.allowFunctions, Log: progress(stderr)}
	findings, skipped, err := diagnose.Plan(ctx, sess, in, opts)
	if err != nil {
		return err
	}
	if !e.HasAnalyze && len(skipped) > 0 {
		fmt.Fprintf(stderr, "pgmedic: the plan has no ANALYZE figures; %s need EXPLAIN (ANALYZE, BUFFERS) and did not run\n", skipped[0].Rule)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rep := report.NewPlan(Version, source, e, findings, skipped, len(rules.PlanRules()), min)
	return emit(rep, f.outputFlags, min, stdout)
}

// runCompare reads two plans and prints what changed between them.
func runCompare(args []string, stdin io.Reader, f explainFlags, stdout io.Writer) error {
	if args[0] == "-" && args[1] == "-" {
		return usageErr("only one of the two plans can come from stdin")
	}
	a, nameA, err := readPlan(args[0], stdin)
	if err != nil {
		return err
	}
	b, nameB, err := readPlan(args[1], stdin)
	if err != nil {
		return err
	}
	return write(report.NewCompare(Version, nameA, nameB, a, b, plan.Compare(a, b)), f.outputFlags, stdout)
}
