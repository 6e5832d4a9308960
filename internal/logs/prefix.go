package logs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Prefix is a compiled log_line_prefix: a pattern for the start of every
// stderr line and the fields it yields.
type Prefix struct {
	Text string
	// head matches the prefix alone, up to the severity: the message
	// after it can be megabytes (a plan, a long statement) and is cut off
	// by hand rather than run through the regexp.
	head  *regexp.Regexp
	names []string
	// fast matches the common lines without the regexp (fastprefix.go).
	fast *fastPrefix
	// times is the reader's cache of the last second it read (nil on a
	// Prefix shared between goroutines; each reader has its own copy).
	times *secondCache
}

// forReader is a copy of the prefix for one reader's goroutine, with its
// own cache of timestamps.
func (p *Prefix) forReader() *Prefix {
	c := *p
	c.times = &secondCache{}
	return &c
}

// escapes are the log_line_prefix escapes and the patterns their values
// match (PostgreSQL's documentation, "What to Log").
var escapes = sync.OnceValue(func() map[byte]string {
	return map[byte]string{
		'a': `(?P<app>.*?)`,
		'u': `(?P<user>[^ ,@]*?)`,
		'd': `(?P<db>[^ ,@]*?)`,
		'r': `(?P<client>[^ ,]*?)`,
		'h': `(?P<client>[^ ,]*?)`,
		'b': `[a-z ]+?`,
		'p': `(?P<pid>\d+)`,
		'P': `\d*`,
		't': `(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Za-z0-9+\-:]+)`,
		'm': `(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ [A-Za-z0-9+\-:]+)`,
		'n': `(?P<epoch>\d+\.\d+)`,
		'i': `[A-Z ]*?`,
		'e': `(?P<sqlstate>[0-9A-Z]{5})`,
		'c': `(?P<session>[0-9a-f]+\.[0-9a-f]+)`,
		'l': `\d+`,
		's': `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Za-z0-9+\-:]+`,
		'v': `[0-9/]*`,
		'x': `\d+`,
		'Q': `-?\d+`,
	}
})

// levels are the severities (and the DETAIL-like lines) that follow the
// prefix, each with two spaces after its colon.
var levels = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"DEBUG": true, "DEBUG1": true, "DEBUG2": true, "DEBUG3": true, "DEBUG4": true, "DEBUG5": true,
		"LOG": true, "INFO": true, "NOTICE": true, "WARNING": true, "ERROR": true, "FATAL": true, "PANIC": true,
		"DETAIL": true, "HINT": true, "CONTEXT": true, "STATEMENT": true, "QUERY": true, "LOCATION": true}
})

// CompilePrefix compiles a log_line_prefix. %q (the rest only in session
// processes) makes what follows it optional. Each field escape may appear
// once (a second %m, say, matches without being kept).
func CompilePrefix(p string) (*Prefix, error) {
	var b strings.Builder
	b.WriteString("^")
	seen := map[string]bool{}
	optional := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteString(regexp.QuoteMeta(p[i : i+1])) // a byte: a literal of several bytes stays whole
			continue
		}
		i++
		if i >= len(p) {
			return nil, fmt.Errorf("log_line_prefix %q ends with a lone %%", p)
		}
		// %-10u: padding, as PostgreSQL allows.
		for i < len(p) && (p[i] == '-' || (p[i] >= '0' && p[i] <= '9')) {
			i++
		}
		if i >= len(p) {
			return nil, fmt.Errorf("log_line_prefix %q ends inside an escape", p)
		}
		switch c := p[i]; c {
		case '%':
			b.WriteString("%")
		case 'q':
			b.WriteString("(?:")
			optional = true
		default:
			pat, ok := escapes()[c]
			if !ok {
				return nil, fmt.Errorf("log_line_prefix %q: unknown escape %%%c", p, c)
			}
			if name := groupName(pat); name != "" {
				if seen[name] {
					pat = strings.Replace(pat, "?P<"+name+">", "?:", 1)
				}
				seen[name] = true
			}
			b.WriteString(" *" + pat + " *")
		}
	}
	if optional {
		b.WriteString(")?")
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("log_line_prefix %q: %w", p, err)
	}
	return &Prefix{Text: p, head: re, names: re.SubexpNames(), fast: compileFast(p)}, nil
}

// splitLevel finds the severity after the prefix: the first "WORD:" whose
// word is a severity, standing alone (not the end of a longer word), and
// followed by the two spaces PostgreSQL prints, or one: some carriers and
// pgBadger's own samples of RDS logs squeeze them. It returns where the
// word starts, the word, and where the message starts.
func splitLevel(line string) (start int, level string, msg int, ok bool) {
	from := 0
	for {
		i := strings.Index(line[from:], ": ")
		if i < 0 {
			return 0, "", 0, false
		}
		i += from
		j := i
		for j > 0 && line[j-1] >= 'A' && line[j-1] <= 'Z' || j > 0 && line[j-1] >= '1' && line[j-1] <= '5' {
			j--
		}
		alone := j == 0 || !(line[j-1] >= 'a' && line[j-1] <= 'z' || line[j-1] >= 'A' && line[j-1] <= 'Z' || line[j-1] == '_')
		if alone && levels()[line[j:i]] {
			msg = i + 2
			if msg < len(line) && line[msg] == ' ' {
				msg++
			}
			return j, line[j:i], msg, true
		}
		from = i + 2
	}
}

func groupName(pat string) string {
	i := strings.Index(pat, "?P<")
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(pat[i:], '>')
	return pat[i+3 : i+j]
}

// parse reads one line that starts an entry; ok is false for a line the
// prefix does not match.
func (p *Prefix) parse(line string) (e Entry, ok bool) {
	start, level, msg, ok := splitLevel(line)
	if !ok {
		return e, false
	}
	if p.fast != nil && p.fast.match(line[:start], &e, p.times) {
		e.Level, e.Message = level, twoSpaces(line[msg:])
		return e, true
	}
	e = Entry{}
	e, ok = p.parseRegexp(line, start, level, msg)
	e.Message = twoSpaces(e.Message)
	return e, ok
}

// twoSpaces puts back the two spaces PostgreSQL prints between a
// duration and what it timed ("duration: 1.2 ms  statement: ..."), where
// a carrier squeezed them into one: every reader of durations looks for
// the server's own form.
func twoSpaces(msg string) string {
	rest, ok := strings.CutPrefix(msg, "duration: ")
	if !ok {
		return msg
	}
	// The time must stand between "duration: " and " ms": "duration: ms 0"
	// holds none.
	i := strings.Index(rest, " ms ")
	if i <= 0 || strings.HasPrefix(rest[i+4:], " ") || strings.IndexByte(rest[:i], ' ') >= 0 {
		return msg
	}
	return "duration: " + rest[:i] + " ms  " + rest[i+4:]
}

// parseRegexp is parse by the prefix's regexp.
func (p *Prefix) parseRegexp(line string, start int, level string, msg int) (e Entry, ok bool) {
	m := p.head.FindStringSubmatch(line[:start])
	if m == nil {
		return e, false
	}
	e.Level, e.Message = level, line[msg:]
	for i, name := range p.names {
		setField(&e, name, m[i], p.times)
	}
	return e, true
}

// epochTime reads %n, seconds since the epoch with milliseconds.
func epochTime(v string) time.Time {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.UnixMilli(int64(f * 1000)).UTC()
	}
	return time.Time{}
}

var timeLayouts = []string{"2006-01-02 15:04:05.000 MST", "2006-01-02 15:04:05 MST", "2006-01-02 15:04:05.000 -07", "2006-01-02 15:04:05 -07",
	"2006-01-02 15:04:05.000 -0700", "2006-01-02 15:04:05 -0700", "2006-01-02 15:04:05.000 -07:00", "2006-01-02 15:04:05 -07:00"}

// parseTime reads PostgreSQL's log timestamps (with or without
// milliseconds, a zone abbreviation or a numeric offset).
func parseTime(v string) time.Time {
	if t, ok := quickTime(v); ok {
		return t
	}
	return parseTimeLayouts(v)
}

// secondCache keeps the last second a reader turned into a time: a busy
// log has hundreds of lines in each second, which then cost a comparison
// and the fraction's digits.
type secondCache struct {
	sec, zone string
	base      time.Time // the second's instant
}

// time reads a timestamp through the cache (c may be nil).
func (c *secondCache) time(v string) time.Time {
	if c == nil {
		return parseTime(v)
	}
	ns, zone, ok := afterSeconds(v)
	if !ok {
		return parseTime(v)
	}
	if v[:19] == c.sec && v[zone:] == c.zone {
		return c.base.Add(time.Duration(ns))
	}
	t := parseTime(v)
	if !t.IsZero() {
		c.sec, c.zone, c.base = v[:19], v[zone:], t.Add(-time.Duration(ns))
	}
	return t
}

// afterSeconds reads what follows "YYYY-MM-DD HH:MM:SS" in a timestamp
// (the shape is the caller's to check): an optional fraction of one to
// nine digits, in nanoseconds, and a space; zone is where the zone
// starts. ok is false for anything else.
func afterSeconds(v string) (ns, zone int, ok bool) {
	if len(v) < 21 {
		return 0, 0, false
	}
	i := 19
	if v[i] == '.' {
		j := digitsFrom(v, i+1)
		if j == i+1 || j-i-1 > 9 {
			return 0, 0, false
		}
		for k := i + 1; k < i+10; k++ {
			ns *= 10
			if k < j {
				ns += int(v[k] - '0')
			}
		}
		i = j
	}
	if i >= len(v) || v[i] != ' ' {
		return 0, 0, false
	}
	return ns, i + 1, true
}

// zoneOffsets are the offsets parseTimeLayouts gave each zone it read,
// so that the next lines in that zone are read without time.Parse.
var zoneOffsets sync.Map // zone text -> time.Duration

// quickTime reads "YYYY-MM-DD HH:MM:SS[.fraction] ZONE" by hand, for a
// zone parseTimeLayouts has read before (the same result, a tenth of the
// cost); ok is false otherwise.
func quickTime(v string) (time.Time, bool) {
	ns, zone, ok := afterSeconds(v)
	if !ok || !dateTimeAt(v, 0) {
		return time.Time{}, false
	}
	off, ok := zoneOffsets.Load(v[zone:])
	if !ok {
		// The zone's offset is learnt from a full parse of this value.
		t := parseTimeLayouts(v)
		if t.IsZero() {
			return t, true
		}
		base, ok := wallClock(v, ns)
		if !ok {
			return t, true
		}
		zoneOffsets.Store(v[zone:], base.Sub(t))
		return t, true
	}
	base, ok := wallClock(v, ns)
	if !ok {
		return time.Time{}, false
	}
	return base.Add(-off.(time.Duration)), true
}

// wallClock is the date and time of v as if in UTC; ok is false for a
// date or time out of range (which time.Parse refuses too).
func wallClock(v string, ns int) (time.Time, bool) {
	n := func(a, b int) int { return atoi(v[a:b]) }
	y, mo, d, h, mi, s := n(0, 4), n(5, 7), n(8, 10), n(11, 13), n(14, 16), n(17, 19)
	if mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC)
	if t.Day() != d {
		return time.Time{}, false // February 30th
	}
	return t, true
}

// parseTimeLayouts is parseTime by time.Parse.
func parseTimeLayouts(v string) time.Time {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// knownPrefixes are the log_line_prefix values detection tries: Debian's
// and PostgreSQL's defaults, and those pgBadger's documentation
// recommends.
var knownPrefixes = []string{
	"%m [%p] ",
	"%m [%p] %q%u@%d ",
	"%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
	"%t [%p]: user=%u,db=%d,app=%a,client=%h ",
	"%m [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
	"%t [%p]: [%l-1] ",
	"%t [%p-%l] %q%u@%d ",
	"%m [%p-%l] %q%u@%d ",
	"%m %u@%d [%p] ",
	"%t:%r:%u@%d:[%p]:",
	"%m ",
	"%t ",
}

// syslogPrefixes are tried too on syslog files, whose own header carries
// the time and the process: pgBadger's recommendation for syslog, and no
// prefix at all (tried last: it matches whatever the others match).
var syslogPrefixes = []string{
	"user=%u,db=%d,app=%a,client=%h ",
	"%q%u@%d ",
	"",
}
