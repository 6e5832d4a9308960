package rules

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// MissingIndexID is the rule id.
const MissingIndexID = "missing-index"

// Thresholds. A table under minIndexRows is cheap to scan whatever the
// plan; a statement cheaper than minIndexMeanMS per call that is also a
// small share of the database's time is not worth an index.
const (
	minIndexRows     = 10000
	minIndexMeanMS   = 5.0
	minIndexShare    = 0.05
	indexTopN        = 15
	selectiveSeqScan = 0.10 // a seq scan keeping <= 10% of the table
	wastefulBlocks   = 10.0 // buffers read per row returned
)

// missingIndex looks at the plans of the statements that take the most
// time for scans that read far more of a table than the statement needs: a
// sequential scan whose filter keeps few rows, or an index scan whose Filter
// (not its Index Cond) throws most fetched rows away, the shape of a queue
// poll whose index no longer matches the WHERE clause. It proposes the index
// a DBA would write from the statement's parse tree.
func missingIndex(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	var skipped []model.Skip
	if s.Statements == nil {
		return nil, nil
	}
	if len(s.Statements) == 0 && s.StatementsHidden > 0 {
		return nil, []model.Skip{{Rule: MissingIndexID, Reason: fmt.Sprintf("every statement of this database in pg_stat_statements (%d) is another role's, whose text pgmedic's role may not read", s.StatementsHidden),
			Fix: "GRANT pg_read_all_stats TO " + sqlparse.QuoteIdent(s.User) + ";"}}
	}
	if len(s.Statements) == 0 {
		return nil, []model.Skip{{Rule: MissingIndexID, Reason: "pg_stat_statements holds no statements of this database yet",
			Fix: "let the application run for a while (pg_stat_statements counts from its last reset), then check again"}}
	}
	total := totalExecMS(s)
	seen := map[string]bool{}
	for i, st := range s.Statements {
		if i >= indexTopN {
			break
		}
		sh, ex := s.Shapes[st.QueryID], s.Plans[st.QueryID]
		if ex == nil {
			if msg, failed := s.PlanErrors[st.QueryID]; failed {
				// One entry per statement, each with its own reason: which
				// statements went unchecked is what the reader needs.
				skipped = append(skipped, model.Skip{Rule: MissingIndexID,
					Reason: fmt.Sprintf("statement %d (%s) could not be re-prepared and EXPLAINed, so its indexes were not checked: %s", st.QueryID, printable.Shorten(st.Query, 80), printable.Shorten(msg, 160)),
					Fix:    fixOr(s.PlanErrorFixes[st.QueryID], msg)})
			}
			continue
		}
		if sh == nil {
			continue
		}
		share := 0.0
		if total > 0 {
			share = st.TotalExecMS / total
		}
		if st.MeanExecMS() < 1 || st.MeanExecMS() < minIndexMeanMS && share < minIndexShare {
			continue
		}
		for _, c := range wastefulScans(s, st, ex) {
			p := propose(s, sh, c)
			if p == nil || seen[p.def] {
				continue
			}
			seen[p.def] = true
			out = append(out, indexFinding(s, st, share, c, p))
		}
	}
	if s.Unparsed > 0 {
		skipped = append(skipped, model.Skip{Rule: MissingIndexID,
			Reason: fmt.Sprintf("%d statements in pg_stat_statements do not parse as PostgreSQL (truncated text or another dialect) and were skipped", s.Unparsed),
			Fix:    "raise track_activity_query_size if statements are cut off"})
	}
	return out, skipped
}

// fixOr is the privilege fix when the failure was a privilege, else what
// to do about a statement pgmedic cannot re-prepare.
func fixOr(privilege, msg string) string {
	if privilege != "" && strings.Contains(msg, "permission denied") {
		return privilege
	}
	return "EXPLAIN the statement yourself with its real values: pgmedic explain --dsn ... --query '...'"
}

// scanCandidate is one plan node that reads much more than it keeps.
type scanCandidate struct {
	table  *model.Table
	node   *plan.Node
	reason string
	// blocksPerCall and rowsPerCall come from pg_stat_statements.
	blocksPerCall, rowsPerCall float64
}

// wastefulScans finds the scans of a statement's plan that read far more
// than they return: sequential scans of large tables, and index scans
// whose filter discards most of what the index finds.
func wastefulScans(s *model.Snapshot, st model.Statement, ex *plan.Explain) []scanCandidate {
	var out []scanCandidate
	calls := math.Max(float64(st.Calls), 1)
	blocks := float64(st.SharedBlksHit+st.SharedBlksRead) / calls
	rows := float64(st.Rows) / calls
	ex.Plan.Walk(func(n, _ *plan.Node) {
		if !n.IsScan() || n.Filter == "" {
			return
		}
		t := s.Table(model.RelRef{Schema: n.Schema, Name: n.RelationName})
		if t == nil || t.Reltuples < minIndexRows {
			return
		}
		c := scanCandidate{table: t, node: n, blocksPerCall: blocks, rowsPerCall: rows}
		switch {
		case n.NodeType == "Seq Scan" && n.PlanRows <= selectiveSeqScan*t.Reltuples:
			c.reason = fmt.Sprintf("sequential scan of %s rows to keep an estimated %s", count(t.Reltuples), count(n.PlanRows))
		case n.NodeType != "Seq Scan" && blocks >= 1000 && blocks >= wastefulBlocks*math.Max(rows, 1) && blocks >= 0.05*float64(t.RelPages):
			c.reason = fmt.Sprintf("%s on %s filters rows the index cannot skip: %s buffers per call for %s rows", n.NodeType, n.IndexName, count(blocks), count(rows))
		case n.NodeType == "Seq Scan" && blocks >= 0.5*float64(t.RelPages) && blocks >= wastefulBlocks*math.Max(rows, 1) && t.RelPages >= 1000:
			if bloatExplains(s, t, blocks, rows) {
				return
			}
			c.reason = fmt.Sprintf("sequential scan reading %s buffers per call for %s rows", count(blocks), count(rows))
		default:
			return
		}
		out = append(out, c)
	})
	return out
}

// bloatExplains says a sequential scan that keeps more than a tenth of a
// table reads many buffers per row because most of what it reads is dead
// rows: over the live rows alone (the pages a VACUUM FULL or pg_repack
// would leave) it would read a small table, or few buffers per row. Its
// fix is table-bloat's, which reports those dead rows; an index would
// only hide them.
func bloatExplains(s *model.Snapshot, t *model.Table, blocks, rows float64) bool {
	if !deadRowsReported(t) {
		return false
	}
	live := 1 - s.BloatShare(t)
	return live*float64(t.RelPages) < 1000 || live*blocks < wastefulBlocks*math.Max(rows, 1)
}

// proposal is an index to create.
type proposal struct {
	keys    []string
	desc    []bool
	partial string
	def     string // CREATE INDEX name ON schema.table (...) [WHERE ...]
	index   model.IndexProposal
	bytes   float64
	entries float64
}

// propose builds the index for the predicates of one scanned table:
// equality columns first (most distinct first), then the ORDER BY column
// when a LIMIT makes it a top-N (DESC where the sort needs it), else the
// first range column; an IS NULL that most rows fail becomes the partial
// predicate instead of a key column.
func propose(s *model.Snapshot, sh *model.QueryShape, c scanCandidate) *proposal {
	t := c.table
	nodeText := c.node.Filter + " " + c.node.IndexCond + " " + c.node.RecheckCond
	var eq, rng []string
	partial, partialCol := "", ""
	for _, p := range sh.Predicates {
		if p.Cast || !belongs(s, p.Rel, p.Column, t) || !mentions(nodeText, p.Column) {
			continue
		}
		col := s.Column(t, p.Column)
		if col == nil {
			continue
		}
		switch p.Op {
		case sqlparse.OpEq:
			eq = appendNew(eq, p.Column)
		case sqlparse.OpRange:
			rng = appendNew(rng, p.Column)
		case sqlparse.OpIsNull:
			if partial == "" && col.HasStats && col.NullFrac <= 0.5 {
				partial, partialCol = sqlparse.QuoteIdent(p.Column)+" IS NULL", p.Column
			}
		case sqlparse.OpNotNull:
			if partial == "" && col.HasStats && col.NullFrac >= 0.5 {
				partial, partialCol = sqlparse.QuoteIdent(p.Column)+" IS NOT NULL", p.Column
			}
		}
	}
	sort.SliceStable(eq, func(i, j int) bool { return distinct(s, t, eq[i]) > distinct(s, t, eq[j]) })
	p := &proposal{partial: partial}
	for _, k := range eq {
		if k != partialCol {
			p.keys, p.desc = append(p.keys, k), append(p.desc, false)
		}
	}
	orderOK := sh.HasLimit && len(sh.OrderBy) > 0
	for _, o := range sh.OrderBy {
		if !belongs(s, o.Rel, o.Column, t) || s.Column(t, o.Column) == nil {
			orderOK = false
		}
	}
	if orderOK {
		for _, o := range sh.OrderBy {
			if !contains(p.keys, o.Column) {
				p.keys, p.desc = append(p.keys, o.Column), append(p.desc, o.Desc)
			}
		}
	} else {
		for _, r := range rng {
			if r != partialCol && !contains(p.keys, r) {
				p.keys, p.desc = append(p.keys, r), append(p.desc, false)
				break
			}
		}
	}
	if len(p.keys) == 0 {
		return nil
	}
	if len(p.keys) > 4 {
		p.keys, p.desc = p.keys[:4], p.desc[:4]
	}
	for _, ix := range s.TableIndexes(t) {
		if covers(ix, p) {
			return nil
		}
	}
	p.index = model.IndexProposal{Name: indexName(t.Name, p.keys, partialCol, strings.HasSuffix(partial, "NOT NULL")),
		Table: model.RelRef{Schema: t.Schema, Name: t.Name}, Where: partial}
	for i, k := range p.keys {
		p.index.Keys = append(p.index.Keys, model.IndexKey{Column: k, Desc: p.desc[i]})
	}
	p.def = p.index.SQL(false)
	p.entries, p.bytes = indexSize(s, t, p.keys, partialCol, partial)
	return p
}

// covers says whether an existing index already is (or contains as a
// prefix) the proposal: same leading columns in the same order and
// direction (or all reversed, which a backward scan serves), and a
// predicate that is the same.
func covers(ix model.Index, p *proposal) bool {
	if !ix.Valid || ix.Method != "btree" || len(ix.Columns) < len(p.keys) {
		return false
	}
	same, flipped := true, true
	for i, k := range p.keys {
		if ix.Columns[i] != k {
			return false
		}
		d := i < len(ix.Desc) && ix.Desc[i]
		same = same && d == p.desc[i]
		flipped = flipped && d != p.desc[i]
	}
	if !same && !flipped {
		return false
	}
	return normPred(ix.Predicate) == normPred(p.partial)
}

func normPred(s string) string {
	s = strings.ToLower(s)
	return strings.Map(func(r rune) rune {
		if r == '(' || r == ')' || r == ' ' || r == '"' {
			return -1
		}
		return r
	}, s)
}

// indexSize estimates the B-tree's entries and bytes: per entry an 8-byte
// index tuple header plus the key widths (pg_stats avg_width) padded to 8
// bytes, and a 4-byte line pointer; leaf pages filled to the default 90%.
func indexSize(s *model.Snapshot, t *model.Table, keys []string, partialCol, partial string) (entries, bytes float64) {
	entries = t.Reltuples
	if partialCol != "" {
		if c := s.Column(t, partialCol); c != nil && c.HasStats {
			if strings.HasSuffix(partial, "IS NULL") {
				entries *= c.NullFrac
			} else {
				entries *= 1 - c.NullFrac
			}
		}
	}
	width := 0
	for _, k := range keys {
		w := 8
		if c := s.Column(t, k); c != nil && c.AvgWidth > 0 {
			w = c.AvgWidth
		}
		width += w
	}
	tuple := 8 + (width+7)/8*8 + 4
	perPage := math.Floor((8192 - 24 - 16) * 0.9 / float64(tuple))
	leaves := math.Ceil(entries / math.Max(perPage, 1))
	return math.Round(entries), (leaves*1.01 + 1) * 8192
}

// indexFinding is the finding for one wasteful scan and the index proposed
// for it: what the statement costs now, what the index would cost to keep
// (size, writes, HOT updates it prevents) and the experiment that tries it.
func indexFinding(s *model.Snapshot, st model.Statement, share float64, c scanCandidate, p *proposal) model.Finding {
	t := c.table
	sev := model.Warning
	if share >= 0.3 && st.MeanExecMS() >= 50 {
		sev = model.Critical
	}
	writes := t.Inserted + t.Updated - t.HOTUpdated
	var unhot []string
	for _, other := range s.Statements {
		sh := s.Shapes[other.QueryID]
		if sh == nil || sh.Command != "UPDATE" || s.Table(sh.Target) != t {
			continue
		}
		for _, col := range sh.SetColumns {
			if contains(p.keys, col) || mentions(p.partial, col) {
				unhot = appendNew(unhot, col)
			}
		}
	}
	writeCost := fmt.Sprintf("each INSERT and each non-HOT UPDATE of %s also writes this index (%s such row writes since statistics were reset)", t.Name, count(float64(writes)))
	if p.partial != "" {
		writeCost += ", only for rows where " + p.partial
	}
	if len(unhot) > 0 {
		writeCost += fmt.Sprintf("; updates that set %s already cannot be HOT if another index covers it, and will not be with this one", strings.Join(unhot, ", "))
	}
	f := model.Finding{
		Rule:     MissingIndexID,
		Severity: sev,
		Title: fmt.Sprintf("%s takes %.1f ms per call: %s; index %s would serve it",
			printable.Shorten(st.Query, 60), st.MeanExecMS(), c.reason, shortDef(p)),
		Object: model.Object{Kind: "statement", Name: t.Schema + "." + t.Name + ": " + printable.Shorten(st.Query, 100), QueryID: fmt.Sprint(st.QueryID), Role: st.Role, Database: s.Database},
		Evidence: []model.Evidence{
			{Label: "mean execution time", Value: model.Round(st.MeanExecMS(), 2), Unit: "ms"},
			{Label: "calls", Value: float64(st.Calls)},
			{Label: "share of database statement time", Value: model.Round(share*100, 2), Unit: "%"},
			{Label: "rows in " + t.Name, Value: math.Round(t.Reltuples)},
			{Label: "shared buffers touched per call", Value: math.Round(c.blocksPerCall)},
			{Label: "rows returned per call", Value: model.Round(c.rowsPerCall, 2)},
			{Label: "planned rows out of the scan (generic plan)", Value: math.Round(c.node.PlanRows)},
			{Label: "estimated size of the new index", Value: model.Round(p.bytes/(1<<20), 2), Unit: "MB"},
			{Label: "estimated entries in the new index", Value: p.entries},
		},
		Impact: model.Impact{Summary: fmt.Sprintf("%s of this database's statement time; %s", pct(share), writeCost), Share: math.Min(share, 1)},
		Fix: model.Fix{
			Summary: fmt.Sprintf("create the index (CONCURRENTLY: it does not block writes; about %.1f MB)", p.bytes/(1<<20)),
			SQL:     p.index.SQL(true) + ";",
		},
		Verification: model.NotRunBecause("verification was not run"),
		Docs:         docsPath(MissingIndexID),
		Experiment: &model.Experiment{Kind: model.ExpIndex, Query: st.Query, Stmt: st.Parsed, QueryID: st.QueryID, Role: st.Role, Calls: st.Calls, Rows: st.Rows,
			MeanMS: st.MeanExecMS(), BuffersPerCall: st.BuffersPerCall(), ReadShare: float64(st.SharedBlksRead) / math.Max(float64(st.SharedBlksHit+st.SharedBlksRead), 1),
			Table: p.index.Table, Proposal: &p.index},
	}
	if t.Partitioned {
		f.Fix.Summary = "create the index on the partitioned table (CONCURRENTLY is not supported there: create it on each partition first, then ON ONLY the parent and ATTACH)"
		f.Fix.SQL = p.def + ";"
	}
	return f
}

// shortDef is the proposal's keys and predicate, unquoted, for a title.
func shortDef(p *proposal) string {
	cols := make([]string, len(p.keys))
	for i, k := range p.keys {
		cols[i] = k
		if p.desc[i] {
			cols[i] += " DESC"
		}
	}
	s := "(" + strings.Join(cols, ", ") + ")"
	if p.partial != "" {
		s += " WHERE " + p.partial
	}
	return s
}

// indexName names a proposed index as people do: table, keys, and the
// partial predicate's column, within PostgreSQL's 63-byte limit.
func indexName(table string, keys []string, partialCol string, notNull bool) string {
	parts := append([]string{table}, keys...)
	if partialCol != "" {
		suffix := "null"
		if notNull {
			suffix = "notnull"
		}
		parts = append(parts, partialCol, suffix)
	}
	return objectName(parts, "_idx")
}

// objectName joins parts with underscores and ends with suffix, within
// the 63 bytes PostgreSQL keeps of a name (NAMEDATALEN - 1; it truncates
// a longer one with a NOTICE). Parts that do not fit are left out from
// the end; a first part too long on its own is cut at a character.
func objectName(parts []string, suffix string) string {
	const maxName = 63
	name := ""
	for i, p := range parts {
		next := p
		if i > 0 {
			next = name + "_" + p
		}
		if len(next)+len(suffix) > maxName {
			if i == 0 {
				name = cutBytes(p, maxName-len(suffix))
			}
			break
		}
		name = next
	}
	return name + suffix
}

// cutBytes is s cut to at most n bytes, at a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// belongs says whether a predicate's column is on table t: its relation
// resolves to t, or it was unqualified and t has such a column.
func belongs(s *model.Snapshot, r model.RelRef, col string, t *model.Table) bool {
	if r.Name == "" {
		return s.Column(t, col) != nil
	}
	return s.Table(r) == t
}

// mentions says whether col appears in an expression as a whole
// identifier (optionally quoted), e.g. in "(jobs_1.queued_at IS NULL)".
func mentions(text, col string) bool {
	if text == "" || col == "" {
		return false
	}
	ident := func(b byte) bool {
		return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	for from := 0; ; {
		i := strings.Index(text[from:], col)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(col)
		if (start == 0 || !ident(text[start-1])) && (end == len(text) || !ident(text[end])) {
			return true
		}
		from = start + 1
	}
}

// distinct is the column's number of distinct values from pg_stats:
// n_distinct, which PostgreSQL stores negative as a share of the rows
// when it expects the count to grow with the table.
func distinct(s *model.Snapshot, t *model.Table, col string) float64 {
	c := s.Column(t, col)
	if c == nil {
		return 0
	}
	if c.NDistinct < 0 {
		return -c.NDistinct * t.Reltuples
	}
	return c.NDistinct
}

func appendNew(list []string, s string) []string {
	if contains(list, s) {
		return list
	}
	return append(list, s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// count and ms print figures in titles the way plan comparisons do.
var (
	count = printable.Rows
	ms    = printable.MS
)

// Thresholds of missing-index (see docs/rules/missing-index.md).
const (
	missingIndexMinRemoved = 1000 // rows a filter threw away
	missingIndexMaxKept    = 0.1  // share of the scanned rows the filter kept
)

// planMissingIndex flags a sequential scan whose filter throws away nearly
// everything it reads: an index on the filtered columns reads only the
// rows that are kept.
func planMissingIndex(in PlanInput) []model.Finding {
	var out []model.Finding
	for _, g := range seqScanGroups(in.Explain) {
		if g.removed < missingIndexMinRemoved || g.kept > missingIndexMaxKept*(g.kept+g.removed) {
			continue
		}
		n := g.scans[0]
		if len(findCasts(n.Filter, "")) > 0 {
			continue // implicit-cast explains this scan better
		}
		// Parallel workers' times add up past the plan's own: no
		// saving is larger than the whole plan.
		saved := min(g.ms*(1-g.kept/(g.kept+g.removed)), in.Explain.TotalMS())
		cols := filterColumns(n)
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = sqlparse.QuoteIdent(c)
		}
		var f model.Finding
		if len(g.scans) == 1 {
			title := fmt.Sprintf("sequential scan of %s keeps %s of %s rows", relName(n), count(g.kept), count(g.kept+g.removed))
			f = planFinding(in, MissingIndexID, n, title, saved, "")
			if len(cols) > 0 {
				f.Fix = model.Fix{Summary: fmt.Sprintf("index the filtered column%s (equality columns first)", plural(len(cols))),
					SQL: fmt.Sprintf("CREATE INDEX CONCURRENTLY ON %s (%s);", relName(n), strings.Join(quoted, ", "))}
			}
		} else {
			last := g.scans[len(g.scans)-1]
			title := fmt.Sprintf("sequential scans of %d partitions (%s … %s) keep %s of %s rows", len(g.scans), relName(n), relName(last), count(g.kept), count(g.kept+g.removed))
			f = planFinding(in, MissingIndexID, g.parent, title, saved, "")
			f.Evidence = append(f.Evidence, ev("partitions scanned", float64(len(g.scans)), ""))
			if len(cols) > 0 {
				// The plan names the partitions, not the partitioned
				// table; the scans' alias (events_1, events_2, ...) is the
				// query's name for it, which is the table's unless the
				// query gave it another.
				parent := "<partitioned table>"
				if base := aliasBase(g.scans); base != "" {
					parent = sqlparse.QuoteIdent(base)
				}
				f.Fix = model.Fix{Summary: fmt.Sprintf("index the filtered column%s on the partitioned table: one CREATE INDEX on it creates the index on every partition (CONCURRENTLY is refused on a partitioned table; create it on each partition first to avoid the long lock)", plural(len(cols))),
					SQL: fmt.Sprintf("CREATE INDEX ON %s (%s);", parent, strings.Join(quoted, ", "))}
			}
		}
		f.Evidence = append(f.Evidence, ev("rows kept", g.kept, "rows"), ev("rows removed by filter", g.removed, "rows"),
			ev("time in the scan", g.ms, "ms"), ev("blocks read", g.blocks, "blocks"))
		if len(cols) == 0 {
			// No column of the filter is one a B-tree serves as
			// written: the fix is what would serve it, or none.
			fix, owner := unservedFix(n, g)
			f.Fix = fix
			if owner != "" {
				f.Title += fmt.Sprintf(" (see %s)", owner)
			}
			if fix.SQL == "" {
				f.Severity = min(f.Severity, model.Warning)
			}
		}
		f.Experiment = nil
		out = append(out, f)
	}
	return out
}

// scanGroup is the sequential scans judged together: one scan, or the
// scans of a partitioned table's partitions.
type scanGroup struct {
	parent                    *plan.Node
	scans                     []*plan.Node
	kept, removed, ms, blocks float64
}

// seqScanGroups gathers the executed, filtered sequential scans. A
// partitioned table shows as an Append (or MergeAppend) over one scan per
// partition, each with the same filter: each alone may be too small to
// matter, together they are the statement's time, and one index on the
// partitioned table fixes them all, so they are judged as one.
func seqScanGroups(e *plan.Explain) []*scanGroup {
	all, parent := nodes(e)
	var groups []*scanGroup
	byKey := map[[2]any]*scanGroup{}
	for _, n := range all {
		if n.NodeType != "Seq Scan" || n.Filter == "" || !n.Executed() {
			continue
		}
		var g *scanGroup
		if p := parent[n]; p != nil && (p.NodeType == "Append" || p.NodeType == "Merge Append") {
			// Under VERBOSE each partition's filter names its own
			// alias (call_records_3.started_at): the same condition.
			key := [2]any{p, unaliased(n)}
			if g = byKey[key]; g == nil {
				g = &scanGroup{parent: p}
				byKey[key] = g
				groups = append(groups, g)
			}
		} else {
			g = &scanGroup{}
			groups = append(groups, g)
		}
		g.scans = append(g.scans, n)
		g.removed += n.RowsRemovedByFilter * n.ActualLoops
		g.kept += n.Figures.TotalRows
		g.ms += n.Figures.ExclusiveMS
		g.blocks += float64(n.Buffers.SharedHit + n.Buffers.SharedRead)
	}
	return groups
}

// unaliased is a scan's filter without its alias's qualification.
func unaliased(n *plan.Node) string {
	if n.Alias == "" {
		return n.Filter
	}
	return strings.ReplaceAll(n.Filter, n.Alias+".", "")
}

// aliasBase is the name PostgreSQL derived the partitions' aliases from
// (events_1, events_2 → events), when they all share it.
func aliasBase(scans []*plan.Node) string {
	base := ""
	for _, n := range scans {
		i := strings.LastIndexByte(n.Alias, '_')
		if i <= 0 || strings.Trim(n.Alias[i+1:], "0123456789") != "" || n.Alias[i+1:] == "" {
			return ""
		}
		if base != "" && n.Alias[:i] != base {
			return ""
		}
		base = n.Alias[:i]
	}
	return base
}

// unservedFix is the fix for a scan whose filter no plain B-tree on its
// columns serves as written, and the rule whose class the filter is:
//   - LIKE 'abc%' under a linguistic collation: a B-tree compares by the
//     collation, which cannot bound a prefix; one built with
//     text_pattern_ops compares as C does and can (collation-prefix);
//   - a column inside date_trunc(), a cast to date or extract(year):
//     rewritten as a range on the bare column, a B-tree on it serves the
//     filter and, on a partitioned table, the planner prunes partitions
//     again (partition-pruning, which rewrites the statement itself);
//   - anything else (a function of the column, <>, OR across columns):
//     no index pgmedic can name serves it, and the fix says so, with no
//     SQL to paste.
func unservedFix(n *plan.Node, g *scanGroup) (model.Fix, string) {
	alias := n.Alias
	if alias == "" {
		alias = n.RelationName
	}
	rel := relName(n)
	partitioned := len(g.scans) > 1
	if partitioned {
		rel = "<partitioned table>"
		if base := aliasBase(g.scans); base != "" {
			rel = sqlparse.QuoteIdent(base)
		}
	}
	table, filter := n.RelationName, n.Filter
	if partitioned && aliasBase(g.scans) != "" {
		// Said of the partitioned table, in the query's own name.
		table, alias = aliasBase(g.scans), aliasBase(g.scans)
		filter = strings.ReplaceAll(n.Filter, n.Alias+".", alias+".")
	}
	where := fmt.Sprintf("SELECT 1 FROM %s AS %s WHERE %s", sqlparse.QuoteIdent(table), sqlparse.QuoteIdent(alias), filter)
	st, err := sqlparse.Parse(where)
	if err != nil {
		return model.Fix{Summary: "no plain index serves the filter " + n.Filter + " as written"}, ""
	}
	if likes := st.LikePrefixes(); len(likes) > 0 {
		col := sqlparse.QuoteIdent(likes[0].Column.Column)
		create := "CREATE INDEX CONCURRENTLY ON"
		if partitioned {
			create = "CREATE INDEX ON"
		}
		return model.Fix{Summary: fmt.Sprintf("an index on %s as it is compares by the column's collation, which cannot bound LIKE 'prefix%%' unless the collation is C: build one with text_pattern_ops (it serves LIKE and equality, not ORDER BY), or declare the column COLLATE \"C\" if it holds codes", likes[0].Column.Column),
			SQL: fmt.Sprintf("%s %s (%s text_pattern_ops);", create, rel, col)}, CollationPrefixID
	}
	for _, col := range st.ColumnNames() {
		hidden := st.HiddenKeys(col)
		if len(hidden) == 0 || !hidden[0].Fixable {
			continue
		}
		rewritten, changed, err := st.PruneOnKey(col)
		if err != nil || changed == 0 {
			continue
		}
		range_ := rewritten.Text()
		if _, after, ok := strings.Cut(range_, " WHERE "); ok {
			range_ = after
		}
		if partitioned {
			return model.Fix{Summary: fmt.Sprintf("%s: rewrite %s as a range on the bare column (%s); the planner then prunes the partitions the range leaves out, and an index on %s serves what is left",
				hidden[0].Why, hidden[0].Predicate, range_, col)}, PartitionPruningID
		}
		return model.Fix{Summary: fmt.Sprintf("%s, which no index on %s serves: rewrite %s as a range on the bare column (%s), which an index on %s serves", hidden[0].Why, col, hidden[0].Predicate, range_, col),
			SQL: fmt.Sprintf("CREATE INDEX CONCURRENTLY ON %s (%s);  -- once the statement compares the bare column", rel, sqlparse.QuoteIdent(col))}, ""
	}
	return model.Fix{Summary: "no index on the filter's columns serves " + n.Filter + " as written (a column inside an expression, <>, or OR across columns): rewrite the condition so a column stands alone against a value, or index the expression if its functions are immutable"}, ""
}

// filterColumns reads the filter's columns through the SQL parser:
// equality columns first, then at most one range column (a B-tree can
// use only the first range key).
func filterColumns(n *plan.Node) []string {
	alias := n.Alias
	if alias == "" {
		alias = n.RelationName
	}
	sh, err := sqlparse.Describe(fmt.Sprintf("SELECT 1 FROM %s AS %s WHERE %s", sqlparse.QuoteIdent(n.RelationName), sqlparse.QuoteIdent(alias), n.Filter))
	if err != nil {
		return nil
	}
	var eq, rng []string
	for _, p := range sh.Predicates {
		if p.Cast {
			continue
		}
		switch p.Op {
		case sqlparse.OpEq:
			eq = appendNew(eq, p.Column)
		case sqlparse.OpRange:
			rng = appendNew(rng, p.Column)
		}
	}
	sort.Strings(eq)
	if len(rng) > 0 {
		eq = appendNew(eq, rng[0])
	}
	return eq
}
