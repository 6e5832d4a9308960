package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// parameterValues picks a value for each $n of a pg_stat_statements entry,
// whose constants were replaced by parameters. A value the application
// itself sent, seen in pg_stat_activity or the server log (seen), is used
// as it is. A
// LIMIT's count is the
// statement's rows per call (limits). Another value comes from pg_stats
// for the column the parameter is compared with (the most common value, else
// the middle histogram bound): a value real rows have, so the plan and its
// cost are the ones the application gets. Otherwise it comes from the type's
// domain. It returns SQL expressions for EXECUTE, a description of each for the
// report, and a reason when no safe value exists.
func (e *Engine) parameterValues(ctx context.Context, cols map[int][]sqlparse.Column, seen map[int]string, limits map[int]int64, patterns map[int]bool, args map[int]sqlparse.FuncArg, types []string) ([]string, []string, string) {
	values := make([]string, len(types))
	var desc []string
	for i, typ := range types {
		n := i + 1
		isArray := strings.HasSuffix(typ, "[]")
		elem := strings.TrimSuffix(typ, "[]")
		if lit, ok := seen[n]; ok {
			// The application's own value, as SQL: used as it is.
			values[i] = "(" + lit + ")::" + typ
			desc = append(desc, e.valueText(n, lit, typ, "the application's value, seen in pg_stat_activity or the server log", true))
			continue
		}
		var v, from string
		// userData: a value of the user's rows; standIn: one of pgmedic's
		// for a constant nobody saw (see settleStandIns).
		userData, standIn := false, false
		if l, ok := limits[n]; ok {
			v, from = fmt.Sprint(l), "rows per call in pg_stat_statements"
		}
		for _, c := range cols[n] {
			if from != "" {
				break
			}
			if sv, ok := e.statsValue(ctx, c); ok {
				v, from, userData = sv, "pg_stats "+c.Table+"."+c.Column, true
				if patterns[n] {
					v, from = likePrefix(sv), "the first third of a value in pg_stats "+c.Table+"."+c.Column+", then %"
				}
				break
			}
		}
		if a, ok := args[n]; ok && from == "" {
			// A function's argument may take only words from a list (a
			// field, a unit, a format), not any value of its type:
			// date_trunc('a', ...) fails. For those functions, a word
			// each takes.
			if fv, known := argumentValue(a); known {
				v, from, standIn = fv, fmt.Sprintf("a value %s() takes", a.Func), true
			}
		}
		if from == "" {
			dv, ok := domainValue(elem)
			if !ok {
				return nil, nil, fmt.Sprintf("not re-run: no safe value for parameter $%d of type %s (no pg_stats for the column it is compared with)", n, typ)
			}
			v, from, standIn = dv, "type "+typ, true
		}
		if standIn {
			e.standIns = append(e.standIns, fmt.Sprintf("$%d (%s %s)", n, typ, sqlparse.QuoteLiteral(v)))
		}
		if isArray {
			values[i] = sqlparse.QuoteLiteral("{"+arrayElem(v)+"}") + "::" + typ
		} else {
			values[i] = sqlparse.QuoteLiteral(v) + "::" + typ
		}
		desc = append(desc, e.valueText(n, v, typ, from, userData))
	}
	return values, desc, ""
}

// likePrefix is a LIKE pattern matching the values that start as v does:
// its first third (three characters at least), its own wildcards
// escaped, then %.
func likePrefix(v string) string {
	r := []rune(v)
	n := min(len(r), max(3, len(r)/3))
	p := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(string(r[:n]))
	return p + "%"
}

// valueText describes a re-run's parameter for the report. A value taken
// from the user's data (pg_stats' common values and histogram bounds, the
// literals an application sent) is named by where it came from and its
// type, not shown: reports are pasted into tickets and pull requests.
// --show-values (ShowValues) shows it. A count or a value of the type's
// own domain is pgmedic's, and shown.
func (e *Engine) valueText(n int, v, typ, from string, userData bool) string {
	if userData && !e.ShowValues {
		article := "a"
		if typ != "" && strings.ContainsRune("aeiou", rune(typ[0])) {
			article = "an"
		}
		return fmt.Sprintf("$%d = %s %s value (%s; --show-values shows it)", n, article, typ, from)
	}
	return fmt.Sprintf("$%d = %s (%s)", n, printable.Trim(v, 40, "..."), from)
}

// statsValue reads a representative value for a column from pg_stats.
func (e *Engine) statsValue(ctx context.Context, c sqlparse.Column) (string, bool) {
	if c.Table == "" || c.Column == "" {
		return "", false
	}
	mcv, hist, err := e.columnStats(ctx, model.RelRef{Schema: c.Schema, Name: c.Table}, c.Column)
	if err != nil {
		return "", false
	}
	if len(mcv) > 0 {
		return mcv[0], true
	}
	if len(hist) > 0 {
		return hist[len(hist)/2], true
	}
	return "", false
}

// columnStats reads a column's most common values and histogram bounds
// from pg_stats, as text (the parent's, inherited, for a partitioned
// table).
func (e *Engine) columnStats(ctx context.Context, t model.RelRef, column string) (mcv, hist []string, err error) {
	var m, h *string
	if err := e.Conn.QueryRow(ctx, envelope.Tag+`SELECT s.most_common_vals::text, s.histogram_bounds::text
		FROM pg_stats s JOIN pg_namespace n ON n.nspname = s.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename
		WHERE c.oid = to_regclass($1) AND s.attname = $2
		ORDER BY s.inherited DESC LIMIT 1`, sqlparse.QuoteQualified(t.Schema, t.Name), column).Scan(&m, &h); err != nil {
		return nil, nil, err
	}
	if m != nil {
		mcv = ParseArray(*m)
	}
	if h != nil {
		hist = ParseArray(*h)
	}
	return mcv, hist, nil
}

// domainValue is a valid value of a type when no statistics say better.
func domainValue(typ string) (string, bool) {
	switch typ {
	case "smallint", "integer", "bigint", "numeric", "real", "double precision":
		return "1", true
	case "oid", "regtype":
		// Parameters of type oid are overwhelmingly type or relation oids
		// (driver introspection asks about types): 1007 is integer[].
		return "1007", true
	case "text", "character varying", "character", "name", "citext":
		return "a", true
	case "boolean":
		return "true", true
	case "date":
		// A time no column's statistics bound is most often relative to
		// the present ("yesterday's calls"): PostgreSQL's special inputs
		// 'today' and 'now' are the day and the moment the statement runs.
		return "today", true
	case "timestamp without time zone", "timestamp with time zone":
		return "now", true
	case "uuid":
		return "00000000-0000-0000-0000-000000000000", true
	case "json", "jsonb":
		return "{}", true
	case "bytea":
		return `\x00`, true
	case "interval":
		return "1 day", true
	}
	return "", false
}

// ParseArray splits PostgreSQL's text form of a one-dimensional array
// ({a,"b c",NULL}) into its elements; NULL elements are dropped.
func ParseArray(s string) []string {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil
	}
	s = s[1 : len(s)-1]
	var out []string
	var cur strings.Builder
	quoted, inQuotes, escaped := false, false, false
	flush := func() {
		v := cur.String()
		if quoted || v != "NULL" {
			out = append(out, v)
		}
		cur.Reset()
		quoted = false
	}
	if s == "" {
		return nil
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case escaped:
			cur.WriteByte(ch)
			escaped = false
		case ch == '\\':
			escaped = true
		case ch == '"':
			inQuotes = !inQuotes
			quoted = true
		case ch == ',' && !inQuotes:
			flush()
		case ch == '{' && !inQuotes:
			return nil // multi-dimensional: not a scalar column's statistics
		default:
			cur.WriteByte(ch)
		}
	}
	flush()
	return out
}

func arrayElem(v string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `"`, `\"`) + `"`
}

// argumentValue is a value a function is known to take at an argument,
// for the functions whose text arguments are words from a fixed list (a
// field, a unit, a format); other functions take any value of their
// argument's type, and get the type's.
func argumentValue(a sqlparse.FuncArg) (string, bool) {
	switch {
	case (a.Func == "date_trunc" || a.Func == "date_part" || a.Func == "extract") && a.Arg == 0:
		return "day", true
	case (a.Func == "to_char" || a.Func == "to_date" || a.Func == "to_timestamp") && a.Arg == 1:
		return "YYYY-MM-DD", true
	case a.Func == "date_bin" && a.Arg == 0:
		return "1 day", true
	}
	return "", false
}
