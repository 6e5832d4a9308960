package sqlparse

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pgmedic/pgmedic/internal/pgast"

	"github.com/pgmedic/pgmedic/internal/printable"
)

// QuoteIdent writes an identifier the way PostgreSQL's quote_ident does:
// bare when it is a plain lower-case name that is no keyword (or only an
// unreserved one), in double quotes otherwise. An identifier holding a
// control character (a newline in a table name) is written with Unicode
// escapes, U&"new\000aline", so the SQL pgmedic prints stays on one line
// and still names the same object when pasted.
func QuoteIdent(s string) string {
	// Escapes are written per character; a name that is not valid UTF-8
	// (possible only in a non-UTF8 database) keeps its bytes as they are.
	if needsEscape(s) && utf8.ValidString(s) {
		return unicodeEscaped(s, '"')
	}
	if plain(s) && !keyword(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteQualified quotes schema.name; an empty schema is left out.
func QuoteQualified(schema, name string) string {
	if schema == "" {
		return QuoteIdent(name)
	}
	return QuoteIdent(schema) + "." + QuoteIdent(name)
}

// plain says whether a name is made only of what an unquoted identifier
// may hold: lower case letters and underscores, then digits and $ too.
// (Keywords are QuoteIdent's business.)
func plain(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			return false
		}
	}
	return true
}

// keyword asks PostgreSQL's own scanner whether s is a keyword that must
// be quoted (anything but an unreserved one).
func keyword(s string) bool {
	res, err := pgast.Scan(s)
	if err != nil || len(res.Tokens) != 1 {
		return true
	}
	k := res.Tokens[0].KeywordKind
	return k != pgast.KeywordKind_NO_KEYWORD && k != pgast.KeywordKind_UNRESERVED_KEYWORD
}

func needsEscape(s string) bool {
	for _, r := range s {
		if printable.IsControl(r) {
			return true
		}
	}
	return false
}

// EscapeControls rewrites the quoted identifiers and string constants of
// sql that hold control characters into PostgreSQL's escape forms
// (U&"..." and E'...'), so that the statement fits on its lines, shows no
// terminal escapes, and still means the same when pasted. Text that does
// not scan is returned unchanged.
func EscapeControls(sql string) string {
	if !strings.ContainsFunc(sql, printable.IsControl) {
		return sql
	}
	res, err := pgast.Scan(sql)
	if err != nil {
		return sql
	}
	var b strings.Builder
	last := 0
	for _, t := range res.Tokens {
		start, end := int(t.Start), int(t.End)
		if start < last || end > len(sql) || start >= end {
			continue
		}
		text := sql[start:end]
		if !strings.ContainsFunc(text, printable.IsControl) || !utf8.ValidString(text) {
			continue
		}
		var repl string
		switch {
		case t.Token == pgast.Token_IDENT && text[0] == '"' && text[len(text)-1] == '"':
			repl = QuoteIdent(strings.ReplaceAll(text[1:len(text)-1], `""`, `"`))
		case t.Token == pgast.Token_SCONST && text[0] == '\'' && text[len(text)-1] == '\'':
			repl = escapeString(strings.ReplaceAll(text[1:len(text)-1], `''`, `'`))
		default:
			continue
		}
		if t.Token == pgast.Token_SCONST && start > last && (sql[start-1] == 'n' || sql[start-1] == 'N') && (start == 1 || !isIdentByte(sql[start-2])) {
			// N'...' is a national character constant: the parser casts
			// it to bpchar, and so does its escaped form.
			start--
			repl += "::pg_catalog.bpchar"
		}
		b.WriteString(sql[last:start])
		// U&"..." and E'...' start with letters: keep them apart from a
		// keyword written right before the quote (SELECT"x").
		if start > 0 && isIdentByte(sql[start-1]) {
			b.WriteByte(' ')
		}
		b.WriteString(repl)
		last = end
	}
	b.WriteString(sql[last:])
	return b.String()
}

// escapeString writes s as an E” constant with control characters as
// \xHH or \uXXXX escapes.
func escapeString(s string) string {
	var b strings.Builder
	b.WriteString("E'")
	for _, r := range s {
		switch {
		case r == '\'':
			b.WriteString(`\'`)
		case r == '\\':
			b.WriteString(`\\`)
		case printable.IsControl(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case printable.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("'")
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// QuoteLiteral writes s as a string constant: in single quotes, with
// quotes doubled; a value holding a control character is written with
// Unicode escapes (U&'...'), so the SQL pgmedic prints stays on one line.
func QuoteLiteral(s string) string {
	if needsEscape(s) && utf8.ValidString(s) {
		return unicodeEscaped(s, '\'')
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// unicodeEscaped writes s in quote (" for an identifier, ' for a
// constant) after U&, with its control characters as Unicode escapes.
func unicodeEscaped(s string, quote rune) string {
	var b strings.Builder
	b.WriteString("U&")
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote:
			b.WriteRune(quote)
			b.WriteRune(quote)
		case r == '\\':
			b.WriteString(`\\`)
		case printable.IsControl(r):
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\+%06x`, r)
			} else {
				fmt.Fprintf(&b, `\%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}
