package rules

import (
	"fmt"
	"strconv"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// NPlusOneID is the stable id of the rule.
const NPlusOneID = "n-plus-one"

// Thresholds (see docs/rules/n-plus-one.md).
const (
	// A lookup this fast on the server is all round trip for the client.
	nPlusOneMaxMeanMS = 1.0
	nPlusOneMaxRows   = 10.0
	nPlusOneMinCalls  = 200
	// The transaction ran the lookup about this many times, from its age
	// and the time one call and the client's gap take.
	nPlusOneMinPerXact = 100.0
	nPlusOneMinTicks   = 2
	nPlusOneMaxGapMS   = 100.0
	// The batch the experiment sends (and the most the estimate counts).
	nPlusOneBatch = 100
)

// loopSeen is what the samples say about one statement run in loops:
// the ticks a session was in a transaction on it, those it was idle in
// the transaction (the client's turn), and the oldest such transaction.
type loopSeen struct {
	ticks, idle int
	xactMS      float64
	pids        map[int]bool
}

// nPlusOne finds the N+1 pattern: a session that, inside one transaction,
// runs the same tiny lookup by key again and again, one round trip each,
// where one statement with the keys as an array (= ANY($1)) would do. The
// lookup is cheap in pg_stat_statements; the samples show sessions in a
// transaction on it, idle between calls while the client turns around,
// for far longer than one call takes.
func nPlusOne(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	ok, skip := sampled(s, NPlusOneID)
	if !ok {
		return nil, skip
	}
	var skipped []model.Skip
	if s.Sampling.Hidden != "" {
		skipped = append(skipped, model.Skip{Rule: NPlusOneID, Reason: "could not see other roles' statements in the sampled sessions: loops of lookups there are not counted", Fix: s.Sampling.Hidden})
	}
	byID := map[int64]*model.Statement{}
	byText := map[string]*model.Statement{}
	for i := range s.Statements {
		st := &s.Statements[i]
		byID[st.QueryID] = st
		byText[sqlparse.Normalised(st.Query)] = st
	}
	seen := map[int64]*loopSeen{}
	for _, smp := range s.Sampling.Samples {
		for _, b := range smp.Backends {
			// A session idle in its transaction for a tenth of a second is
			// a client that stalled (client-stall), not one looping.
			if b.Database != s.Database || !b.InTransaction() || b.Query == "" || (b.State != "active" && b.StateMS >= nPlusOneMaxGapMS) {
				continue
			}
			// A statement whose transaction began with it (autocommit) is
			// one call, however long it ran: its age is no loop's.
			if b.State == "active" && b.XactMS-b.StateMS < 1 {
				continue
			}
			st := byID[b.QueryID]
			if st == nil {
				st = byText[sqlparse.Normalised(b.Query)]
			}
			if st == nil {
				continue
			}
			l := seen[st.QueryID]
			if l == nil {
				l = &loopSeen{pids: map[int]bool{}}
				seen[st.QueryID] = l
			}
			l.ticks++
			l.pids[b.PID] = true
			l.xactMS = max(l.xactMS, b.XactMS)
			if b.State != "active" {
				l.idle++
			}
		}
	}
	var out []model.Finding
	total := totalExecMS(s)
	for _, st := range s.Statements {
		l := seen[st.QueryID]
		if l == nil || l.ticks < nPlusOneMinTicks || st.Calls < nPlusOneMinCalls || st.Parsed == nil || st.Parsed.Kind() != "SelectStmt" {
			continue
		}
		mean, rows := st.MeanExecMS(), float64(st.Rows)/float64(st.Calls)
		if mean > nPlusOneMaxMeanMS || rows > nPlusOneMaxRows {
			continue
		}
		// One call is the server's part (its execution) and the client's
		// turn around; the samples say which share of the transaction's
		// time is the server's (active), so one call takes its execution
		// over that share. (pg_stat_activity's state_change is too coarse
		// for gaps of microseconds.)
		activeShare := max(float64(l.ticks-l.idle), 1) / float64(l.ticks)
		perCall := mean / activeShare
		perXact := l.xactMS / max(perCall, 0.001)
		if perXact < nPlusOneMinPerXact {
			continue
		}
		batched, param, col, err := st.Parsed.Batched()
		if err != nil {
			continue
		}
		share := float64(l.idle) / float64(l.ticks)
		n := min(nPlusOneBatch, int(perXact))
		out = append(out, model.Finding{
			Rule:     NPlusOneID,
			Severity: model.Warning,
			Title:    fmt.Sprintf("about %.0f calls per transaction of a %.3f ms lookup by %s: the transaction's time is round trips", perXact, mean, col.Column),
			Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 120), QueryID: strconv.FormatInt(st.QueryID, 10),
				Role: st.Role, Database: s.Database},
			Evidence: []model.Evidence{
				{Label: "calls", Value: float64(st.Calls)},
				{Label: "mean execution on the server", Value: model.Round(mean, 3), Unit: "ms"},
				{Label: "rows per call", Value: model.Round(rows, 2)},
				{Label: "sessions seen looping on it", Value: float64(len(l.pids))},
				{Label: "oldest transaction seen on it", Value: model.Round(l.xactMS, 1), Unit: "ms"},
				{Label: "one call, the client's turn included (estimated: its execution over the share of samples the session was active)", Value: model.Round(perCall, 3), Unit: "ms"},
				{Label: "calls per transaction (estimated: the transaction's age over one call)", Value: model.Round(perXact, 0)},
				{Label: "samples idle in the transaction, waiting for the client's next call", Value: model.Round(100*share, 0), Unit: "%"},
			},
			Impact: model.Impact{Summary: fmt.Sprintf("%s of this database's statement time, and round trips the transaction waits for: %.0f%% of its samples were the client's turn", pct(st.TotalExecMS/max(total, 0.001)), 100*share),
				Share: model.Round(st.TotalExecMS/max(total, 0.001), 4)},
			Fix: model.Fix{
				Summary: fmt.Sprintf("fetch the rows in one call: collect the keys and send them as an array (%s = ANY($%d)); in an ORM, eager loading (SQLAlchemy selectinload, Django prefetch_related, ActiveRecord includes) does this", col.Column, param),
				SQL:     batched.Text(),
			},
			Verification: model.NotRunBecause("not verified yet"),
			Docs:         docsPath(NPlusOneID),
			Experiment: &model.Experiment{Kind: model.ExpBatch, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role,
				Calls: int64(n), Rows: st.Rows, MeanMS: mean, Rewrite: batched.Text(),
				Table: model.RelRef{Schema: col.Schema, Name: col.Table}, Column: col.Column, Param: param},
		})
	}
	return out, skipped
}
