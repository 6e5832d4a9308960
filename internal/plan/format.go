package plan

import (
	"fmt"
	"math"
)

// FormatRows prints a row or block count compactly: 950, 40k, 1.2M.
func FormatRows(x float64) string {
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

// FormatMS prints a duration in milliseconds with the precision that
// matters at its size: 2.31 s, 43 ms, 0.5 ms, 0.052 ms.
func FormatMS(x float64) string {
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

// FormatRatio prints how many times larger one figure is than another:
// 2.5x, 40x, 3.1e+12x.
func FormatRatio(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.3gx", math.Min(x, math.MaxFloat64))
	case x >= 10:
		return fmt.Sprintf("%.0fx", x)
	}
	return fmt.Sprintf("%.1fx", x)
}
