package cli

import (
	"math"
	"os"
	"runtime/debug"
)

// checkMemoryLimit is the heap size near which check's collector works
// harder. A million relations hold about 400 MB of catalog live (680,000
// indexes and as many columns); at Go's default pace the heap then grew
// to twice that (780 MB resident) between collections. Under the limit
// the collector runs sooner and the process stays near 450 MB, in the
// same time. It is a soft limit: a larger catalog still reads, with the
// collector taking more of a core.
const checkMemoryLimit = 448 << 20

// tuneCollector sets the garbage collector's pace (GOGC; -1 off) and soft
// memory limit (0 for none) for one command, unless the user set GOGC or
// GOMEMLIMIT, whose values win. The returned func puts Go's defaults back
// for in-process callers (tests).
func tuneCollector(percent int, limit int64) (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	debug.SetGCPercent(percent)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	}
}
