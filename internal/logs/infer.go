package logs

import (
	"regexp"
	"strings"
	"sync"
)

// levelAt finds where the severity starts in a stderr line: what comes
// before it is the line's prefix.
var levelAt = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\b(?:DEBUG[1-5]?|LOG|INFO|NOTICE|WARNING|ERROR|FATAL|PANIC|DETAIL|HINT|CONTEXT|STATEMENT): `)
})

// prefixTokens turn the values a prefix printed back into its escapes,
// tried in order at each position of the prefix text.
var prefixTokens = sync.OnceValue(func() []prefixToken {
	return []prefixToken{
		// The zone: an abbreviation or a numeric offset, not what follows it.
		{regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ (?:[A-Z]{2,5}|[+-]\d\d(?::?\d\d)?)`), "%m"},
		{regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:[A-Z]{2,5}|[+-]\d\d(?::?\d\d)?)`), "%t"},
		{regexp.MustCompile(`^\d{9,11}\.\d{3}`), "%n"},
		{regexp.MustCompile(`^[0-9a-f]{6,}\.[0-9a-f]+`), "%c"},
		{regexp.MustCompile(`^\[\d+\]`), "[%p]"},
		// [pid-line], or [line-piece] after a [pid]: prefixOf decides.
		{regexp.MustCompile(`^\[\d+-\d+\]`), "[%p-%l]"},
		{regexp.MustCompile(`^(?:user|usr|u)=[^ ,@\]]*`), "user=%u"},
		{regexp.MustCompile(`^(?:db|database)=[^ ,@\]]*`), "db=%d"},
		{regexp.MustCompile(`^(?:app|appli|application|appname|application_name)=[^,\]]*?(?:,|\]| |$)`), ""},
		{regexp.MustCompile(`^(?:client|host|remote|client_addr)=(?:\[local\]|[^ ,\]]*)`), "client=%h"},
		{regexp.MustCompile(`^(?:queryid|query_id|qid)=-?\d+`), "queryid=%Q"},
		{regexp.MustCompile(`^sql_error_code = [0-9A-Z]{5}`), "sql_error_code = %e"},
		{regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+\(\d+\)`), "%r"},
		{regexp.MustCompile(`^[\w\[\]-]*@[\w\[\]-]*`), "%u@%d"},
		{regexp.MustCompile(`^\d+`), "%p"},
	}
})

type prefixToken struct {
	re  *regexp.Regexp
	esc string
}

// inferPrefix builds a log_line_prefix from the lines themselves, for a
// prefix no known one matches: each line's text before its severity is
// read token by token (timestamps, [pid], user=, db=, app=, client=,
// user@db, session id), and the most common result is kept when it
// matches most lines.
func inferPrefix(lines []string) *Prefix {
	votes := map[string]int{}
	for _, l := range lines {
		loc := levelAt().FindStringIndex(l)
		if loc == nil {
			continue
		}
		if p, ok := prefixOf(l[:loc[0]]); ok {
			votes[p]++
		}
	}
	best, n := "", 0
	for p, v := range votes {
		if v > n || (v == n && p < best) {
			best, n = p, v
		}
	}
	if n == 0 {
		return nil
	}
	// Background processes print no session fields: a shorter prefix
	// that begins the chosen one marks where %q goes.
	short := ""
	for p := range votes {
		if len(p) > len(short) && len(p) < len(best) && strings.HasPrefix(best, p) {
			short = p
		}
	}
	if short != "" {
		best = short + "%q" + best[len(short):]
	}
	p, err := CompilePrefix(best)
	if err != nil {
		return nil
	}
	matched := 0
	for _, l := range lines {
		if _, ok := p.parse(l); ok {
			matched++
		}
	}
	if matched*2 < len(lines) {
		return nil
	}
	return p
}

// prefixOf turns one line's prefix text into escapes; ok is false when
// it holds no escape at all (a constant prefix says nothing about the
// session, and is as likely to be noise).
func prefixOf(text string) (string, bool) {
	var b strings.Builder
	found, pid := false, false
	for i := 0; i < len(text); {
		matched := false
		if i == 0 || !isIdent(text[i-1]) {
			for _, t := range prefixTokens() {
				m := t.re.FindString(text[i:])
				if m == "" {
					continue
				}
				esc := t.esc
				if esc == "" { // app=...: the escape, then the separator it ended on
					key, _, _ := strings.Cut(m, "=")
					esc = key + "=%a"
					if last := m[len(m)-1]; last == ',' || last == ']' || last == ' ' {
						esc += string(last)
					}
				} else if strings.Contains(esc, "=") {
					key, _, _ := strings.Cut(m, "=")
					esc = key + "=" + esc[strings.Index(esc, "=")+1:]
				} else if esc == "[%p-%l]" && pid {
					esc = "[%l-%l]" // pgBadger's [%l-1] after the pid
				} else if esc == "[%p]" && pid {
					esc = "[%x]" // a number in brackets after the pid: the transaction id
				}
				pid = pid || strings.Contains(esc, "%p")
				b.WriteString(esc)
				i += len(m)
				matched, found = true, true
				break
			}
		}
		if !matched {
			if text[i] == '%' {
				b.WriteString("%%")
			} else {
				b.WriteByte(text[i])
			}
			i++
		}
	}
	return b.String(), found
}
