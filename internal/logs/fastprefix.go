package logs

import (
	"strconv"
	"strings"
)

// The prefix regexp costs most of a large log's reading time. fastPrefix
// matches the same prefix by hand for the common case, taking at each
// step the choice the regexp engine tries first (as many padding spaces
// as there are, the shortest value of a lazy escape, the longest of a
// greedy one) and checking only the literal text right after it. When
// that first path matches the whole prefix, it is the match the regexp
// would return too, since the engine backtracks only on failure; when it
// does not, the regexp decides. So the fast path is never wrong, only
// sometimes not taken (FuzzFastPrefix holds the two to the same fields).

// fastSeg is one piece of a compiled prefix: literal text, an escape, or
// the point %q marks (what follows is optional).
type fastSeg struct {
	lit      string
	esc      byte
	optional bool
	// field is the entry's field the escape's value goes to: set for the
	// first escape of each field only (a second one matches unkept, as
	// in the regexp).
	field string
}

type fastPrefix struct {
	segs []fastSeg
	// restEmpty says whether what follows %q can match an empty text;
	// when it cannot, a prefix that ends at %q has skipped it.
	restEmpty bool
}

// compileFast builds the fast matcher of a prefix, or nil when it has a
// shape the fast path does not take (two escapes side by side, %q twice).
func compileFast(p string) *fastPrefix {
	var f fastPrefix
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			f.segs = append(f.segs, fastSeg{lit: string(lit)})
			lit = nil
		}
	}
	seenQ := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			lit = append(lit, c)
			continue
		}
		i++
		for i < len(p) && (p[i] == '-' || (p[i] >= '0' && p[i] <= '9')) {
			return nil // padded escapes: the regexp's job
		}
		if i >= len(p) {
			return nil
		}
		switch e := p[i]; e {
		case '%':
			lit = append(lit, '%')
		case 'q':
			if seenQ {
				return nil
			}
			seenQ = true
			flush()
			f.segs = append(f.segs, fastSeg{optional: true})
		default:
			if _, ok := escapes()[e]; !ok {
				return nil
			}
			flush()
			if n := len(f.segs); n > 0 && f.segs[n-1].esc != 0 {
				return nil
			}
			f.segs = append(f.segs, fastSeg{esc: e})
		}
	}
	flush()
	// An epoch (%n) beside a timestamp: which one the entry keeps
	// depends on their order in the regexp's groups; left to it.
	var n, tm bool
	for _, s := range f.segs {
		n = n || s.esc == 'n'
		tm = tm || s.esc == 't' || s.esc == 'm'
	}
	if n && tm {
		return nil
	}
	kept := map[string]bool{}
	for i, s := range f.segs {
		if s.esc == 0 {
			continue
		}
		field := groupName(escapes()[s.esc])
		if field != "" && !kept[field] {
			kept[field] = true
			f.segs[i].field = field
		}
	}
	f.restEmpty = true
	afterQ := false
	for _, s := range f.segs {
		if s.optional {
			afterQ = true
			continue
		}
		if afterQ && (s.lit != "" || !escapeCanBeEmpty(s.esc)) {
			f.restEmpty = false
		}
	}
	return &f
}

func escapeCanBeEmpty(e byte) bool {
	switch e {
	case 'a', 'u', 'd', 'r', 'h', 'P', 'i', 'v':
		return true
	}
	return false
}

// match reads the prefix text h (up to the severity); ok is false when the
// fast path cannot tell, and the regexp must.
func (f *fastPrefix) match(h string, e *Entry, times *secondCache) bool {
	pos := 0
	for i, s := range f.segs {
		switch {
		case s.optional:
			// The rest is tried first; a prefix that ends here skipped it
			// (background processes print no session fields).
			if pos == len(h) && !f.restEmpty {
				return true
			}
		case s.lit != "":
			if len(h)-pos < len(s.lit) || h[pos:pos+len(s.lit)] != s.lit {
				return false
			}
			pos += len(s.lit)
		default:
			next := ""
			if i+1 < len(f.segs) {
				next = f.segs[i+1].lit
				if f.segs[i+1].optional {
					return false
				}
			}
			end, from, to, ok := escapeAt(s.esc, h, pos, next)
			if !ok {
				return false
			}
			if s.field != "" {
				setField(e, s.field, h[from:to], times)
			}
			pos = end
		}
	}
	return pos == len(h)
}

// escapeAt matches " *" escape " *" at pos, followed by next (a literal;
// "" for the end of the prefix): it returns where the match ends and the
// escape's value.
func escapeAt(esc byte, h string, pos int, next string) (end, from, to int, ok bool) {
	from = pos
	for from < len(h) && h[from] == ' ' {
		from++
	}
	// followed says whether the trailing spaces and the next literal (or
	// the end) fit after a value ending at v, trying the most spaces
	// first; it returns where they end.
	followed := func(v int) (int, bool) {
		sp := v
		for sp < len(h) && h[sp] == ' ' {
			sp++
		}
		for k := sp; k >= v; k-- {
			if next == "" {
				if k == len(h) {
					return k, true
				}
				continue
			}
			if len(h)-k >= len(next) && h[k:k+len(next)] == next {
				return k, true
			}
		}
		return 0, false
	}
	switch esc {
	case 'a', 'u', 'd', 'r', 'h', 'i', 'b':
		// Lazy: the shortest value the class allows that the rest follows.
		minLen := 0
		if esc == 'b' {
			minLen = 1
		}
		for v := from; v <= len(h); v++ {
			// Only where spaces or the next literal start can the rest
			// follow.
			if v-from >= minLen && (next == "" || v == len(h) || h[v] == ' ' || h[v] == next[0]) {
				if end, ok := followed(v); ok {
					return end, from, v, true
				}
			}
			if v == len(h) || !inLazyClass(esc, h[v]) {
				break
			}
		}
		return 0, 0, 0, false
	}
	// Greedy and fixed shapes: the longest value first, then shorter ones
	// for the next literal's sake, as the engine backtracks through them.
	minEnd, maxEnd, ok := greedyValue(esc, h, from)
	if !ok {
		return 0, 0, 0, false
	}
	for v := maxEnd; v >= minEnd; v-- {
		if end, ok := followed(v); ok {
			return end, from, v, true
		}
	}
	return 0, 0, 0, false
}

func inLazyClass(esc byte, c byte) bool {
	switch esc {
	case 'a':
		return c != '\n'
	case 'u', 'd':
		return c != ' ' && c != ',' && c != '@' && c != '\n'
	case 'r', 'h':
		return c != ' ' && c != ',' && c != '\n'
	case 'i':
		return c >= 'A' && c <= 'Z' || c == ' '
	case 'b':
		return c >= 'a' && c <= 'z' || c == ' '
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitsFrom(h string, i int) int {
	for i < len(h) && isDigit(h[i]) {
		i++
	}
	return i
}

// greedyValue is the range of ends a greedy or fixed escape's value may
// have from i: a value must end between minEnd and maxEnd (tried from the
// longest), or the escape does not match at i.
func greedyValue(esc byte, h string, i int) (minEnd, maxEnd int, ok bool) {
	switch esc {
	case 'p', 'l', 'x':
		j := digitsFrom(h, i)
		return i + 1, j, j > i
	case 'P':
		j := digitsFrom(h, i)
		return i, j, true
	case 'v':
		j := i
		for j < len(h) && (isDigit(h[j]) || h[j] == '/') {
			j++
		}
		return i, j, true
	case 'Q':
		k := i
		if k < len(h) && h[k] == '-' {
			k++
		}
		j := digitsFrom(h, k)
		return k + 1, j, j > k
	case 'e':
		if len(h)-i < 5 {
			return 0, 0, false
		}
		for k := i; k < i+5; k++ {
			if c := h[k]; !isDigit(c) && (c < 'A' || c > 'Z') {
				return 0, 0, false
			}
		}
		return i + 5, i + 5, true
	case 'n':
		j := digitsFrom(h, i)
		if j == i || j >= len(h) || h[j] != '.' {
			return 0, 0, false
		}
		k := digitsFrom(h, j+1)
		// Only the fraction's length can shrink: the regexp backtracks
		// into the whole seconds only when the fraction cannot end, which
		// the fast path leaves to it.
		return j + 2, k, k > j+1
	case 'c':
		j := i
		for j < len(h) && isHex(h[j]) {
			j++
		}
		if j == i || j >= len(h) || h[j] != '.' {
			return 0, 0, false
		}
		k := j + 1
		for k < len(h) && isHex(h[k]) {
			k++
		}
		return j + 2, k, k > j+1
	case 't', 's', 'm':
		if !dateTimeAt(h, i) {
			return 0, 0, false
		}
		j := i + 19
		if esc == 'm' {
			if j >= len(h) || h[j] != '.' {
				return 0, 0, false
			}
			k := digitsFrom(h, j+1)
			if k == j+1 {
				return 0, 0, false
			}
			j = k
		}
		if j >= len(h) || h[j] != ' ' {
			return 0, 0, false
		}
		k := j + 1
		for k < len(h) && isZoneChar(h[k]) {
			k++
		}
		return j + 2, k, k > j+1
	}
	return 0, 0, false
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' }

func isZoneChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || isDigit(c) || c == '+' || c == '-' || c == ':'
}

// dateTimeAt: "YYYY-MM-DD HH:MM:SS" at i.
func dateTimeAt(h string, i int) bool {
	if len(h)-i < 19 {
		return false
	}
	const shape = "dddd-dd-dd dd:dd:dd"
	for k := 0; k < 19; k++ {
		c := h[i+k]
		if shape[k] == 'd' {
			if !isDigit(c) {
				return false
			}
		} else if c != shape[k] {
			return false
		}
	}
	return true
}

// setField keeps a prefix field's value in the entry, by the name of the
// regexp's group for it (the hand matcher uses the same names).
func setField(e *Entry, field, v string, times *secondCache) {
	switch field {
	case "time":
		e.Time = times.time(v)
	case "epoch":
		e.Time = epochTime(v)
	case "pid":
		e.PID, _ = strconv.Atoi(v)
	case "user":
		e.User = v
	case "db":
		e.Database = v
	case "app":
		e.App = v
	case "client":
		e.Client = v
	case "sqlstate":
		e.SQLState = v
	case "session":
		e.Session = v
		if e.PID == 0 {
			// %c is the backend's start time and pid in hex: a prefix
			// without %p still says the process.
			if _, hexPID, ok := strings.Cut(v, "."); ok {
				if n, err := strconv.ParseInt(hexPID, 16, 32); err == nil {
					e.PID = int(n)
				}
			}
		}
	}
}

func atoi(v string) int {
	n := 0
	for i := 0; i < len(v); i++ {
		n = n*10 + int(v[i]-'0')
		if n > 1<<40 {
			return 0
		}
	}
	return n
}
