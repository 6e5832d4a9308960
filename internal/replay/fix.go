package replay

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// roleSetting is a fix that sets a parameter for a role (ALTER ROLE app
// [IN DATABASE shop] SET jit = off): on a replay every session connects as
// the replay's own role, so the setting is given to side B's sessions.
var roleSetting = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?is)^\s*ALTER\s+(?:ROLE|USER)\s+\S+\s+(?:IN\s+DATABASE\s+\S+\s+)?SET\s+([a-z_.]+)\s*(?:=|TO)\s*'?([^';]*?)'?\s*;?\s*$`)
})

var concurrently = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\bCONCURRENTLY\s+`) })

// Change is what a finding's fix changes on side B of a replay, and the
// pool side A runs through (a pool finding's current pool).
type Change struct {
	B     SideOptions
	PoolA int
	// Said is the fix in words, for the report.
	Said string
}

// ChangeOf turns a finding's fix into a replay's side B: its statements
// (an index, a migration) run on B's copy, its role settings given to B's
// sessions, and a pool finding's proposed pool put in front of B. A fix
// with nothing a replay can apply (a change to the application's code) is
// an error that says so.
func ChangeOf(f model.Finding) (Change, error) {
	c := Change{B: SideOptions{Name: "with the fix of " + f.ID, Settings: map[string]string{}}}
	var said []string
	if e := f.Experiment; e != nil && e.Kind == model.ExpConcurrency && e.Pool > 0 {
		c.B.Pool, c.PoolA = e.Pool, e.PoolNow
		said = append(said, fmt.Sprintf("a pool of %d server connections", e.Pool))
	}
	if strings.TrimSpace(f.Fix.SQL) != "" && !strings.Contains(f.Fix.SQL, "<") {
		stmts, err := sqlparse.Split(f.Fix.SQL)
		if err != nil {
			return c, fmt.Errorf("the fix of %s does not parse: %w", f.ID, err)
		}
		for _, st := range stmts {
			if m := roleSetting().FindStringSubmatch(st); m != nil {
				c.B.Settings[strings.ToLower(m[1])] = m[2]
				said = append(said, m[1]+" = "+m[2])
				continue
			}
			// CONCURRENTLY waits for every transaction of the copy and
			// cannot run inside one; on a copy with no one else it only
			// makes the build slower.
			st = concurrently().ReplaceAllString(st, "")
			c.B.Apply = append(c.B.Apply, st)
			said = append(said, strings.Join(strings.Fields(st), " "))
		}
	}
	if len(said) == 0 {
		return c, fmt.Errorf("the fix of %s is not something a replay can apply (%s): give the change with --apply, --set or --pool", f.ID, f.Fix.Summary)
	}
	c.Said = strings.Join(said, "; ")
	return c, nil
}
