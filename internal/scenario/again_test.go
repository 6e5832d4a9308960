package scenario

import (
	"strings"
	"sync"
	"testing"
)

// again holds the scenarios that failed while the lanes ran side by side,
// to run each once more when the lanes are done. Three lanes, the other
// lab tests of this package and two majors at a time can load a small CI
// machine past what a workload sized for a quiet one expects: JIT's
// compilation of asyncpg's introspection measured 9 s a connection on
// one such run (under 1 s here), a 1.3 MB twin 10 s to build. A scenario
// whose class pgmedic misses fails both times; one that failed only beside
// the others passes the second time and says so in the log, with what
// went wrong the first.
type again struct {
	mu   sync.Mutex
	todo []retry
}

type retry struct {
	name  string
	i     int
	first []string
}

// judge takes the problems of a scenario's first attempt (none: it
// passed) and queues it for once more when there are some.
func (a *again) judge(t *testing.T, i int, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		return
	}
	t.Logf("failed beside the other lanes; runs once more when they are done:\n%s", strings.Join(problems, "\n"))
	a.mu.Lock()
	defer a.mu.Unlock()
	name := t.Name()
	a.todo = append(a.todo, retry{name: name[strings.LastIndex(name, "/")+1:], i: i, first: problems})
}

// run runs each queued scenario once more, one after another, and fails
// the test with both attempts' problems when it fails again.
func (a *again) run(t *testing.T, attempt func(t *testing.T, i int) []string) {
	t.Helper()
	for _, r := range a.todo {
		t.Run(r.name+"/again", func(t *testing.T) {
			if problems := attempt(t, r.i); len(problems) > 0 {
				t.Errorf("failed beside the other lanes, and again on its own:\n%s\n\nthe first time:\n%s", strings.Join(problems, "\n"), strings.Join(r.first, "\n"))
			}
		})
	}
}
