package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/verify"
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
	b, err := io.ReadAll(io.LimitReader(r, maxPlanBytes+1))
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
	var source string
	if f.query != "" {
		var err error
		if e, err = explainQuery(ctx, sess, f.query, f.analyze, f.allowFunctions); err != nil {
			return err
		}
		source = "--query on " + sess.Target.String()
	} else {
		var err error
		if e, source, err = readPlan(args[0], stdin); err != nil {
			return err
		}
	}
	in := rules.PlanInput{Explain: e, Object: model.Object{Kind: "plan", Name: source}, Query: f.query}
	findings, skipped, err := diagnosePlan(ctx, sess, in, ids, f.runs, f.statementTimeout, f.allowFunctions, progress(stderr))
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

// diagnosePlan runs the plan rules; with a session it reads the catalogs
// for implicit casts and, when the query is known, runs the experiments.
func diagnosePlan(ctx context.Context, sess *envelope.Session, in rules.PlanInput, ids []string, runs int, timeout time.Duration, allow []string, logf func(string, ...any)) ([]model.Finding, []model.Skip, error) {
	if sess != nil {
		cat, err := collect.CastCatalog(ctx, sess.Conn, in.Explain.Tables())
		if err != nil {
			return nil, nil, inputErr(err)
		}
		in.Catalog = cat
	}
	findings, skipped, err := rules.RunPlan(in, ids)
	if err != nil {
		return nil, nil, usageErr("--rules: %v", err)
	}
	if sess == nil || in.Query == "" {
		return findings, skipped, nil
	}
	snap := &model.Snapshot{}
	if err := collect.Activity(ctx, sess.Conn, snap); err != nil {
		return nil, nil, inputErr(err)
	}
	eng := &verify.Engine{Conn: sess.Conn, Runs: runs, Cores: serverCores(0, sess.Target.Host),
		StatementTimeoutText: timeout.String(), Log: logf, AllowFunctions: allow}
	var more []model.Skip
	findings, more = eng.Run(ctx, snap, findings)
	rules.RankPlan(findings)
	return findings, append(skipped, more...), nil
}

// explainQuery runs EXPLAIN inside the envelope: a read-only transaction
// that is always rolled back; ANALYZE only for a plain SELECT.
func explainQuery(ctx context.Context, sess *envelope.Session, query string, analyze bool, allow []string) (*plan.Explain, error) {
	stmt, err := sqlparse.Parse(query)
	if err != nil {
		return nil, usageErr("--query: %v", err)
	}
	if stmt.ParamCount() > 0 {
		return nil, usageErr("--query has $n parameters; put literal values in their place so PostgreSQL can plan it as the application runs it")
	}
	opts := "VERBOSE, SETTINGS, SUMMARY"
	if analyze {
		if ok, why := stmt.SafeToAnalyze(); !ok {
			return nil, usageErr("--analyze runs only a plain SELECT on a target (%s); drop --analyze to see its plan", why)
		}
		why, err := verify.UnsafeCallee(ctx, sess.Conn, stmt, allow)
		if err != nil {
			return nil, inputErr(fmt.Errorf("--analyze: %w", err))
		}
		if why != "" {
			return nil, usageErr("--analyze refused: %s; or drop --analyze to see the plan without executing it", why)
		}
		opts = "ANALYZE, BUFFERS, " + opts
	}
	var e *plan.Explain
	err = envelope.RolledBack(ctx, sess.Conn, envelope.ReadOnly, func() (err error) {
		e, err = envelope.Explain(ctx, sess.Conn, opts, query)
		return err
	})
	if err != nil {
		return nil, inputErr(fmt.Errorf("EXPLAIN of --query failed: %s", strings.TrimSpace(err.Error())))
	}
	return e, nil
}

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
