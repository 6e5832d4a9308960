package logs

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestAgreesWithPgBadger: on the lab's log, every statement pgmedic
// counts three times or more is counted as often by pgBadger (Debian's
// pgbadger, JSON output). pgBadger also counts the Query Text of an
// auto_explain plan as a statement; pgmedic counts the plan beside it, so
// statements auto_explain logged are left out of the comparison.
func TestAgreesWithPgBadger(t *testing.T) {
	bin, err := exec.LookPath("pgbadger")
	if err != nil {
		testkit.Missing(t, "pgbadger", err)
	}
	theirs := map[string]int64{}
	for q, n := range badgerCounts(t, bin, "testdata/lab/stderr.log", []string{"--prefix", "%m [%p] %q%u@%d "}) {
		theirs[normal(q)] += n
	}
	ours := analyze(t, "testdata/lab/stderr.log")
	compared := 0
	for _, st := range ours.Statements {
		if st.Count < 3 {
			continue
		}
		compared++
		if got := theirs[normal(st.Query)]; got != st.Count {
			t.Errorf("%q: pgmedic %d, pgBadger %d", st.Query, st.Count, got)
		}
	}
	if compared < 3 {
		t.Errorf("only %d statements compared", compared)
	}
}

var paramRe = regexp.MustCompile(`\$\d+|\?`)

// normal puts both tools' normalised texts in one form: lower case,
// placeholders as ?, no trailing semicolon, single spaces.
func normal(q string) string {
	q = strings.ToLower(strings.Join(strings.Fields(q), " "))
	q = paramRe.ReplaceAllString(q, "?")
	return strings.TrimSuffix(q, ";")
}
