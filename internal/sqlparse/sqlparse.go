// Package sqlparse answers the questions pgmedic asks about SQL text, using
// PostgreSQL's own parser (libpg_query through pg_query_go). Nothing else in
// pgmedic imports pg_query_go, so the parser can be swapped for a pure-Go
// twin without touching the rest.
package sqlparse

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// Statement is a parsed single SQL statement. pgmedic parses each
// statement's text once (collect does, for every pg_stat_statements entry)
// and passes the Statement along; rewrites work on a copy of the tree and
// deparse it, so the original is never changed.
type Statement struct {
	text  string
	tree  *pgast.ParseResult
	root  *pgast.Node
	shape *QueryShape
}

// ErrMultiple is returned for text holding more than one statement.
var ErrMultiple = errors.New("more than one statement")

// Parse parses exactly one statement.
func Parse(sql string) (*Statement, error) {
	tree, err := pgast.Parse(sql)
	if err != nil {
		return nil, fmt.Errorf("parsing SQL: %w", err)
	}
	switch len(tree.Stmts) {
	case 0:
		return nil, errors.New("parsing SQL: no statement")
	case 1:
	default:
		return nil, ErrMultiple
	}
	return &Statement{text: sql, tree: tree, root: tree.Stmts[0].Stmt}, nil
}

// Text is the SQL the statement was parsed from, or deparsed from for a
// rewritten statement.
func (s *Statement) Text() string { return s.text }

// rewrite calls edit on a copy of the tree and deparses the copy when edit
// changed something (it returns how many places it changed). The statement
// itself stays as parsed.
func (s *Statement) rewrite(what string, edit func(c *Statement) int) (*Statement, int, error) {
	tree := s.tree.Clone()
	c := &Statement{tree: tree, root: tree.Stmts[0].Stmt}
	n := edit(c)
	if n == 0 {
		return s, 0, nil
	}
	out, err := pgast.Deparse(tree)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	c.text = out
	return c, n, nil
}

// Kind names the statement type as PostgreSQL's parser does (SelectStmt,
// UpdateStmt, ...).
func (s *Statement) Kind() string {
	if s.root == nil || s.root.Node == nil {
		return ""
	}
	if m := s.root.Inner(); m != nil {
		return pgast.NodeType(m)
	}
	return ""
}

// sideEffectFuncs are functions a SELECT can call that act outside the
// transaction (signals, files, locks, notifications, sequences, network).
// A read-only transaction rolled back does not undo them, so statements
// calling them are never re-run.
var sideEffectFuncs = []string{
	"pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
	"pg_switch_wal", "pg_create_", "pg_drop_", "pg_replication_", "pg_logical_", "pg_promote",
	"pg_advisory", "pg_try_advisory", "pg_notify", "pg_sleep", "pg_stat_reset", "pg_stat_statements_reset",
	"pg_file_", "pg_read_", "pg_ls_", "lo_", "dblink", "set_config", "nextval", "setval",
	"txid_current", "pg_current_xact_id", "pg_import_system_collations", "pg_log_backend_memory_contexts",
	"hypopg_", "brin_summarize", "brin_desummarize", "gin_clean_pending_list", "binary_upgrade_", "pg_backup_",
	"pg_wal_replay_", "pg_export_snapshot", "pg_stat_force_next_flush", "pg_stat_clear_snapshot", "setseed",
	"query_to_xml", "cursor_to_xml", "ts_stat", "ts_rewrite", "pg_nextoid", "pg_stop_making_pinned_objects",
	"pg_extension_config_dump", "pg_copy_", "pg_start_backup", "pg_stop_backup",
}

// SafeToAnalyze says whether the statement may be executed by EXPLAIN
// ANALYZE on a production database, and if not, why.
func (s *Statement) SafeToAnalyze() (bool, string) {
	sel := s.root.GetSelectStmt()
	if sel == nil {
		return false, "only SELECT statements are executed; this is " + s.Kind()
	}
	if sel.GetIntoClause() != nil {
		return false, "SELECT INTO creates a table"
	}
	safe, reason := true, ""
	s.walk(func(m pgast.Message) bool {
		switch n := m.(type) {
		case *pgast.SelectStmt:
			if len(n.LockingClause) > 0 {
				safe, reason = false, "SELECT ... FOR UPDATE/SHARE takes row locks"
			}
		case *pgast.InsertStmt, *pgast.UpdateStmt, *pgast.DeleteStmt, *pgast.MergeStmt:
			safe, reason = false, "the statement modifies data in a CTE"
		case *pgast.FuncCall:
			name := strings.ToLower(funcName(n))
			for _, bad := range sideEffectFuncs {
				if strings.HasPrefix(name, bad) {
					safe, reason = false, "it calls "+name+"(), which acts outside the transaction"
				}
			}
		}
		return safe
	})
	return safe, reason
}

// MaxParams is the most parameters a statement can have: the extended
// protocol's Bind message counts them in 16 bits.
const MaxParams = 65535

// ParamCount is the highest $n in the statement.
func (s *Statement) ParamCount() int {
	n := 0
	s.walk(func(m pgast.Message) bool {
		if p, ok := m.(*pgast.ParamRef); ok && int(p.Number) > n {
			n = int(p.Number)
		}
		return true
	})
	return n
}

// BareTargetParams lists the $n that stand alone as a select-list item
// (SELECT $2 AS depth). pg_stat_statements puts them where a literal was;
// with no context PostgreSQL types them as text, while the literal they
// replaced was almost always a number (a counter, a flag, a depth).
func (s *Statement) BareTargetParams() []int {
	var out []int
	s.walk(func(m pgast.Message) bool {
		if rt, ok := m.(*pgast.ResTarget); ok && rt.Val != nil && rt.Val.GetParamRef() != nil {
			out = append(out, int(rt.Val.GetParamRef().Number))
		}
		return true
	})
	sort.Ints(out)
	return out
}

// LimitParams lists the $n that are a LIMIT's count (or FETCH FIRST's),
// in any SELECT of the statement.
func (s *Statement) LimitParams() []int {
	var out []int
	s.walk(func(m pgast.Message) bool {
		if st, ok := m.(*pgast.SelectStmt); ok && st.LimitCount != nil {
			if p := st.LimitCount.GetParamRef(); p != nil {
				out = append(out, int(p.Number))
			}
		}
		return true
	})
	return out
}

// Column is a column reference resolved as far as the text allows.
type Column struct {
	Schema string // empty when not written
	Table  string // relation name; empty when it cannot be told
	Column string
}

// ParamColumns maps each $n to the columns it is compared with (=, <, IN,
// = ANY, BETWEEN, ...), so representative values can be read from pg_stats.
// Aliases are resolved to relation names; an unqualified column in a
// statement over several relations yields one candidate per relation.
func (s *Statement) ParamColumns() map[int][]Column {
	resolve := s.columnResolver()
	out := map[int][]Column{}
	add := func(col *pgast.Node, other *pgast.Node) {
		cr := unwrapColumn(col)
		if cr == nil {
			return
		}
		for _, p := range params(other) {
			out[p] = append(out[p], resolve(cr)...)
		}
	}
	s.walk(func(m pgast.Message) bool {
		if e, ok := m.(*pgast.A_Expr); ok {
			add(e.Lexpr, e.Rexpr)
			add(e.Rexpr, e.Lexpr)
		}
		return true
	})
	for k := range out {
		out[k] = dedupe(out[k])
	}
	return out
}

// columnResolver resolves column references to the relations the
// statement names, through their aliases; an unqualified column yields one
// candidate per relation.
func (s *Statement) columnResolver() func(*pgast.ColumnRef) []Column {
	type rel struct{ schema, name string }
	aliases := map[string]rel{}
	var rels []rel
	s.walk(func(m pgast.Message) bool {
		if rv, ok := m.(*pgast.RangeVar); ok {
			r := rel{rv.Schemaname, rv.Relname}
			rels = append(rels, r)
			aliases[rv.Relname] = r
			if rv.Alias != nil && rv.Alias.Aliasname != "" {
				aliases[rv.Alias.Aliasname] = r
			}
		}
		return true
	})
	resolve := func(cr *pgast.ColumnRef) []Column {
		var parts []string
		for _, f := range cr.Fields {
			if str := f.GetString_(); str != nil {
				parts = append(parts, str.Sval)
			} else {
				return nil // a.* and friends
			}
		}
		switch len(parts) {
		case 1:
			var out []Column
			seen := map[rel]bool{}
			for _, r := range rels {
				if !seen[r] {
					seen[r] = true
					out = append(out, Column{Schema: r.schema, Table: r.name, Column: parts[0]})
				}
			}
			return out
		case 2:
			if r, ok := aliases[parts[0]]; ok {
				return []Column{{Schema: r.schema, Table: r.name, Column: parts[1]}}
			}
			return []Column{{Table: parts[0], Column: parts[1]}}
		case 3:
			return []Column{{Schema: parts[0], Table: parts[1], Column: parts[2]}}
		}
		return nil
	}
	return resolve
}

// dedupe keeps the first of equal columns, in order.
func dedupe(cols []Column) []Column {
	seen := map[Column]bool{}
	var out []Column
	for _, c := range cols {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// unwrapColumn returns the column under casts, or nil.
func unwrapColumn(n *pgast.Node) *pgast.ColumnRef {
	for n != nil {
		if cr := n.GetColumnRef(); cr != nil {
			return cr
		}
		if tc := n.GetTypeCast(); tc != nil {
			n = tc.Arg
			continue
		}
		return nil
	}
	return nil
}

// params lists the $n directly on one side of a comparison: $1, $1::type,
// ANY($1), or a list ($1, $2) for IN / BETWEEN.
func params(n *pgast.Node) []int {
	if n == nil {
		return nil
	}
	switch {
	case n.GetParamRef() != nil:
		return []int{int(n.GetParamRef().Number)}
	case n.GetTypeCast() != nil:
		return params(n.GetTypeCast().Arg)
	case n.GetList() != nil:
		var out []int
		for _, item := range n.GetList().Items {
			out = append(out, params(item)...)
		}
		return out
	case n.GetFuncCall() != nil && strings.EqualFold(funcName(n.GetFuncCall()), "any"):
		return paramsOf(n.GetFuncCall().Args)
	case n.GetAArrayExpr() != nil: // = ANY (ARRAY[$1, $2])
		return paramsOf(n.GetAArrayExpr().Elements)
	case n.GetCoalesceExpr() != nil: // = coalesce($1, $2)
		return paramsOf(n.GetCoalesceExpr().Args)
	case n.GetMinMaxExpr() != nil: // greatest, least
		return paramsOf(n.GetMinMaxExpr().Args)
	}
	return nil
}

// valuesParamTypes types the parameters of a VALUES list used as a
// relation, USING (VALUES ($1, $2), ...) AS v(sku, qty) in MERGE or
// FROM (VALUES ...) v(id, x) in a bulk UPDATE: PostgreSQL types such a
// column from its values alone, and all-unknown columns become text. Each
// column takes the type of the table column it is compared with (ON
// i.sku = v.sku) or assigned to (SET qty = i.qty + v.qty, INSERT (qty)
// VALUES (v.qty)).
func (s *Statement) valuesParamTypes(columnType func(Column) string) map[int]string {
	out := map[int]string{}
	resolve := s.columnResolver()
	target := s.targetRelation()
	s.walk(func(m pgast.Message) bool {
		rs, ok := m.(*pgast.RangeSubselect)
		if !ok || rs.Alias == nil || rs.Subquery.GetSelectStmt() == nil {
			return true
		}
		rows := rs.Subquery.GetSelectStmt().ValuesLists
		for k, cn := range rs.Alias.Colnames {
			typ := s.aliasColumnType(rs.Alias.Aliasname, cn.GetString_().GetSval(), resolve, target, columnType)
			if typ == "" {
				continue
			}
			for _, row := range rows {
				if l := row.GetList(); l != nil && k < len(l.Items) && l.Items[k].GetParamRef() != nil {
					out[int(l.Items[k].GetParamRef().Number)] = typ
				}
			}
		}
		return true
	})
	return out
}

// targetRelation is the table an UPDATE, INSERT or MERGE writes.
func (s *Statement) targetRelation() *pgast.RangeVar {
	switch {
	case s.root.GetUpdateStmt() != nil:
		return s.root.GetUpdateStmt().Relation
	case s.root.GetInsertStmt() != nil:
		return s.root.GetInsertStmt().Relation
	case s.root.GetMergeStmt() != nil:
		return s.root.GetMergeStmt().Relation
	}
	return nil
}

// aliasColumnType finds the type of alias.column from where the statement
// compares it with a table column or assigns it to one of target's.
func (s *Statement) aliasColumnType(alias, column string, resolve func(*pgast.ColumnRef) []Column, target *pgast.RangeVar, columnType func(Column) string) string {
	is := func(n *pgast.Node) bool {
		cr := n.GetColumnRef()
		if cr == nil || len(cr.Fields) != 2 {
			return false
		}
		return cr.Fields[0].GetString_().GetSval() == alias && cr.Fields[1].GetString_().GetSval() == column
	}
	mentions := func(n *pgast.Node) bool {
		found := false
		(&Statement{root: n}).walk(func(m pgast.Message) bool {
			if nn, ok := m.(*pgast.ColumnRef); ok && len(nn.Fields) == 2 &&
				nn.Fields[0].GetString_().GetSval() == alias && nn.Fields[1].GetString_().GetSval() == column {
				found = true
			}
			return !found
		})
		return found
	}
	of := func(col string) string {
		if target == nil || col == "" {
			return ""
		}
		return columnType(Column{Schema: target.Schemaname, Table: target.Relname, Column: col})
	}
	typ := ""
	s.walk(func(m pgast.Message) bool {
		switch n := m.(type) {
		case *pgast.A_Expr:
			for _, pair := range [][2]*pgast.Node{{n.Lexpr, n.Rexpr}, {n.Rexpr, n.Lexpr}} {
				if pair[0] != nil && pair[1] != nil && is(pair[0]) && pair[1].GetColumnRef() != nil {
					for _, c := range resolve(pair[1].GetColumnRef()) {
						if t := columnType(c); t != "" {
							typ = t
						}
					}
				}
			}
		case *pgast.ResTarget: // SET col = ... v.col ...
			if n.Name != "" && n.Val != nil && mentions(n.Val) {
				typ = of(n.Name)
			}
		case *pgast.MergeWhenClause: // INSERT (col, ...) VALUES (v.col, ...)
			for i, v := range n.Values {
				if i < len(n.TargetList) && mentions(v) {
					typ = of(n.TargetList[i].GetResTarget().GetName())
				}
			}
		}
		return typ == ""
	})
	return typ
}

// anyArgFuncs take arguments of type "any" (or variadic "any"), which
// PostgreSQL cannot type a parameter from.
var anyArgFuncs = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"jsonb_build_object": true, "json_build_object": true, "jsonb_build_array": true,
		"json_build_array": true, "format": true, "concat": true, "concat_ws": true}
})

// besideCast is the type a parameter had on the other side of op from an
// explicit cast: date +/- a number of days, timestamp or time +/- an
// interval, interval times a number, otherwise the cast's own type. ""
// when the other side is not a cast.
func besideCast(n *pgast.Node, op string) string {
	tc := n.GetTypeCast()
	if tc == nil || tc.TypeName == nil || len(tc.TypeName.Names) == 0 {
		return ""
	}
	typ := tc.TypeName.Names[len(tc.TypeName.Names)-1].GetString_().GetSval()
	switch {
	case typ == "date" && (op == "+" || op == "-"):
		return "integer"
	case (typ == "timestamp" || typ == "timestamptz" || typ == "time" || typ == "timetz") && (op == "+" || op == "-"):
		return "interval"
	case typ == "interval" && (op == "*" || op == "/"):
		return "double precision"
	}
	switch op {
	case "+", "-", "*", "/", "%", "=", "<>", "<", ">", "<=", ">=":
		return typ
	}
	return ""
}

// numericFuncs take numbers: a parameter standing for one of their
// arguments was a number in the application's text. generate_series gets
// integer, as its bounds almost always are (and its rows are multiplied
// with intervals, which numeric is not).
var numericFuncs = sync.OnceValue(func() map[string]string {
	return map[string]string{"sum": "numeric", "avg": "numeric", "generate_series": "integer", "abs": "numeric",
		"round": "numeric", "ceil": "numeric", "floor": "numeric", "power": "numeric", "sqrt": "numeric", "mod": "numeric", "width_bucket": "numeric"}
})

// caseResults are the parameters that are n itself or every result of a
// CASE that n is.
func caseResults(n *pgast.Node) []int {
	if p := n.GetParamRef(); p != nil {
		return []int{int(p.Number)}
	}
	c := n.GetCaseExpr()
	if c == nil {
		return nil
	}
	var out []int
	for _, w := range c.Args {
		if cw := w.GetCaseWhen(); cw != nil {
			out = append(out, caseResults(cw.Result)...)
		}
	}
	if c.Defresult != nil {
		out = append(out, caseResults(c.Defresult)...)
	}
	return out
}

func paramsOf(nodes []*pgast.Node) []int {
	var out []int
	for _, a := range nodes {
		out = append(out, params(a)...)
	}
	return out
}

// funcName is the function's own name, without its schema (the parser
// has already folded unquoted names to lower case).
func funcName(f *pgast.FuncCall) string {
	var parts []string
	for _, n := range f.Funcname {
		if s := n.GetString_(); s != nil {
			parts = append(parts, s.Sval)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return parts[len(parts)-1]
}

// walk visits every node of the tree, depth first, until visit returns
// false. It goes through every message field of every node (pgast's
// generated EachChild) rather than switching over the ~270 node types, so
// no clause (JOIN ... ON, HAVING, subqueries) is missed, and in the order
// the fields are declared: what walks return (relations, callees) reaches
// the server in that order, so it must not change from one build to the
// next.
func (s *Statement) walk(visit func(pgast.Message) bool) {
	var rec func(m pgast.Message) bool
	rec = func(m pgast.Message) bool {
		return visit(m) && pgast.EachChild(m, rec)
	}
	if s.root != nil {
		rec(s.root)
	}
}

// FallbackParamTypes is the type list for a second PREPARE attempt when
// PostgreSQL cannot infer every $n ("unknown" leaves one to inference):
//   - a parameter compared with a column (directly, in IN or ANY
//     (ARRAY[...]), inside coalesce, greatest or least) gets the column's
//     type from columnType, when it knows the column;
//   - parameters in arithmetic compared with a column of a number type
//     ($2 + $3 = id) get the column's type, so that the column is never
//     the side cast;
//   - one standing bare in a select list is integer (a counter or flag
//     pg_stat_statements normalised);
//   - two parameters side by side get numeric for arithmetic, text for any
//     other operator.
//
// It returns nil when it has nothing to declare.
func (s *Statement) FallbackParamTypes(n int, columnType func(Column) string) []string {
	if n <= 0 || n > MaxParams {
		return nil
	}
	types := make([]string, n)
	for i := range types {
		types[i] = "unknown"
	}
	changed := false
	// set declares $p's type unless an earlier (more certain) source did.
	set := func(p int, typ string) {
		if p >= 1 && p <= n && typ != "" && types[p-1] == "unknown" {
			types[p-1], changed = typ, true
		}
	}
	if columnType != nil {
		for p, cols := range s.ParamColumns() {
			for _, c := range cols {
				if t := columnType(c); t != "" {
					set(p, t)
					break
				}
			}
		}
		s.arithmeticTypes(columnType, set)
		s.insertSelectTypes(columnType, set)
		s.updateSetTypes(columnType, set)
		for p, typ := range s.valuesParamTypes(columnType) {
			set(p, typ)
		}
	}
	s.limitTypes(set)
	for _, p := range s.BareTargetParams() {
		set(p, "integer")
	}
	s.operandTypes(set)
	s.argumentTypes(set)
	if !changed {
		return nil
	}
	return types
}

// FallbackCandidates are the type lists to try, in order, when PostgreSQL
// cannot infer every $n: FallbackParamTypes' list first, then the same
// with its arithmetic guesses as integer (round(x, $1) takes an integer
// where numeric has no such function) and as double precision, and with
// what it left unknown as text. Nil when there is nothing to declare.
func (s *Statement) FallbackCandidates(n int, columnType func(Column) string) [][]string {
	first := s.FallbackParamTypes(n, columnType)
	if first == nil {
		if n <= 0 || n > MaxParams {
			return nil
		}
		first = make([]string, n)
		for i := range first {
			first[i] = "unknown"
		}
	}
	swap := func(from, to string) []string {
		out := slices.Clone(first)
		for i, t := range out {
			if t == from {
				out[i] = to
			}
		}
		return out
	}
	var out [][]string
	for _, c := range [][]string{first, swap("numeric", "integer"), swap("numeric", "double precision"), swap("unknown", "text")} {
		// A list of unknowns declares nothing: the first attempt was that.
		fresh := slices.ContainsFunc(c, func(t string) bool { return t != "unknown" })
		for _, prev := range out {
			fresh = fresh && !slices.Equal(prev, c)
		}
		if fresh {
			out = append(out, c)
		}
	}
	return out
}

// numberTypes are the column types whose values arithmetic on parameters
// can stand for without casting the column.
var numberTypes = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"smallint": true, "integer": true, "bigint": true, "numeric": true, "real": true, "double precision": true}
})

// arithmeticTypes types the parameters of arithmetic compared with a
// column of a number type: in id = $2 + $3 both are the column's type.
// Typed numeric, an integer column would be cast to numeric (in
// pgmedic's copy only) and its index left unused.
func (s *Statement) arithmeticTypes(columnType func(Column) string, set func(int, string)) {
	resolve := s.columnResolver()
	s.walk(func(m pgast.Message) bool {
		e, ok := m.(*pgast.A_Expr)
		if !ok || len(e.Name) != 1 {
			return true
		}
		var sides [][2]*pgast.Node
		switch {
		case e.Kind == pgast.A_Expr_Kind_AEXPR_OP && comparison()[e.Name[0].GetString_().GetSval()]:
			sides = [][2]*pgast.Node{{e.Lexpr, e.Rexpr}, {e.Rexpr, e.Lexpr}}
		case e.Kind == pgast.A_Expr_Kind_AEXPR_BETWEEN || e.Kind == pgast.A_Expr_Kind_AEXPR_NOT_BETWEEN:
			for _, bound := range e.Rexpr.GetList().GetItems() {
				sides = append(sides, [2]*pgast.Node{e.Lexpr, bound})
			}
		}
		for _, side := range sides {
			cr := unwrapColumn(side[0])
			if cr == nil {
				continue
			}
			typ := ""
			for _, c := range resolve(cr) {
				if t := columnType(c); t != "" {
					typ = t
					break
				}
			}
			if !numberTypes()[typ] {
				continue
			}
			for _, p := range arithmeticParams(side[1]) {
				set(p, typ)
			}
		}
		return true
	})
}

// comparison are the operators that compare two values of one type.
var comparison = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"=": true, "<>": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}
})

// arithmeticParams are the parameters of an arithmetic expression made of
// parameters and constants only ($2 + $3, $1 * 2); nil for anything else.
func arithmeticParams(n *pgast.Node) []int {
	e := n.GetAExpr()
	if e == nil || e.Kind != pgast.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 {
		return nil
	}
	switch e.Name[0].GetString_().GetSval() {
	case "+", "-", "*", "/", "%":
	default:
		return nil
	}
	var out []int
	for _, side := range []*pgast.Node{e.Lexpr, e.Rexpr} {
		switch {
		case side == nil:
		case side.GetParamRef() != nil:
			out = append(out, int(side.GetParamRef().Number))
		case side.GetAConst() != nil:
		case side.GetAExpr() != nil:
			inner := arithmeticParams(side)
			if inner == nil {
				return nil
			}
			out = append(out, inner...)
		default:
			return nil
		}
	}
	return out
}

// updateSetTypes types UPDATE ... SET col = $1, and SET col = $2 * $3
// for a column of a number type: the value is the column's.
func (s *Statement) updateSetTypes(columnType func(Column) string, set func(int, string)) {
	up := s.root.GetUpdateStmt()
	if up == nil || up.Relation == nil {
		return
	}
	for _, t := range up.TargetList {
		rt := t.GetResTarget()
		if rt == nil || rt.Val == nil {
			continue
		}
		typ := columnType(Column{Schema: up.Relation.Schemaname, Table: up.Relation.Relname, Column: rt.Name})
		if p := rt.Val.GetParamRef(); p != nil {
			set(int(p.Number), typ)
			continue
		}
		if numberTypes()[typ] {
			for _, p := range arithmeticParams(rt.Val) {
				set(p, typ)
			}
		}
	}
}

// limitTypes types the parameters of a LIMIT or OFFSET (LIMIT $1, LIMIT
// $1 + $2): PostgreSQL takes a bigint there, and casts no numeric to it.
func (s *Statement) limitTypes(set func(int, string)) {
	s.walk(func(m pgast.Message) bool {
		st, ok := m.(*pgast.SelectStmt)
		if !ok {
			return true
		}
		for _, n := range []*pgast.Node{st.LimitCount, st.LimitOffset} {
			switch {
			case n == nil:
			case n.GetParamRef() != nil:
				set(int(n.GetParamRef().Number), "bigint")
			default:
				for _, p := range arithmeticParams(n) {
					set(p, "bigint")
				}
			}
		}
		return true
	})
}

// insertSelectTypes types INSERT ... SELECT $1, $2: each item is the value
// of a column of the table.
func (s *Statement) insertSelectTypes(columnType func(Column) string, set func(int, string)) {
	ins := s.root.GetInsertStmt()
	if ins == nil || ins.SelectStmt == nil {
		return
	}
	sel := ins.SelectStmt.GetSelectStmt()
	if sel == nil || len(sel.ValuesLists) > 0 {
		return
	}
	for i, t := range sel.TargetList {
		rt := t.GetResTarget()
		if i >= len(ins.Cols) || rt == nil || rt.Val.GetParamRef() == nil {
			continue
		}
		col := Column{Schema: ins.Relation.Schemaname, Table: ins.Relation.Relname, Column: ins.Cols[i].GetResTarget().GetName()}
		set(int(rt.Val.GetParamRef().Number), columnType(col))
	}
}

// operandTypes types parameters by the operator they stand beside. Two
// parameters side by side were two literals (SELECT 2 + 3, 'a' || 'b'),
// and PostgreSQL cannot choose an operator for unknown and unknown: they
// were numbers for arithmetic, and strings otherwise. A parameter beside a
// cast takes what the cast's type says ('2024-01-01'::date + 7).
func (s *Statement) operandTypes(set func(int, string)) {
	s.walk(func(m pgast.Message) bool {
		e, ok := m.(*pgast.A_Expr)
		if !ok || e.Kind != pgast.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Lexpr == nil || e.Rexpr == nil {
			return true
		}
		l, r := e.Lexpr.GetParamRef(), e.Rexpr.GetParamRef()
		op := e.Name[0].GetString_().GetSval()
		switch {
		case l == nil && r != nil:
			set(int(r.Number), besideCast(e.Lexpr, op))
		case r == nil && l != nil:
			set(int(l.Number), besideCast(e.Rexpr, op))
		case l != nil && r != nil:
			typ := "text"
			switch op {
			case "+", "-", "*", "/", "%", "^":
				typ = "numeric"
			}
			set(int(l.Number), typ)
			set(int(r.Number), typ)
		}
		return true
	})
}

// argumentTypes types parameters given to functions: arguments of type
// "any" were strings; those of functions that take numbers (sum, avg,
// generate_series, ...), directly or as the results of a CASE, were
// numbers, where PostgreSQL would pick text or nothing from unknowns.
func (s *Statement) argumentTypes(set func(int, string)) {
	s.walk(func(m pgast.Message) bool {
		f, ok := m.(*pgast.FuncCall)
		if !ok {
			return true
		}
		name := funcName(f)
		for _, a := range f.Args {
			switch {
			case anyArgFuncs()[name] && a.GetParamRef() != nil:
				set(int(a.GetParamRef().Number), "text")
			case numericFuncs()[name] != "":
				for _, p := range caseResults(a) {
					set(p, numericFuncs()[name])
				}
			}
		}
		return true
	})
}

// ArgumentParams are the parameters given directly as a function's
// arguments: each with the function's name (lower case, unqualified) and
// its place among the arguments (0 the first).
func (s *Statement) ArgumentParams() map[int]FuncArg {
	out := map[int]FuncArg{}
	s.walk(func(m pgast.Message) bool {
		f, ok := m.(*pgast.FuncCall)
		if !ok {
			return true
		}
		name := strings.ToLower(funcName(f))
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[i+1:]
		}
		for i, a := range f.Args {
			if p := a.GetParamRef(); p != nil {
				out[int(p.Number)] = FuncArg{Func: name, Arg: i}
			}
		}
		return true
	})
	return out
}

// FuncArg is a function and an argument's place in its call.
type FuncArg struct {
	Func string
	Arg  int
}

// SideEffect names a function the statement calls that acts outside its
// transaction (see sideEffectFuncs), or "" when there is none.
func (s *Statement) SideEffect() string {
	found := ""
	s.walk(func(m pgast.Message) bool {
		if f, ok := m.(*pgast.FuncCall); ok {
			name := strings.ToLower(funcName(f))
			for _, bad := range sideEffectFuncs {
				if strings.HasPrefix(name, bad) {
					found = name
					return false
				}
			}
		}
		return true
	})
	return found
}

// Name is a possibly schema-qualified object name as written in the SQL
// (unquoted identifiers already folded to lower case by the parser).
type Name struct {
	Schema string
	Name   string
}

func (n Name) String() string {
	if n.Schema == "" {
		return n.Name
	}
	return n.Schema + "." + n.Name
}

// Callees lists what executing the statement calls by name: functions
// (FuncCall, including set-returning functions in FROM) and operators
// (each may be backed by a user function), each once.
func (s *Statement) Callees() (funcs, operators []Name) {
	seenF, seenO := map[Name]bool{}, map[Name]bool{}
	s.walk(func(m pgast.Message) bool {
		switch n := m.(type) {
		case *pgast.FuncCall:
			if q := qualified(n.Funcname); q.Name != "" && !seenF[q] {
				seenF[q] = true
				funcs = append(funcs, q)
			}
		case *pgast.A_Expr:
			if q := qualified(n.Name); q.Name != "" && !seenO[q] {
				seenO[q] = true
				operators = append(operators, q)
			}
		}
		return true
	})
	return funcs, operators
}

// Relations lists the relations the statement names (tables, views, and
// CTE names, which the caller will not find in the catalogs), each once.
func (s *Statement) Relations() []Name {
	var out []Name
	seen := map[Name]bool{}
	s.walk(func(m pgast.Message) bool {
		if rv, ok := m.(*pgast.RangeVar); ok && rv.Relname != "" {
			q := Name{Schema: rv.Schemaname, Name: rv.Relname}
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
		return true
	})
	return out
}

// qualified reads a name list such as ["public", "reset_stats"]; for
// operators the list holds the operator symbol last.
func qualified(list []*pgast.Node) Name {
	var parts []string
	for _, n := range list {
		if s := n.GetString_(); s != nil {
			parts = append(parts, s.Sval)
		}
	}
	switch len(parts) {
	case 0:
		return Name{}
	case 1:
		return Name{Name: parts[0]}
	}
	return Name{Schema: parts[len(parts)-2], Name: parts[len(parts)-1]}
}

// Split cuts a script into its statements with PostgreSQL's own parser,
// so semicolons inside strings, dollar-quoted bodies and comments do not
// cut. A script that does not parse is an error, with the parser's
// message.
func Split(script string) ([]string, error) {
	parts, err := pgast.SplitWithParser(script, true)
	if err != nil {
		return nil, fmt.Errorf("parsing SQL: %w", err)
	}
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// Fingerprint identifies a statement regardless of its literals and
// layout (pg_query's fingerprint), with its text normalised ($1 for each
// literal) for display. Text that does not parse (cut by the log's line
// length, another dialect) gets its own text, with numbers and quoted
// strings replaced, as both.
func Fingerprint(sql string) (fingerprint, normalised string) {
	norm, err := pgast.Normalize(sql)
	if err != nil {
		norm = literalRe().ReplaceAllString(sql, "?")
		return "text:" + norm, norm
	}
	fp, err := pgast.Fingerprint(sql)
	if err != nil {
		return "text:" + norm, norm
	}
	return fp, normaliseUtility(norm)
}

// Normalised is a statement's text with its literals (an application's
// values) replaced by $n, for a report that must not show them; "" stays
// "".
func Normalised(sql string) string {
	if sql == "" {
		return ""
	}
	_, n := Fingerprint(sql)
	return n
}

// dmlStart are the first words of the statements pg_query's Normalize
// replaces every constant of.
var dmlStart = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "WITH": true, "VALUES": true, "TABLE": true, "(": true}
})

// normaliseUtility replaces the constants Normalize leaves in utility
// statements (EXECUTE q(42), SET work_mem = '64MB', DECLARE ... ) with
// $n, numbered after the statement's own parameters: a log reader's
// report keeps no values by default.
func normaliseUtility(norm string) string {
	first := strings.ToUpper(strings.TrimSpace(norm))
	if i := strings.IndexAny(first, " \t\n("); i > 0 {
		first = first[:i]
	} else if strings.HasPrefix(first, "(") {
		first = "("
	}
	if dmlStart()[first] || !literalRe().MatchString(norm) {
		return norm
	}
	n := 0
	for _, m := range paramRe().FindAllStringSubmatch(norm, -1) {
		if k, err := strconv.Atoi(m[1]); err == nil && k > n {
			n = k
		}
	}
	var b strings.Builder
	last := 0
	for _, loc := range literalRe().FindAllStringIndex(norm, -1) {
		if loc[0] > 0 && (norm[loc[0]-1] == '$' || isWordByte(norm[loc[0]-1])) {
			continue // $1, or digits inside a name
		}
		n++
		b.WriteString(norm[last:loc[0]])
		fmt.Fprintf(&b, "$%d", n)
		last = loc[1]
	}
	b.WriteString(norm[last:])
	return b.String()
}

var paramRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$(\d+)`) })

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

var literalRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b`) })
