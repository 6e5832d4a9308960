package printable

import (
	"fmt"
	"math"
	"strconv"
)

// This file is the one home of how pgmedic writes numbers for a person.
// Figures from plans can be absurd (a pasted plan, a planner overflow), so
// every form stays readable up to float64's largest value.

// Rows writes a row or block count compactly: 950, 40k, 1.2M.
func Rows(x float64) string {
	switch {
	case x >= 1e12:
		return fmt.Sprintf("%.3g", math.Min(x, math.MaxFloat64))
	case x >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.0fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

// Count writes an exact count with thousands separators: 1,234,567 (a
// plan tree's figures).
func Count(x float64) string {
	if math.Abs(x) >= 1e15 || math.IsNaN(x) {
		return fmt.Sprintf("%.3g", math.Min(math.Max(x, -math.MaxFloat64), math.MaxFloat64))
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], x, 'f', 0, 64)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// MS writes a duration in milliseconds with the precision that matters at
// its size, for titles and summaries: 2.31 s, 43 ms, 0.5 ms, 0.052 ms.
func MS(x float64) string {
	switch {
	case x >= 1e12:
		return fmt.Sprintf("%.3g s", math.Min(x, math.MaxFloat64)/1000)
	case x >= 1000:
		return fmt.Sprintf("%.2f s", x/1000)
	case x >= 10:
		return fmt.Sprintf("%.0f ms", x)
	case x >= 0.1:
		return fmt.Sprintf("%.1f ms", x)
	}
	return fmt.Sprintf("%.3f ms", x)
}

// PlanMS writes a plan node's time as EXPLAIN's own figures read, two
// decimals below 100 ms (43.00 ms), whole milliseconds to a second, then
// seconds: a plan tree sets its times side by side.
func PlanMS(x float64) string {
	switch {
	case x >= 1e12:
		return fmt.Sprintf("%.3g s", math.Min(x, math.MaxFloat64)/1000)
	case x >= 1000:
		return string(strconv.AppendFloat(nil, x/1000, 'f', 2, 64)) + " s"
	case x >= 100:
		return string(strconv.AppendFloat(nil, x, 'f', 0, 64)) + " ms"
	}
	return string(strconv.AppendFloat(nil, x, 'f', 2, 64)) + " ms"
}

// Ratio writes how many times larger one figure is than another: 2.5x,
// 40x, 3.1e+12x.
func Ratio(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.3gx", math.Min(x, math.MaxFloat64))
	case x >= 10:
		return fmt.Sprintf("%.0fx", x)
	}
	return fmt.Sprintf("%.1fx", x)
}

// KB writes a size given in kilobytes: 512 kB, 1.5 MB, 2.1e+06 GB.
func KB(kb float64) string {
	if kb >= 1e12 {
		return fmt.Sprintf("%.3g GB", math.Min(kb, math.MaxFloat64)/(1024*1024))
	}
	if kb >= 1024 {
		return fmt.Sprintf("%.1f MB", kb/1024)
	}
	return fmt.Sprintf("%.0f kB", kb)
}
