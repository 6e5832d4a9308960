package plan

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// unwrap returns the EXPLAIN output inside whatever a person pasted. psql
// prints the one-column result of EXPLAIN in many dresses, and people copy
// from GUIs too; each dress is recognised from the content, never from a
// flag:
//
//   - psql aligned output with \pset border 0, 1 or 2 and linestyle ascii,
//     old-ascii or unicode: the "QUERY PLAN" header and its rule, the
//     "(N rows)" footer, the frame of border 2 (| or │), and the marks at
//     the end of each line of a multi-line cell (+ or ↵);
//   - psql unaligned output (\a), with its bare header and footer;
//   - psql expanded output (\x): "-[ RECORD n ]" (or "* Record n" with
//     border 0) separators and a "QUERY PLAN | " column before each value,
//     with ':' or ';' continuation separators in old-ascii;
//   - rows wrapped in double quotes, as pgAdmin, DBeaver and CSV exports
//     (psql --csv) write them;
//   - TEXT lines a terminal or a mail client wrapped at a fixed width.
//
// What is left is the plan as EXPLAIN produced it: TEXT lines with their
// indentation, or the JSON document.
func unwrap(b []byte) []byte { return []byte(strings.Join(unwrapLines(b), "\n")) }

// unwrapLines is unwrap, line by line.
func unwrapLines(b []byte) []string {
	s := strings.TrimPrefix(string(b), "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if !strings.Contains(s, "\n") {
		// Classic Mac line ends: a plan is never one line with carriage
		// returns inside.
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	lines := strings.Split(s, "\n")
	lines = joinTerminalWrap(lines)
	lines = unquoteRows(lines)
	lines, framed := unframe(lines)
	lines = unexpand(lines)
	lines = dropHeaderFooter(lines)
	lines = dropQueryText(lines)
	lines = dropContinuationMarks(lines)
	return joinWrapped(lines, framed)
}

const queryPlanHeader = "QUERY PLAN"

// joinTerminalWrap undoes a terminal's wrapping of psql's output, which
// cut every line longer than the terminal at its width. psql's rule under
// the header is the widest line of the table: when it continues on the
// next line, the terminal was narrower than the table, and its width is the
// first piece's. A piece of that width is joined with the line after it,
// unless that line is where a row of EXPLAIN's output could begin (a row
// whose length was a multiple of the width ends in a full piece too).
func joinTerminalWrap(lines []string) []string {
	width := 0
	for i := 0; i+1 < len(lines) && i < 8; i++ {
		next := strings.TrimSpace(lines[i+1])
		if isRule(lines[i]) && drawing(next) && utf8.RuneCountInString(lines[i]) >= 20 {
			width = utf8.RuneCountInString(lines[i])
			break
		}
	}
	if width == 0 {
		return lines
	}
	out := make([]string, 0, len(lines))
	full, blank, rule := false, false, false // what the last line read was
	var rows rowShape
	for i, l := range lines {
		t := strings.TrimSpace(l)
		// What a row starting here would begin with: the line, and the
		// next ones when it fills the width too (a label such as "Inner
		// Unique: " can be cut before its colon).
		probe := l
		for j := i; j+1 < len(lines) && j < i+3 && utf8.RuneCountInString(lines[j]) == width; j++ {
			probe += lines[j+1]
		}
		switch {
		case full && rule && drawing(t):
			out[len(out)-1] += l // the header's rule goes on
		case full && !rule && !isRule(l) && (blank || !rows.starts(strings.TrimSpace(probe), indentOf(probe))):
			out[len(out)-1] += l
		default:
			// A row's start says what it is (a node and where its details
			// go), so it is recorded as soon as it begins.
			rows.saw(l, rule)
			out = append(out, l)
		}
		full = utf8.RuneCountInString(l) == width
		blank, rule = t == "", isRule(l)
	}
	return out
}

// rowShape is what joinTerminalWrap knows of the rows so far: where a new
// row of EXPLAIN's output can begin. EXPLAIN prints a node's details right
// under it, two columns right of its name, then its children and
// subplans at that same column or left of it; summary lines stand at the
// root's column.
type rowShape struct {
	base   int // the root's column (psql's border moves it right); -1 before it
	detail int // the detail column of the last node
	begun  bool
}

// saw records the start of a row; afterRule says it follows the header's
// rule.
func (r *rowShape) saw(row string, afterRule bool) {
	t := strings.TrimSpace(row)
	ind := indentOf(row)
	switch {
	case t == "" || isRule(row):
	case !r.begun && (afterRule || strings.Contains(t, "(cost=") || strings.Contains(t, "(actual ")):
		r.begun, r.base, r.detail = true, ind, ind+2
	case r.begun && strings.HasPrefix(t, "->"):
		// The node's name starts after the arrow and its spaces.
		r.detail = ind + 2 + len(t) - 2 - len(strings.TrimLeft(t[2:], " ")) + 2
	case r.begun && ind <= r.base && isSummaryLine(t):
		r.detail = r.base + 2 // "Planning:" and its "  Buffers: ..."
	}
}

// starts says whether a line (its text t, trimmed, at indentation ind) can
// be the start of a row rather than the rest of one.
func (r *rowShape) starts(t string, ind int) bool {
	if !r.begun {
		return false // the header ("QUERY PLAN", padded) is one line
	}
	switch {
	case isRowCount(t), isSummaryLine(t) && ind <= r.base:
		return true
	case ind < r.base+2:
		return false // nothing but the summary stands left of the root's details
	case strings.HasPrefix(t, "->"):
		return ind <= r.detail
	case detailLabel().MatchString(t):
		return ind >= r.detail && ind <= r.detail+4
	}
	_, _, ok := subplanHeader(t)
	return ok && ind <= r.detail
}

// detailLabel is how a detail line of EXPLAIN TEXT begins: "Output: ",
// "Index Cond: ", "Rows Removed by Filter: ", "Buckets: ".
var detailLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Za-z /-]{1,40}: `) })

// isRule says whether a line is only table drawing: dashes, pluses and
// box-drawing characters (psql's header rules and border-2 frames).
func isRule(line string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= 3 && drawing(t)
}

// drawing says whether t, not empty, is made only of table drawing: what
// is left of a rule a terminal cut can be a single dash.
func drawing(t string) bool {
	for _, r := range t {
		switch {
		case r == '-' || r == '+' || r == '=' || r == ' ':
		case r >= 0x2500 && r <= 0x257F: // box drawing
		default:
			return false
		}
	}
	return t != ""
}

// isRecordMarker recognises the separators of psql's expanded mode:
// "-[ RECORD 1 ]----", "+-[ RECORD 1 ]---+", "┌─[ RECORD 1 ]──┐",
// "├─[ RECORD 2 ]──┤", and border 0's "* Record 1".
func isRecordMarker(line string) bool {
	t := strings.TrimSpace(line)
	if strings.HasPrefix(t, "* Record ") {
		return true
	}
	i := strings.Index(t, "[ RECORD ")
	if i < 0 || !strings.Contains(t[i:], " ]") {
		return false
	}
	return isRule(t[:i]+"---") && isRule(t[strings.Index(t[i:], " ]")+i+2:]+"---")
}

// unquoteRows undoes per-row double quotes ("  ->  Seq Scan on t ..."),
// with "" standing for one quote inside. Only lines that start with the
// quote at column 0 and end with one are touched: an EXPLAIN TEXT line
// never starts with a quote, and the quoted keys of a JSON plan are
// indented and end in ',' '{' or '['.
func unquoteRows(lines []string) []string {
	first := ""
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" {
			first = t
			break
		}
	}
	// A JSON document, or a whole JSON plan quoted as one CSV cell: the
	// JSON reader handles those.
	if strings.HasPrefix(first, "[") || strings.HasPrefix(first, "{") || strings.HasPrefix(first, `"[`) || strings.HasPrefix(first, `"{`) {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		t := strings.TrimRight(l, " \t,;")
		if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
			l = strings.ReplaceAll(t[1:len(t)-1], `""`, `"`)
		}
		out[i] = l
	}
	return out
}

// frameChars open and close the lines of psql's border 2.
var frameChars = []string{"|", "│", "║"}

// unframe removes border 2's frame: rule lines, and the "| " before and
// " |" after each row. It acts only when the first drawn line is a rule and
// most rows are framed, so a plan that merely contains a '|' is untouched.
func unframe(lines []string) ([]string, bool) {
	framed, content := 0, 0
	firstRule, seen := false, false
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if !seen {
			firstRule, seen = isRule(l) || isRecordMarker(l), true
		}
		if isRule(l) || isRecordMarker(l) || isRowCount(strings.TrimSpace(l)) {
			continue
		}
		content++
		if hasFrame(l) {
			framed++
		}
	}
	if content > 0 && rightFramed(lines) {
		// DBeaver's text view: a column separator after each row only.
		out := make([]string, len(lines))
		for i, l := range lines {
			t := strings.TrimRight(l, " ")
			for _, f := range frameChars {
				if strings.HasSuffix(t, f) && !isRule(t) {
					t = strings.TrimRight(t[:len(t)-len(f)], " ")
					break
				}
			}
			out[i] = t
		}
		return out, false
	}
	if !firstRule || content == 0 || framed < content {
		return lines, false
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		switch {
		case isRecordMarker(l):
			out = append(out, "-[ RECORD ]-")
		case isRule(l):
		case hasFrame(l):
			l = strings.TrimRight(l, " ")
			for _, f := range frameChars {
				if strings.HasPrefix(l, f) {
					l = strings.TrimPrefix(l[len(f):], " ")
					break
				}
			}
			for _, f := range frameChars {
				if strings.HasSuffix(l, f) {
					l = l[:len(l)-len(f)]
					break
				}
			}
			out = append(out, strings.TrimRight(l, " "))
		default:
			out = append(out, l)
		}
	}
	return out, true
}

// rightFramed says whether every row but the rules ends with a column
// separator and at least one does not start with one.
func rightFramed(lines []string) bool {
	rows, left := 0, 0
	for _, l := range lines {
		t := strings.TrimRight(l, " ")
		if t == "" || isRule(t) || isRowCount(strings.TrimSpace(t)) {
			continue
		}
		rows++
		ends := false
		for _, f := range frameChars {
			ends = ends || strings.HasSuffix(t, f)
			if strings.HasPrefix(t, f) {
				left++
			}
		}
		if !ends {
			return false
		}
	}
	return rows > 1 && left < rows
}

func hasFrame(l string) bool {
	l = strings.TrimRight(l, " ")
	for _, f := range frameChars {
		if strings.HasPrefix(l, f) && strings.HasSuffix(l, f) && len(l) > len(f) {
			return true
		}
	}
	return false
}

// expandedSeps are what psql prints between the column name and its value
// in expanded mode: aligned (ascii, old-ascii continuation ':' and wrap
// ';', unicode), border 0's single space, and unaligned's bare '|'.
var expandedSeps = []string{" | ", " : ", " ; ", " │ ", "|", " "}

// unexpand turns expanded records back into plain rows: record markers go,
// and the "QUERY PLAN | " column (or the blank column of a multi-line
// value's continuation lines) is cut off each line.
func unexpand(lines []string) []string {
	expanded := false
	for _, l := range lines {
		if isRecordMarker(l) || strings.HasPrefix(l, queryPlanHeader+"|") {
			expanded = true
			break
		}
	}
	if !expanded {
		return lines
	}
	out := make([]string, 0, len(lines))
	width := 0 // bytes of the column before the value
	for _, l := range lines {
		if isRecordMarker(l) {
			continue
		}
		if rest, ok := strings.CutPrefix(l, queryPlanHeader); ok {
			// The record's first line sets the width of the name column
			// (border 0 pads the name with one space; EXPLAIN has only
			// this one column) for its continuation lines.
			matched := false
			for _, sep := range expandedSeps {
				if strings.HasPrefix(rest, sep) {
					width, matched = len(queryPlanHeader)+len(sep), true
					break
				}
			}
			if matched {
				out = append(out, l[width:])
				continue
			}
		}
		if width > 0 && len(l) >= width && isBlankColumn(l[:width]) {
			out = append(out, l[width:])
			continue
		}
		if strings.TrimSpace(l) == "" {
			continue // unaligned expanded mode separates records with blank lines
		}
		out = append(out, l)
	}
	return out
}

// isBlankColumn says whether a continuation line's name column is empty:
// spaces, then at most one separator character and a space.
func isBlankColumn(s string) bool {
	t := strings.TrimLeft(s, " ")
	if t == "" {
		return true
	}
	r, size := utf8.DecodeRuneInString(t)
	switch r {
	case '|', ':', ';', '│':
	default:
		return false
	}
	return strings.TrimSpace(t[size:]) == ""
}

// dropHeaderFooter removes psql's "QUERY PLAN" header with the rule below
// it, and "(N rows)" footers.
func dropHeaderFooter(lines []string) []string {
	out := make([]string, 0, len(lines))
	seenContent := false
	header := "" // the header so far, when a narrow terminal wrapped it
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			out = append(out, l)
			continue
		case !seenContent && t == queryPlanHeader:
			continue
		case !seenContent && strings.HasPrefix(queryPlanHeader, header+t) && header+t != "":
			header += t
			continue
		case !seenContent && isRule(l):
			continue
		case isRowCount(t):
			continue
		case isRule(l) && i+1 < len(lines) && isRowCount(strings.TrimSpace(lines[i+1])):
			continue // the closing rule of border 2 before the footer
		case isRule(l) && len(t) > 3 && !strings.ContainsAny(t, " "):
			continue
		}
		seenContent = true
		out = append(out, l)
	}
	return out
}

// dropQueryText removes the "Query Text: ..." auto_explain writes before a
// TEXT plan (the statement may span lines): the plan starts at the first
// line with a node's cost or timing.
func dropQueryText(lines []string) []string {
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		if !strings.HasPrefix(t, "Query Text:") {
			return lines
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.Contains(lines[j], "(cost=") || strings.Contains(lines[j], "(actual ") {
				return lines[j:]
			}
		}
		return lines
	}
	return lines
}

// isRowCount recognises psql's footer, "(12 rows)", in any language psql
// speaks ("(12 lignes)", "(12 Zeilen)", "(1 строка)").
func isRowCount(t string) bool {
	inner, ok := strings.CutPrefix(t, "(")
	if !ok {
		return false
	}
	if inner, ok = strings.CutSuffix(inner, ")"); !ok {
		return false
	}
	n, word, ok := strings.Cut(inner, " ")
	if !ok || n == "" || word == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, r := range word {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// dropContinuationMarks removes the mark psql puts at the end of every line
// of a multi-line cell but the last: "+" (ascii) or "↵" (unicode), right
// after the padded text. The marks are removed only when nearly every line
// has one, so a "+" that belongs to the plan stays.
func dropContinuationMarks(lines []string) []string {
	for _, mark := range []string{"+", "↵"} {
		marked, nonEmpty := 0, 0
		for _, l := range lines {
			t := strings.TrimRight(l, " ")
			if t == "" {
				continue
			}
			nonEmpty++
			if strings.HasSuffix(t, mark) {
				marked++
			}
		}
		if nonEmpty <= 1 || marked < nonEmpty-1 {
			continue
		}
		for i, l := range lines {
			t := strings.TrimRight(l, " ")
			if strings.HasSuffix(t, mark) {
				lines[i] = strings.TrimRight(t[:len(t)-len(mark)], " ")
			}
		}
	}
	return lines
}

// csvCell undoes CSV quoting of one cell ("[ {""Plan"": ...} ]"), as psql
// --csv and spreadsheet exports write a JSON plan.
func csvCell(b []byte) ([]byte, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return nil, false
	}
	inner := b[1 : len(b)-1]
	if bytes.Count(inner, []byte(`"`))%2 != 0 {
		return nil, false
	}
	return bytes.ReplaceAll(inner, []byte(`""`), []byte(`"`)), true
}

// joinWrapped puts back together TEXT lines that were wrapped at a fixed
// width when copied from a terminal or a mail. A piece of a wrapped line
// is recognised three ways: the line before it leaves a parenthesis open
// (every line EXPLAIN prints balances its parentheses, outside quotes), it
// starts left of the plan's first line (psql's border 1 indents every row
// by one space), or it starts with '(' (a node's figures). The piece is appended as it is, since the wrap cut
// at a column, not at a space. JSON needs none of this.
// framed says a border-2 frame was removed, which (like border 1's
// leading space) leaves room for psql's wrap mark at the start of the
// continuation; border 0 marks only the end of the cut piece.
func joinWrapped(lines []string, framed bool) []string {
	first := -1
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return lines
	}
	if t := strings.TrimSpace(lines[first]); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") || strings.HasPrefix(t, `"`) {
		return lines
	}
	rootIndent := indentOf(lines[first])
	out := append(make([]string, 0, len(lines)), lines[:first+1]...)
	for _, l := range lines[first+1:] {
		last := len(out) - 1
		if strings.TrimSpace(l) == "" {
			out = append(out, l)
			continue
		}
		// psql's own wrapped format (\pset format wrapped) marks the cut
		// with '.' (ascii) or '…' (unicode) at the end of the piece and,
		// with a border, at the start of the next one.
		prev := strings.TrimRight(out[last], " ")
		if mark := wrapMark(prev); mark != "" {
			switch {
			case (framed || rootIndent > 0) && strings.HasPrefix(l, mark):
				out[last] = prev[:len(prev)-len(mark)] + l[len(mark):]
				continue
			case !framed && rootIndent == 0:
				out[last] = prev[:len(prev)-len(mark)] + l
				continue
			}
		}
		// No EXPLAIN line starts with '(': that is a node's figures, cut
		// off from its name.
		ind := indentOf(l)
		if openParens(out[last]) > 0 || ind < rootIndent || strings.HasPrefix(strings.TrimSpace(l), "(") || strayAtRoot(l, ind, rootIndent) {
			out[last] += l
			continue
		}
		out = append(out, l)
	}
	return out
}

func wrapMark(line string) string {
	for _, m := range []string{"…", "."} {
		if strings.HasSuffix(line, m) {
			return m
		}
	}
	return ""
}

// openParens counts the parentheses a line leaves open, outside single
// and double quotes.
func openParens(s string) int {
	if strings.IndexByte(s, '\'') < 0 && strings.IndexByte(s, '"') < 0 {
		// Most lines quote nothing: count (both counts run on whole words).
		return strings.Count(s, "(") - strings.Count(s, ")")
	}
	// Quotes and parentheses are ASCII, and no byte of a multi-byte UTF-8
	// character is: jump from one to the next.
	depth := 0
	for {
		i := strings.IndexAny(s, `()'"`)
		if i < 0 {
			return depth
		}
		switch c := s[i]; c {
		case '(':
			depth++
		case ')':
			depth--
		default:
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return depth // an unclosed quote runs to the end
			}
			i += 1 + end
		}
		s = s[i+1:]
	}
}

// strayAtRoot says a line at the root's column is neither a summary line
// nor a plan node, so it can only be the tail of a wrapped line ("Output:
// a, b, ex" + "tra_column"). A second plan pasted after the first starts
// with a node and is left alone, to be refused by the parser.
func strayAtRoot(l string, ind, rootIndent int) bool {
	if ind > rootIndent {
		return false
	}
	t := strings.TrimSpace(l)
	if isSummaryLine(t) || strings.HasPrefix(t, "->") {
		return false
	}
	if ok, _ := parseHeader(&Node{}, t, true); ok {
		return false
	}
	return true
}
