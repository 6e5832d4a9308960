package sqlparse

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// HiddenKey is a predicate on a partition key that the planner cannot
// prune partitions with: the key inside a function or a cast, or compared
// with a volatile function's value.
type HiddenKey struct {
	Predicate string // the comparison, deparsed
	Why       string
	// Fixable: PruneOnKey rewrites it as a range on the bare key.
	Fixable bool
}

// volatileNow are the volatile functions a partition key is compared
// with in place of now(): PostgreSQL evaluates them per row, so neither
// the planner nor the executor's start can prune with them.
var volatileNow = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"clock_timestamp": true, "timeofday": true, "random": true}
})

// HiddenKeys lists the comparisons of column that hide it from partition
// pruning; none when the statement also compares the bare column with a
// value pruning can use (it is pruned on that one).
func (s *Statement) HiddenKeys(column string) []HiddenKey {
	var out []HiddenKey
	bare := false
	s.walk(func(m pgast.Message) bool {
		e, ok := m.(*pgast.A_Expr)
		if !ok {
			return true
		}
		h, isBare, ok := classifyKeyComparison(e, column)
		switch {
		case !ok:
		case isBare:
			bare = true
		default:
			h.Predicate = exprText(&pgast.Node{Node: e})
			out = append(out, h)
		}
		return true
	})
	if bare {
		return nil
	}
	return out
}

// PruneOnKey rewrites the comparisons HiddenKeys found fixable as ranges
// on the bare key: "taken_at::date = $1" becomes "taken_at >= $1::date
// AND taken_at < $1::date + 1", "date_trunc('day', taken_at) = $1"
// becomes "taken_at >= $1 AND taken_at < $1 + interval '1 day'",
// "extract(year FROM taken_at) = $1" a range of make_date, and a
// clock_timestamp() compared with the key now(). It returns the
// statement and how many comparisons changed.
func (s *Statement) PruneOnKey(column string) (*Statement, int, error) {
	var failed error
	st, n, err := s.rewrite("rewriting the predicates on "+column, func(c *Statement) int {
		n := 0
		// One comparison per walk: the walk stops where the tree changed.
		for replaced := true; replaced && failed == nil; {
			replaced = false
			c.walk(func(m pgast.Message) bool {
				w, ok := m.(*pgast.Node)
				if !ok {
					return true
				}
				e := w.GetAExpr()
				if e == nil {
					return true
				}
				h, isBare, ok := classifyKeyComparison(e, column)
				if !ok || isBare || !h.Fixable {
					return true
				}
				repl, err := rangeFor(e, column)
				if err != nil {
					failed = err
					return false
				}
				w.Node = repl.Node
				replaced = true
				n++
				return false
			})
		}
		return n
	})
	if failed != nil {
		return nil, 0, failed
	}
	if err == nil && n > 0 {
		// The deparser does not give back every tree it is given as SQL
		// that parses (odd input); such a rewrite is no rewrite.
		if _, perr := Parse(st.Text()); perr != nil {
			return nil, 0, fmt.Errorf("rewriting the predicates on %s gave SQL that does not parse: %w", column, perr)
		}
	}
	return st, n, err
}

// classifyKeyComparison reads one comparison: ok when it compares column
// with something that names no column; bare when pruning can use it.
func classifyKeyComparison(e *pgast.A_Expr, column string) (h HiddenKey, bare, ok bool) {
	op := opName(e)
	switch {
	case e.Kind == pgast.A_Expr_Kind_AEXPR_OP && (op == "=" || op == "<" || op == "<=" || op == ">" || op == ">="):
	case e.Kind == pgast.A_Expr_Kind_AEXPR_BETWEEN, e.Kind == pgast.A_Expr_Kind_AEXPR_IN, e.Kind == pgast.A_Expr_Kind_AEXPR_OP_ANY:
	default:
		return h, false, false
	}
	for _, side := range [][2]*pgast.Node{{e.Lexpr, e.Rexpr}, {e.Rexpr, e.Lexpr}} {
		key, val := side[0], side[1]
		if key == nil || val == nil || mentionsColumn(val, "") {
			continue
		}
		if cr := key.GetColumnRef(); cr != nil && lastField(cr) == column {
			if f := volatileCall(val); f != "" {
				return HiddenKey{Why: fmt.Sprintf("%s is compared with %s(), which is volatile: no partition can be left out for it", column, f), Fixable: f == "clock_timestamp"}, false, true
			}
			return h, true, true
		}
		if !mentionsColumn(key, column) {
			continue
		}
		switch {
		case isDateOf(key, column):
			return HiddenKey{Why: fmt.Sprintf("%s is cast to date, and a partition's bounds are on %s itself", column, column), Fixable: e.Kind == pgast.A_Expr_Kind_AEXPR_OP || e.Kind == pgast.A_Expr_Kind_AEXPR_BETWEEN}, false, true
		case (truncUnit(key, column) != "" || truncParam(key, column) != nil) && op == "=":
			return HiddenKey{Why: fmt.Sprintf("%s is inside date_trunc(), and a partition's bounds are on %s itself", column, column), Fixable: true}, false, true
		case isYearOf(key, column) && op == "=":
			return HiddenKey{Why: fmt.Sprintf("the year of %s is compared, and a partition's bounds are on %s itself", column, column), Fixable: true}, false, true
		}
		return HiddenKey{Why: fmt.Sprintf("%s is inside an expression (%s), and a partition's bounds are on %s itself", column, exprText(key), column)}, false, true
	}
	return h, false, false
}

// rangeFor is the range on the bare key that replaces a fixable
// comparison, built from a template whose pgmedic_key and pgmedic_val*
// stand for the key and the compared values.
func rangeFor(e *pgast.A_Expr, column string) (*pgast.Node, error) {
	key, val := e.Lexpr, e.Rexpr
	op := opName(e)
	if !mentionsColumn(key, column) || mentionsColumn(val, "") {
		key, val = val, key
		op = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
	}
	vals := []*pgast.Node{val}
	if l := val.GetList(); l != nil {
		vals = l.Items
	}
	// A value the statement already casts to date is not cast again.
	day := func(i int) string {
		if i < len(vals) && isDateCast(vals[i]) {
			return fmt.Sprintf("pgmedic_val%d", i)
		}
		return fmt.Sprintf("(pgmedic_val%d)::date", i)
	}
	var tmpl string
	switch {
	case key.GetColumnRef() != nil: // compared with clock_timestamp()
		return nowFor(e), nil
	case isDateOf(key, column) && e.Kind == pgast.A_Expr_Kind_AEXPR_BETWEEN && len(vals) == 2:
		tmpl = "pgmedic_key >= " + day(0) + " AND pgmedic_key < " + day(1) + " + 1"
	case isDateOf(key, column):
		tmpl = map[string]string{
			"=":  "pgmedic_key >= " + day(0) + " AND pgmedic_key < " + day(0) + " + 1",
			">=": "pgmedic_key >= " + day(0), ">": "pgmedic_key >= " + day(0) + " + 1",
			"<": "pgmedic_key < " + day(0), "<=": "pgmedic_key < " + day(0) + " + 1"}[op]
	case truncUnit(key, column) != "":
		tmpl = "pgmedic_key >= pgmedic_val0 AND pgmedic_key < pgmedic_val0 + interval '" + unitInterval(truncUnit(key, column)) + "'"
	case truncParam(key, column) != nil:
		// The unit is a parameter (pg_stat_statements turns the literal
		// 'day' into $n): the interval is built from it when the
		// statement runs. Interval input knows every unit date_trunc
		// takes but the quarter.
		tmpl = "pgmedic_key >= pgmedic_val0 AND pgmedic_key < pgmedic_val0 + (CASE lower((pgmedic_unit)::text) WHEN 'quarter' THEN '3 months' ELSE '1 ' || (pgmedic_unit)::text END)::interval"
	case isYearOf(key, column):
		tmpl = "pgmedic_key >= make_date((pgmedic_val0)::int, 1, 1) AND pgmedic_key < make_date((pgmedic_val0)::int + 1, 1, 1)"
	}
	if tmpl == "" {
		return nil, fmt.Errorf("no range on %s replaces %s", column, exprText(&pgast.Node{Node: e}))
	}
	tree, err := pgast.Parse("SELECT 1 WHERE " + tmpl)
	if err != nil {
		return nil, err
	}
	where := tree.Stmts[0].Stmt.GetSelectStmt().WhereClause
	bareKey := columnIn(key, column)
	t := &Statement{root: where}
	t.walk(func(m pgast.Message) bool {
		w, ok := m.(*pgast.Node)
		if !ok {
			return true
		}
		cr := w.GetColumnRef()
		if cr == nil {
			return true
		}
		switch name := lastField(cr); {
		case name == "pgmedic_key":
			w.Node = bareKey.Clone().Node
		case name == "pgmedic_unit":
			w.Node = truncParam(key, column).Clone().Node
		case strings.HasPrefix(name, "pgmedic_val"):
			i := int(name[len(name)-1] - '0')
			w.Node = vals[i].Clone().Node
		}
		return true
	})
	return where, nil
}

// isDateCast: the value is already cast to date ($1::date, '2025-03-14'::date).
func isDateCast(n *pgast.Node) bool {
	tc := n.GetTypeCast()
	if tc == nil || tc.TypeName == nil || len(tc.TypeName.Names) == 0 {
		return false
	}
	return tc.TypeName.Names[len(tc.TypeName.Names)-1].GetString_().GetSval() == "date"
}

// nowFor is the comparison with its clock_timestamp() calls made now().
func nowFor(e *pgast.A_Expr) *pgast.Node {
	c := e.Clone()
	t := &Statement{root: &pgast.Node{Node: c}}
	t.walk(func(m pgast.Message) bool {
		if f, ok := m.(*pgast.FuncCall); ok && funcName(f) == "clock_timestamp" {
			f.Funcname = []*pgast.Node{pgast.MakeStrNode("now")}
		}
		return true
	})
	return t.root
}

func opName(e *pgast.A_Expr) string {
	if len(e.Name) == 0 {
		return ""
	}
	if s := e.Name[len(e.Name)-1].GetString_(); s != nil {
		return s.Sval
	}
	return ""
}

func lastField(cr *pgast.ColumnRef) string {
	if len(cr.Fields) == 0 {
		return ""
	}
	if s := cr.Fields[len(cr.Fields)-1].GetString_(); s != nil {
		return s.Sval
	}
	return ""
}

// mentionsColumn says whether n references column ("" for any column).
func mentionsColumn(n *pgast.Node, column string) bool {
	found := false
	t := &Statement{root: n}
	t.walk(func(m pgast.Message) bool {
		if cr, ok := m.(*pgast.ColumnRef); ok && (column == "" || lastField(cr) == column) {
			found = true
		}
		return !found
	})
	return found
}

// columnIn is the ColumnRef of column inside n.
func columnIn(n *pgast.Node, column string) *pgast.Node {
	var out *pgast.Node
	t := &Statement{root: n}
	t.walk(func(m pgast.Message) bool {
		if w, ok := m.(*pgast.Node); ok && out == nil {
			if cr := w.GetColumnRef(); cr != nil && lastField(cr) == column {
				out = w
			}
		}
		return out == nil
	})
	return out
}

// volatileCall names the first volatile clock or random function in n.
func volatileCall(n *pgast.Node) string {
	name := ""
	t := &Statement{root: n}
	t.walk(func(m pgast.Message) bool {
		if f, ok := m.(*pgast.FuncCall); ok && volatileNow()[funcName(f)] {
			name = funcName(f)
		}
		return name == ""
	})
	return name
}

// isDateOf: column::date, CAST(column AS date) or date(column).
func isDateOf(n *pgast.Node, column string) bool {
	if tc := n.GetTypeCast(); tc != nil && tc.TypeName != nil && len(tc.TypeName.Names) > 0 {
		last := tc.TypeName.Names[len(tc.TypeName.Names)-1].GetString_()
		cr := tc.Arg.GetColumnRef()
		return last != nil && last.Sval == "date" && cr != nil && lastField(cr) == column
	}
	if f := n.GetFuncCall(); f != nil && funcName(f) == "date" && len(f.Args) == 1 {
		cr := f.Args[0].GetColumnRef()
		return cr != nil && lastField(cr) == column
	}
	return false
}

// truncUnit is the unit of date_trunc('unit', column), "" for anything else.
func truncUnit(n *pgast.Node, column string) string {
	f := n.GetFuncCall()
	if f == nil || funcName(f) != "date_trunc" || len(f.Args) != 2 {
		return ""
	}
	if cr := f.Args[1].GetColumnRef(); cr == nil || lastField(cr) != column {
		return ""
	}
	return timeUnit(f.Args[0])
}

// truncParam is the unit of date_trunc($n, column) when it is a
// parameter (through casts); nil otherwise.
func truncParam(n *pgast.Node, column string) *pgast.Node {
	f := n.GetFuncCall()
	if f == nil || funcName(f) != "date_trunc" || len(f.Args) != 2 {
		return nil
	}
	if cr := f.Args[1].GetColumnRef(); cr == nil || lastField(cr) != column {
		return nil
	}
	u := f.Args[0]
	for u != nil && u.GetTypeCast() != nil {
		u = u.GetTypeCast().Arg
	}
	if u.GetParamRef() == nil {
		return nil
	}
	return f.Args[0]
}

// unitInterval is one date_trunc unit as interval input: the quarter,
// which interval input does not take, is three months.
func unitInterval(unit string) string {
	if unit == "quarter" {
		return "3 months"
	}
	return "1 " + unit
}

// isYearOf: extract(year FROM column) or date_part('year', column).
func isYearOf(n *pgast.Node, column string) bool {
	f := n.GetFuncCall()
	if f == nil || (funcName(f) != "extract" && funcName(f) != "date_part") || len(f.Args) != 2 {
		return false
	}
	cr := f.Args[1].GetColumnRef()
	return cr != nil && lastField(cr) == column && timeUnit(f.Args[0]) == "year"
}

// timeUnit is a constant field name such as 'day' or 'year', lower case;
// "" when it is not a plain word. A plan prints it with its type
// ('day'::text).
func timeUnit(n *pgast.Node) string {
	for n != nil && n.GetTypeCast() != nil {
		n = n.GetTypeCast().Arg
	}
	c := n.GetAConst()
	if c == nil || c.GetSval() == nil {
		return ""
	}
	u := strings.ToLower(c.GetSval().Sval)
	for _, r := range u {
		if r < 'a' || r > 'z' {
			return ""
		}
	}
	return u
}

// exprText deparses one expression.
func exprText(n *pgast.Node) string {
	sel := &pgast.SelectStmt{TargetList: []*pgast.Node{{Node: &pgast.ResTarget{Val: n}}}}
	tree := &pgast.ParseResult{Version: parserVersion(), Stmts: []*pgast.RawStmt{{Stmt: &pgast.Node{Node: sel}}}}
	out, err := pgast.Deparse(tree)
	if err != nil {
		return "?"
	}
	return strings.TrimPrefix(out, "SELECT ")
}

// parserVersion is the parse tree version Deparse expects of a tree built
// by hand.
var parserVersion = sync.OnceValue(func() int32 {
	t, err := pgast.Parse("SELECT 1")
	if err != nil {
		return 0
	}
	return t.Version
})
