package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

const fixedStmtName = "pgmedic_verify_fixed"

// partitionPruning runs a statement on a partitioned table as the
// application wrote it and with its predicate on the key rewritten as a
// range (exp.Rewrite), with the same values, alternating, Runs times
// each after an untimed run of each: the partitions each run scanned (a
// scan node of a leaf partition that ran), the blocks it read, and the
// medians of its time.
func (e *Engine) partitionPruning(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	b := e.rerunnable(ctx, f)
	if b == nil {
		return
	}
	defer b.cleanup()
	fixedTarget, why := e.rewrittenTarget(ctx, exp.Rewrite, b)
	if why != "" {
		f.Verification = model.NotRunBecause(why)
		return
	}
	if fixedTarget != exp.Rewrite {
		defer e.Conn.Exec(context.Background(), envelope.Tag+"DEALLOCATE "+fixedStmtName)
	}
	leaves, err := e.leafPartitions(ctx, exp.Table)
	if err != nil || len(leaves) == 0 {
		f.Verification = model.NotRunBecause("cannot list the partitions of " + exp.Table.Name)
		return
	}
	var asWritten, asRange []float64
	var scanned, scannedFixed, blocks, blocksFixed int
	for i := range e.Runs + 1 {
		for j := range 2 {
			rewritten := (i+j)%2 == 1
			target := b.target
			if rewritten {
				target = fixedTarget
			}
			ex, err := e.onceWith(ctx, "ANALYZE, BUFFERS, TIMING OFF", target, e.jitSetting(), exp.AppSettings, customPlan)
			if err != nil {
				f.Verification = model.NotRunBecause(err.Error())
				return
			}
			if i == 0 {
				continue // the untimed run that warms the cache for both
			}
			n, blk := partitionsScanned(ex, leaves)
			ms := ex.PlanningMS + ex.ExecutionMS
			if rewritten {
				asRange, scannedFixed, blocksFixed = append(asRange, ms), n, blk
			} else {
				asWritten, scanned, blocks = append(asWritten, ms), n, blk
			}
		}
	}
	before, after := median(asWritten), median(asRange)
	f.Evidence = append(f.Evidence, pruningEvidence(scanned, scannedFixed, blocks, blocksFixed, before, after)...)
	f.Verification = model.Verification{
		Method:     fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS) x%d as written and x%d with the predicate rewritten as a range on the key, the same values, alternating, in rolled-back read-only transactions; partitions counted as the leaf partitions whose scans ran; medians of planning + execution time", e.Runs, e.Runs),
		Parameters: b.desc,
		Before:     &model.Measure{Value: model.Round(before, 3), Unit: "ms"}, After: &model.Measure{Value: model.Round(after, 3), Unit: "ms"}}
	if scannedFixed >= scanned {
		f.Verification.Status, f.Severity = model.Refuted, model.Info
		f.Title = fmt.Sprintf("the range on the key scans as many partitions (%d) as the statement as written", scanned)
		return
	}
	severity := f.Severity
	if judge(f, before, after) {
		f.Title = fmt.Sprintf("reads %d of %d partitions of %s where a range on its key reads %d (%.2f ms against %.2f ms)", scanned, len(leaves), exp.Table.Name, scannedFixed, before, after)
		return
	}
	// On a busy machine a scan's time moves with the load (parallel
	// workers wait for a core), its blocks do not: a range that reads at
	// most half the blocks and is not slower is the saving, decided on
	// the work.
	if onBlocks(before, after, blocks, blocksFixed) {
		f.Verification.Status, f.Severity = model.Confirmed, severity
		f.Verification.Before = &model.Measure{Value: float64(blocks), Unit: "blocks read"}
		f.Verification.After = &model.Measure{Value: float64(blocksFixed), Unit: "blocks read"}
		f.Verification.Method += fmt.Sprintf("; decided on the blocks read, which do not depend on the machine's load: the times (%.2f ms as written, %.2f ms) differ by less than 20%%", before, after)
		f.Title = fmt.Sprintf("reads %d of %d partitions of %s where a range on its key reads %d (%d blocks against %d)", scanned, len(leaves), exp.Table.Name, scannedFixed, blocks, blocksFixed)
		return
	}
	f.Title = fmt.Sprintf("the range on the key prunes %d of %d partitions but is not faster (%.2f ms as written, %.2f ms)", len(leaves)-scannedFixed, len(leaves), before, after)
}

// pruningEvidence is what the pruning experiment measured, each side:
// partitions scanned, blocks read, median times.
func pruningEvidence(scanned, scannedFixed, blocks, blocksFixed int, before, after float64) []model.Evidence {
	return []model.Evidence{
		{Label: "partitions scanned as written", Value: float64(scanned)},
		{Label: "partitions scanned with the range on the key", Value: float64(scannedFixed)},
		{Label: "blocks read as written", Value: float64(blocks)},
		{Label: "blocks read with the range on the key", Value: float64(blocksFixed)},
		{Label: "measured as written (median)", Value: model.Round(before, 3), Unit: "ms"},
		{Label: "measured with the range on the key (median)", Value: model.Round(after, 3), Unit: "ms"}}
}

// rewrittenTarget readies the rewritten statement to run beside the
// original, with its values: the statement itself, or an EXECUTE of it
// prepared with the original's parameter types (the caller deallocates
// it). A statement that does not parse or may not run says why.
func (e *Engine) rewrittenTarget(ctx context.Context, rewrite string, b *bound) (string, string) {
	fixed, err := sqlparse.Parse(rewrite)
	if err != nil {
		return "", "the rewritten statement does not parse: " + err.Error()
	}
	if why := e.refusal(ctx, fixed); why != "" {
		return "", "the rewritten statement is not re-run: " + why
	}
	if len(b.types) == 0 {
		return rewrite, ""
	}
	if err := envelope.PrepareAs(ctx, e.Conn, fixedStmtName, b.types, rewrite); err != nil {
		return "", "cannot prepare the rewritten statement: " + envelope.Message(err)
	}
	return "EXECUTE " + fixedStmtName + strings.TrimPrefix(b.target, "EXECUTE "+stmtName), ""
}

// onBlocks says whether a range the times did not confirm is confirmed
// on the work: at most half the blocks, and not slower.
func onBlocks(before, after float64, blocks, blocksFixed int) bool {
	return blocks > 0 && float64(blocksFixed) <= float64(blocks)/2 && after < before
}

// leafPartitions are the names of a partitioned table's leaf partitions.
func (e *Engine) leafPartitions(ctx context.Context, t model.RelRef) (map[string]bool, error) {
	rows, err := e.Conn.Query(ctx, envelope.Tag+`SELECT c.relname FROM pg_partition_tree(to_regclass($1)) p JOIN pg_class c ON c.oid = p.relid WHERE p.isleaf`,
		sqlparse.QuoteQualified(t.Schema, t.Name))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out[name] = true
	}
	return out, rows.Err()
}

// partitionsScanned counts the leaf partitions a plan's scans ran on
// (pruned ones have no node, or one EXPLAIN prints as never executed),
// and the blocks those scans read.
func partitionsScanned(ex *plan.Explain, leaves map[string]bool) (n, blocks int) {
	seen := map[string]bool{}
	ex.Plan.Walk(func(node, _ *plan.Node) {
		if !leaves[node.RelationName] || node.NeverExecuted || node.ActualLoops == 0 {
			return
		}
		if !seen[node.RelationName] {
			seen[node.RelationName] = true
			n++
		}
		blocks += int(node.Buffers.SharedHit + node.Buffers.SharedRead)
	})
	return n, blocks
}
