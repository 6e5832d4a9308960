// Package profile samples where processes spend CPU with perf, reads what
// perf recorded, folds the stacks, and draws and exports them: an SVG
// flame graph, folded text, speedscope JSON and pprof.
package profile

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Sample is one perf sample: the thread, when (seconds on perf's clock),
// the period it stands for, and the stack, leaf first.
type Sample struct {
	Comm     string
	PID, TID int
	Time     float64
	Period   int64
	Stack    []model.Frame
}

// ScriptStats counts what a read of perf script output saw.
type ScriptStats struct {
	Samples      int64
	Lines        int64
	Unrecognised int64
	Examples     []string
}

// headerRe is a sample's first line from perf script -F
// comm,pid,tid,time,period,event,ip,sym,dso: "postgres 4242/4242
// 3823.449299:    2004008 cpu-clock: " (comm may hold spaces; the period
// is absent when not asked for).
var headerRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(.*?)\s+(\d+)/(\d+)\s+(\d+\.\d+):\s+(?:(\d+)\s+)?([\w:.-]+):\s*$`)
})

// frameRe is one stack line: "\t 30d550 ExecScan (/usr/lib/.../postgres)",
// with +0x offsets when perf printed them.
var frameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)$`) })

// ReadScript streams perf script output, calling fn for each complete
// sample. Samples are separated by blank lines; a sample cut off at the
// end of the input is still a sample. Lines it cannot read are counted,
// with the first few kept.
func ReadScript(r io.Reader, fn func(Sample)) (ScriptStats, error) {
	var st ScriptStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var cur *Sample
	emit := func() {
		if cur != nil {
			fn(*cur)
			st.Samples++
			cur = nil
		}
	}
	bad := func(line string) {
		st.Unrecognised++
		if len(st.Examples) < 5 {
			if len(line) > 160 {
				line = line[:160] + "..."
			}
			st.Examples = append(st.Examples, line)
		}
	}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		st.Lines++
		if strings.TrimSpace(line) == "" {
			emit()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			m := frameRe().FindStringSubmatch(line)
			if m == nil || cur == nil {
				bad(line)
				continue
			}
			sym := m[2]
			if i := strings.LastIndex(sym, "+0x"); i > 0 {
				sym = sym[:i]
			}
			cur.Stack = append(cur.Stack, model.Frame{Sym: sym, DSO: m[3]})
			continue
		}
		m := headerRe().FindStringSubmatch(line)
		if m == nil {
			bad(line)
			continue
		}
		emit()
		s := Sample{Comm: m[1]}
		s.PID, _ = strconv.Atoi(m[2])
		s.TID, _ = strconv.Atoi(m[3])
		s.Time, _ = strconv.ParseFloat(m[4], 64)
		s.Period, _ = strconv.ParseInt(m[5], 10, 64)
		cur = &s
	}
	emit()
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("reading perf script output at line %d: %w", st.Lines+1, err)
	}
	return st, nil
}

// FrameName is how a frame is shown: its symbol, or for a symbol the
// binary does not export the object it is in ("[postgres]").
func FrameName(f model.Frame) string {
	if f.Sym != "" && f.Sym != "[unknown]" {
		return f.Sym
	}
	if f.DSO == "" || f.DSO == "[unknown]" {
		return "[unknown]"
	}
	if strings.HasPrefix(f.DSO, "[") {
		return f.DSO
	}
	return "[" + path.Base(f.DSO) + "]"
}
