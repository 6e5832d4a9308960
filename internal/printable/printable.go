// Package printable keeps what pgmedic prints for a person safe to put on a
// terminal. Query texts, relation names, aliases and plan strings come from
// the database or from a pasted file, and any of them may hold escape
// sequences (ESC, OSC, BEL) that a terminal would act on, carriage returns
// that hide what came before, line feeds that forge extra report lines, or
// bidirectional overrides that reorder text. Every text report passes such
// strings through String before writing them.
package printable

import (
	"fmt"
	"strings"
)

// IsControl says whether a terminal acts on r instead of printing it: C0
// and C1 control characters, DEL, the line and paragraph separators, and
// the bidirectional marks and overrides.
func IsControl(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// plainASCII says s is printable ASCII only, which needs no rune decoding
// to know it holds no control character (most of what pgmedic prints).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// String shows every control character visibly, the way Go quotes them:
// \n, \r, \t, \x1b, \u202e. Everything else, including other Unicode,
// stays as it is. A string without control characters is returned as is.
func String(s string) string {
	if plainASCII(s) || !strings.ContainsFunc(s, IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !IsControl(r) {
			b.WriteRune(r)
			continue
		}
		switch r {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
	}
	return b.String()
}

// Lines is String for text whose line breaks are meant (SQL to paste,
// which pgmedic writes with one statement per line): it splits on '\n',
// makes each line printable, and returns the lines.
func Lines(s string) []string {
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = String(p)
	}
	return parts
}

// OneLine folds s onto one line: runs of white space, line ends included,
// become one space.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Clip folds s onto one line and cuts it to at most n bytes without
// splitting a character, marking the cut with an ellipsis.
func Clip(s string, n int) string { return Trim(OneLine(s), n, "…") }

// Shorten is Clip marking the cut with " ..." in ASCII: statement texts in
// finding titles and object names, which go to terminals, logs and JSON.
func Shorten(s string, n int) string { return Trim(OneLine(s), n, " ...") }

// Cut is Clip marking the cut with "..." in ASCII: statement texts in the
// sessions' views of reports.
func Cut(s string, n int) string { return Trim(OneLine(s), n, "...") }

// Trim cuts s to at most n bytes without splitting a UTF-8 character and
// appends mark when it cut; s is kept as it is otherwise.
func Trim(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	cut := n
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + mark
}
