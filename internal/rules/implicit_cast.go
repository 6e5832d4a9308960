package rules

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// columnCast matches a column wrapped in a cast as EXPLAIN prints it:
// "(orders.customer_id)::numeric" (VERBOSE) or "(sensor)::text". Unquoted
// identifiers are lower case in EXPLAIN output, which keeps keywords such
// as CURRENT_DATE out.
var columnCast = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\((?:((?:"(?:[^"]|"")+"|[a-z_][a-z0-9_$]*))\.)?("(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\)::([a-z_][a-z0-9_]*(?: [a-z_][a-z0-9_]*)*(?:\([0-9, ]+\))?(?:\[\])?)`)
})

// castOnColumn is one cast found in a node's condition.
type castOnColumn struct {
	qualifier, column, toType, where string
}

func findCasts(expr, where string) []castOnColumn {
	if !strings.Contains(expr, ")::") {
		return nil // every cast columnCast matches ends its column's parenthesis so
	}
	var out []castOnColumn
	for _, m := range columnCast().FindAllStringSubmatch(expr, -1) {
		out = append(out, castOnColumn{qualifier: unquoteIdent(m[1]), column: unquoteIdent(m[2]), toType: m[3], where: where})
	}
	return out
}

func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// implicitCast flags a column cast to another type inside a scan's Filter
// or a join's condition: PostgreSQL cannot use a plain index on the column
// for a predicate on the cast expression (Adform's hidden conversions; in
// PostgreSQL an int compared with 5.0, numeric with float8, char(n) with
// text, a timestamp cast to timestamptz). A cast that reached an Index Cond
// is served by an index and is left alone.
func implicitCast(in PlanInput) []model.Finding {
	var out []model.Finding
	seen := map[string]bool{}
	all := allNodes(in.Explain)
	for _, n := range all {
		var casts []castOnColumn
		if n.IsScan() {
			casts = append(casts, findCasts(n.Filter, "Filter")...)
		}
		casts = append(casts, findCasts(n.JoinFilter, "Join Filter")...)
		casts = append(casts, findCasts(n.HashCond, "Hash Cond")...)
		casts = append(casts, findCasts(n.MergeCond, "Merge Cond")...)
		if len(casts) == 0 {
			continue
		}
		// Only a node with casts needs its aliases resolved; walking every
		// node's subtree would be quadratic on plans with thousands of nodes.
		scans := scansBelow(n)
		for _, c := range casts {
			scan := scanFor(n, scans, c.qualifier)
			if scan == nil {
				continue
			}
			key := scan.Schema + "." + scan.RelationName + "." + c.column + "::" + c.toType
			if seen[key] {
				continue
			}
			if f, ok := castFinding(in, n, scan, c); ok {
				seen[key] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// implicitCastStatements runs implicit-cast over the plans check collects
// for its top statements. Those are generic plans (no ANALYZE), so the
// saving is sized from the statement's share of the database's time.
func implicitCastStatements(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	total := totalExecMS(s)
	for _, st := range s.Statements {
		ex := s.Plans[st.QueryID]
		if ex == nil {
			continue
		}
		in := PlanInput{Explain: ex, Catalog: s.Casts, Query: st.Query, Stmt: st.Parsed,
			Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 80), QueryID: strconv.FormatInt(st.QueryID, 10), Role: st.Role}}
		for _, f := range implicitCast(in) {
			if total > 0 {
				f.Impact.Share = model.Round(st.TotalExecMS/total, 4)
			}
			f.Impact.Summary = fmt.Sprintf("the statement ran %d times for %s, mean %s (%s of the database's statement time)",
				st.Calls, ms(st.TotalExecMS), ms(st.MeanExecMS()), pct(f.Impact.Share))
			f.Evidence = []model.Evidence{ev("calls", float64(st.Calls), ""), ev("mean execution", st.MeanExecMS(), "ms")}
			if s.GuessedTypes[st.QueryID] {
				guessedCast(s, st, &f)
			}
			if why := castCannotCost(s, st, f); why != "" {
				f.Severity, f.Experiment = model.Info, nil
				f.Verification = model.NotRunBecause(why)
			}
			if f.Experiment != nil {
				f.Experiment.QueryID, f.Experiment.Role = st.QueryID, st.Role
			} else if f.Severity < model.Warning {
				continue
			}
			out = append(out, f)
		}
		if ct := s.ClientTypes[st.QueryID]; ct != nil {
			out = append(out, clientTypeFindings(s, st, ct, total)...)
		}
	}
	return out, nil
}

// scanMSPerPage bounds what reading one page of a table from memory and
// filtering its rows through a cast costs: tens of microseconds on any
// server. A statement's whole scan of a table costs at most the table's
// pages times this; the rest of its time is not the cast's.
const scanMSPerPage = 0.05

// castMinMS is the least a cast must be able to cost per call to be a
// warning: below it, a scan of the whole table is as cheap as the index.
const castMinMS = 1.0

// castCannotCost says why a cast cannot be what makes a statement slow,
// or "": its table is so small that a scan of all of it through the
// cast costs under castMinMS, whatever the statement's mean time says
// (that time went to waiting: for a lock, for I/O, for the client).
func castCannotCost(s *model.Snapshot, st model.Statement, f model.Finding) string {
	if f.Experiment == nil || f.Severity < model.Warning {
		return ""
	}
	t := s.Table(f.Experiment.Table)
	if t == nil {
		return ""
	}
	pages := max(t.RelPages, t.HeapBytes/8192)
	if pages <= 0 {
		return ""
	}
	bound := float64(pages) * scanMSPerPage
	if bound >= castMinMS {
		return ""
	}
	why := fmt.Sprintf("%s.%s has %d pages: reading all of them through the cast takes under %s a call, as little as the index would", t.Schema, t.Name, pages, ms(bound))
	if mean := st.MeanExecMS(); mean > 10*bound {
		why += fmt.Sprintf("; the statement's mean of %s went to something else (waiting for a lock, for I/O or for the client)", ms(mean))
	}
	return why
}

// guessedMinShare is the part of a table's pages the application's own
// executions must read per call for a cast seen only with guessed
// parameter types to count: a statement served by an index reads a few
// pages, one that filters through a cast reads the table.
const guessedMinShare = 0.5

// guessedCast judges a cast in a plan made with parameter types pgmedic
// guessed. The cast may exist only in pgmedic's copy ($2 + $3 typed
// numeric against an integer column); what the server really ran says
// whether the application's plan has it too: pg_stat_statements' buffers
// per call against the table's pages. Without that evidence, or when the
// statement is fast, the finding stays at info and is not re-measured.
func guessedCast(s *model.Snapshot, st model.Statement, f *model.Finding) {
	pages := int64(0)
	if f.Experiment != nil {
		if t := s.Table(f.Experiment.Table); t != nil {
			pages = t.RelPages
		}
	}
	perCall := 0.0
	if st.Calls > 0 {
		perCall = float64(st.SharedBlksHit+st.SharedBlksRead) / float64(st.Calls)
	}
	f.Evidence = append(f.Evidence, ev("shared buffers per call (pg_stat_statements)", perCall, ""), ev("pages of the table", float64(pages), ""))
	seen := pages > 0 && perCall >= guessedMinShare*float64(pages)
	if seen && st.MeanExecMS() >= 1 {
		f.Verification.Reason = fmt.Sprintf("planned with parameter types pgmedic guessed; the application's executions read %.0f buffers per call of the table's %d pages, as a scan through the cast would. ", perCall, pages) + f.Verification.Reason
		return
	}
	why := fmt.Sprintf("the cast appears only with the parameter types pgmedic guessed to plan the statement (PostgreSQL could not infer them from its normalised text); the application's executions read %.0f buffers per call of the table's %d pages and took %s on average, so its own plan shows no sign of it", perCall, pages, ms(st.MeanExecMS()))
	if seen {
		why = fmt.Sprintf("the cast appears with the parameter types pgmedic guessed; the statement took %s on average, so the cast costs little", ms(st.MeanExecMS()))
	}
	f.Severity, f.Experiment = model.Info, nil
	f.Title = "with guessed parameter types: " + f.Title
	f.Verification = model.NotRunBecause(why + "; an executed plan in the server log (auto_explain) would show it")
}

// clientTypeFindings are the implicit casts a client's parameter type
// causes: the plan with the client's type (found by collect's probe)
// casts the column, the plan with inferred types does not, and only the
// first explains what pg_stat_statements saw.
func clientTypeFindings(s *model.Snapshot, st model.Statement, ct *model.ClientType, total float64) []model.Finding {
	in := PlanInput{Explain: ct.Plan, Catalog: s.Casts, Query: st.Query, Stmt: st.Parsed,
		Object: model.Object{Kind: "statement", Name: printable.Shorten(st.Query, 80), QueryID: strconv.FormatInt(st.QueryID, 10), Role: st.Role}}
	var out []model.Finding
	for _, f := range implicitCast(in) {
		if f.Experiment == nil || f.Experiment.Column != ct.Column {
			continue
		}
		f.Title = fmt.Sprintf("the client sends $%d as %s: %s", ct.Param, ct.Type, f.Title)
		f.Fix.Summary = fmt.Sprintf("send $%d as %s, the column's type: %s; or cast it in the SQL ($%d::%s)",
			ct.Param, ct.ColumnType, driverFix(ct.Type, ct.ColumnType), ct.Param, ct.ColumnType)
		if total > 0 {
			f.Impact.Share = model.Round(st.TotalExecMS/total, 4)
		}
		f.Impact.Summary = fmt.Sprintf("the statement ran %d times for %s, mean %s (%s of the database's statement time)",
			st.Calls, ms(st.TotalExecMS), ms(st.MeanExecMS()), pct(f.Impact.Share))
		f.Evidence = []model.Evidence{ev("calls", float64(st.Calls), ""), ev("mean execution", st.MeanExecMS(), "ms"),
			ev("shared buffers per call (pg_stat_statements)", ct.BlocksPerCall, ""),
			ev("planner cost with the type PostgreSQL infers ("+ct.ColumnType+")", ct.InferredCost, ""),
			ev("planner cost with $"+strconv.Itoa(ct.Param)+" as "+ct.Type, ct.ClientCost, "")}
		f.Experiment.QueryID, f.Experiment.Role = st.QueryID, st.Role
		f.Experiment.ClientTypes, f.Experiment.Param = ct.Types, ct.Param
		f.Verification.Reason = fmt.Sprintf("pg_stat_statements saw %.0f buffers per call; planned with $%d as %s the statement costs %.0f, with the type PostgreSQL infers %.1f: the client sends %s",
			ct.BlocksPerCall, ct.Param, ct.Type, ct.ClientCost, ct.InferredCost, ct.Type)
		out = append(out, f)
	}
	return out
}

// driverFix says what sends a type from the common drivers and what to
// send instead.
func driverFix(client, column string) string {
	switch client {
	case "numeric":
		return "a numeric literal in the SQL (4711.0), a Python Decimal (psycopg), a Java BigDecimal (JDBC setBigDecimal) or a .NET decimal is sent as numeric; write an integer literal or pass an int (setInt/setLong, int(...))"
	case "double precision":
		return "a float literal cast in the SQL (12.5::float8), a Python float, a Java double (setDouble) or a JavaScript number bound as float8 is sent as double precision; pass a Decimal or an int matching " + column
	case "text", "character varying":
		return "a string bound as text or varchar (JDBC setString, the default stringtype=varchar) is cast to the column's type; with JDBC set stringtype=unspecified, or bind the column's type"
	case "bigint":
		return "a Python int or Java long bound as bigint against a narrower column is harmless for integer columns but not for numeric or text ones; bind the column's type"
	case "timestamp with time zone":
		return "a timezone-aware datetime (Python datetime with tzinfo, java.time.Instant/OffsetDateTime) is sent as timestamptz against a timestamp column; pass a naive local timestamp (LocalDateTime) or make the column timestamptz"
	case "timestamp without time zone":
		return "a naive datetime (LocalDateTime) is sent as timestamp against a timestamptz column; pass an aware one (Instant/OffsetDateTime)"
	}
	return "bind the parameter with the column's type"
}

// scansBelow maps aliases (and relation names) to the scans under n.
func scansBelow(n *plan.Node) map[string]*plan.Node {
	m := map[string]*plan.Node{}
	n.Walk(func(x, _ *plan.Node) {
		if x.IsScan() {
			if x.Alias != "" {
				m[x.Alias] = x
			}
			if _, taken := m[x.RelationName]; !taken {
				m[x.RelationName] = x
			}
		}
	})
	return m
}

func scanFor(n *plan.Node, scans map[string]*plan.Node, qualifier string) *plan.Node {
	if qualifier != "" {
		return scans[qualifier]
	}
	if n.IsScan() {
		return n
	}
	return nil
}

// uncatalogued says what a cast finding is without the column's catalog:
// without it a varchar column's harmless relabel to text looks the same
// as char(n)'s real conversion.
func uncatalogued(in PlanInput, f *model.Finding, scan *plan.Node, c castOnColumn) {
	f.Fix.Summary = fmt.Sprintf("compare %s with a value of its own type (cast the literal or parameter, not the column); if the column is varchar, a cast to text is harmless", sqlparse.QuoteIdent(c.column))
	f.Verification.Reason = "unconfirmed: pgmedic did not see the catalogs; run with --dsn to check the column's type, its indexes and the cast"
	if in.Catalog != nil {
		// Read beside a connection (a check reading the server's log),
		// whose database does not hold the plan's table: the log holds
		// every database's plans.
		f.Verification.Reason = fmt.Sprintf("unconfirmed: the database checked has no column %s.%s.%s (a server's log holds every database's plans): check the plan's own database to judge the cast", scan.Schema, scan.RelationName, c.column)
	}
	if c.toType == "text" || c.toType == "character varying" {
		f.Severity = model.Info
	}
}

// castFinding judges one cast on a column with the catalog: it is a finding
// when an index on the column exists that the cast keeps the planner from
// using; the fix casts the value instead, or drops the cast when the
// index's operator family compares the two types directly.
func castFinding(in PlanInput, n, scan *plan.Node, c castOnColumn) (model.Finding, bool) {
	col := sqlparse.QuoteIdent(c.column)
	tbl := relName(scan)
	saved := 0.0
	if in.Explain.HasAnalyze && n == scan {
		// A scan that filters through the cast reads every row; an index
		// scan would touch the matching ones, so most of its time goes.
		kept := n.Figures.TotalRows / (n.Figures.TotalRows + n.RowsRemovedByFilter*n.ActualLoops + 1)
		saved = n.Figures.ExclusiveMS * (1 - kept)
	}
	title := fmt.Sprintf("%s.%s is cast to %s in the %s, so no index on the column can serve it", tbl, col, c.toType, c.where)
	f := planFinding(in, ImplicitCastID, n, title, saved, "")
	f.Object.Name += ", column " + c.column
	f.Evidence = append(f.Evidence, ev("rows removed by the filter", n.RowsRemovedByFilter*max(n.ActualLoops, 1), "rows"))
	if n.Figures.ExclusiveMS > 0 {
		f.Evidence = append(f.Evidence, ev("time in the node", n.Figures.ExclusiveMS, "ms"))
	}
	colInfo, known := in.Catalog.Lookup(scan.Schema, scan.RelationName, c.column)
	if !known {
		uncatalogued(in, &f, scan, c)
		return f, true
	}
	if colInfo.BaseType == c.toType || in.Catalog.Binary[colInfo.BaseType+">"+c.toType] {
		return f, false // binary-coercible: the index still matches
	}
	var usable *model.CastIndex
	for i := range colInfo.Indexes {
		usable = &colInfo.Indexes[i]
		break
	}
	if usable == nil {
		f.Severity = model.Info
		f.Title = fmt.Sprintf("%s.%s (%s) is converted to %s for every row in the %s", tbl, col, colInfo.Type, c.toType, c.where)
		f.Fix.Summary = fmt.Sprintf("compare %s with a value of type %s; no index leads with the column, so only the per-row conversion is lost", col, colInfo.Type)
		f.Verification.Reason = "catalog: no index leads with " + c.column
		return f, true
	}
	if truncates(colInfo.BaseType, c.toType) {
		// Not an accident of types: the statement means the column's day
		// (or whole number). Comparing the bare column with the value
		// would select other rows; a range on the column keeps them and
		// lets the index serve it.
		f.Title = fmt.Sprintf("%s.%s (%s) is truncated to %s in the %s, so index %s is not used", tbl, col, colInfo.Type, c.toType, c.where, usable.Name)
		f.Fix.Summary = fmt.Sprintf("compare %s itself with the range the truncated value stands for (for a day: %s >= $1::date AND %s < $1::date + 1), which %s serves; dropping the cast would select other rows",
			col, col, col, usable.Name)
		f.Verification.Reason = fmt.Sprintf("catalog: %s leads with %s (%s); the cast to %s drops part of each value, so pgmedic does not re-run the statement without it", usable.Name, c.column, colInfo.Type, c.toType)
		f.Severity = max(f.Severity, model.Warning)
		return f, true
	}
	accepts := false
	for _, t := range usable.Accepts {
		if t == c.toType {
			accepts = true
		}
	}
	f.Title = fmt.Sprintf("%s.%s (%s) is cast to %s in the %s, so index %s is not used", tbl, col, colInfo.Type, c.toType, c.where, usable.Name)
	facts := fmt.Sprintf("catalog: %s leads with %s (%s); the cast %s -> %s is not binary-coercible", usable.Name, c.column, colInfo.Type, colInfo.Type, c.toType)
	if accepts {
		f.Fix.Summary = fmt.Sprintf("drop the cast on %s: compare the column with the %s value directly; the index's operator family has a (%s, %s) operator, so %s can be used",
			col, c.toType, usable.InputType, c.toType, usable.Name)
		facts += fmt.Sprintf("; its operator family accepts %s directly", c.toType)
	} else {
		f.Fix.Summary = fmt.Sprintf("compare %s with a value of type %s: cast the literal or parameter (e.g. $1::%s), not the column; check that the value has no fraction or zone the cast would drop",
			col, colInfo.Type, colInfo.Type)
		facts += fmt.Sprintf("; no operator of its operator family takes (%s, %s)", usable.InputType, c.toType)
	}
	if f.Severity == model.Info {
		f.Severity = model.Warning
	}
	f.Verification.Reason = facts + "; pass the query (--query) to measure the fix"
	f.Verification.Method = facts
	f.Experiment = &model.Experiment{Kind: model.ExpCast, Table: model.RelRef{Schema: scan.Schema, Name: scan.RelationName},
		Column: c.column, ColumnType: colInfo.Type, CastType: c.toType, Index: usable.Name, KeepValue: accepts, Query: in.Query, Stmt: in.Stmt}
	return f, true
}

// truncates says whether a cast from one type to another drops part of
// each value on purpose (a timestamp's time of day, a number's fraction):
// the statement means the truncated value, and the bare column is not the
// same comparison.
func truncates(from, to string) bool {
	timestamps := map[string]bool{"timestamp without time zone": true, "timestamp with time zone": true}
	times := map[string]bool{"date": true, "time without time zone": true, "time with time zone": true}
	fractions := map[string]bool{"numeric": true, "double precision": true, "real": true}
	integers := map[string]bool{"smallint": true, "integer": true, "bigint": true}
	return (timestamps[from] && times[to]) || (fractions[from] && integers[to])
}

// ImplicitCastID is the stable id of the rule.
const ImplicitCastID = "implicit-cast"
