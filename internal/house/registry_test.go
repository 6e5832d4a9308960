package house

import (
	"os"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/cli"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/scenario"
)

// Every registered rule, whatever it reads, is documented and proved: a
// page in docs/rules, a row in README.md, and a lab scenario that must
// produce it (for the rules that read a database; the healthy scenario is
// every rule's quiet counterpart), a pair of real plans it must fire on and stay
// quiet on (for the plan rules). The rules that read a log or a profile
// are proved on fixtures in their own tests (rules, logs, profile).
func TestRegistryIsDocumentedAndProved(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	expected := map[string]bool{}
	quietTwin := false
	catalogue, err := scenario.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range catalogue {
		for _, e := range sc.Expect {
			expected[e.Rule] = true
		}
		for _, m := range sc.MustNot {
			quietTwin = quietTwin || (m.Rule == "*" && len(sc.Expect) == 0)
		}
	}
	if !quietTwin {
		t.Errorf("no scenario expects nothing at all (the healthy twin of every rule)")
	}
	seen := map[string]bool{}
	for _, r := range rules.Registry {
		if seen[r.ID] {
			t.Errorf("%s is registered twice", r.ID)
		}
		seen[r.ID] = true
		if r.Check == nil && r.Plan == nil && r.Log == nil && r.Profile == nil {
			t.Errorf("%s reads nothing", r.ID)
		}
		if _, err := os.Stat("../../" + r.Docs()); err != nil {
			t.Errorf("%s has no page: %v", r.ID, err)
		}
		if !strings.Contains(string(readme), "| `"+r.ID+"` |") {
			t.Errorf("%s has no row in README.md", r.ID)
		}
		if r.Check != nil && !expected[r.ID] {
			t.Errorf("%s reads a database but no lab scenario expects it", r.ID)
		}
		if r.Plan != nil {
			for _, side := range []string{".bad.txt", ".good.txt", ".bad.json", ".good.json"} {
				if _, err := os.Stat("../plan/testdata/pg15/" + r.ID + side); err != nil {
					t.Errorf("%s has no real plan %s to be tested on", r.ID, r.ID+side)
				}
			}
		}
	}
}

// TestRulePagesFollowTheTemplate: every rule's page says, in this order,
// what it detects, the incident it comes from, its signals and
// thresholds, the fix, how pgmedic verifies it and when it can be wrong,
// each as a bold lead-in ("**Fix.**") or a heading ("## Fix").
func TestRulePagesFollowTheTemplate(t *testing.T) {
	sections := []string{"What it detects", "Incident", "Signals and thresholds", "Fix", "How pgmedic verifies it", "When it can be wrong"}
	for _, r := range rules.Registry {
		b, err := os.ReadFile("../../" + r.Docs())
		if err != nil {
			t.Errorf("%s: %v", r.ID, err)
			continue
		}
		lines := strings.Split(string(b), "\n")
		at := -1
		for _, sec := range sections {
			found := -1
			for i, l := range lines {
				if strings.HasPrefix(l, "**"+sec+".**") || strings.HasPrefix(l, "**"+sec+"s.**") || l == "## "+sec {
					found = i
					break
				}
			}
			switch {
			case found < 0:
				t.Errorf("%s: no %q section", r.Docs(), sec)
			case found < at:
				t.Errorf("%s: %q comes before the section it follows", r.Docs(), sec)
			}
			at = max(at, found)
		}
	}
}

// TestEveryCommandHasAPage: each command of the tree is a row of commands,
// and each row names a guide under docs/ that exists, that README.md links
// to, and that says the command's name.
func TestEveryCommandHasAPage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := cli.Guides()
	for _, c := range cli.Tree().Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		page, ok := rows[c.Name()]
		if !ok || page == "" {
			t.Errorf("pgmedic %s has no page in commands", c.Name())
			continue
		}
		b, err := os.ReadFile("../../" + page)
		if err != nil {
			t.Errorf("pgmedic %s: its page: %v", c.Name(), err)
			continue
		}
		if !strings.Contains(string(b), "pgmedic "+c.Name()) {
			t.Errorf("%s does not name pgmedic %s", page, c.Name())
		}
		if !strings.Contains(string(readme), "("+page+")") && !strings.Contains(string(readme), "("+page+"#") {
			t.Errorf("README.md does not link to %s (pgmedic %s)", page, c.Name())
		}
	}
}

// TestEveryRuleHasItsFile: a rule lives in a file named for it (its id with
// underscores: lock-contention in lock_contention.go), which declares its id,
// so that a newcomer finds all of one rule in one place. Helpers shared by
// several rules live in files named for what they hold.
func TestEveryRuleHasItsFile(t *testing.T) {
	for _, r := range rules.Registry {
		file := strings.ReplaceAll(r.ID, "-", "_") + ".go"
		b, err := os.ReadFile("../rules/" + file)
		if err != nil {
			t.Errorf("%s has no file of its own (%s): %v", r.ID, file, err)
			continue
		}
		if !strings.Contains(string(b), `= "`+r.ID+`"`) {
			t.Errorf("%s does not declare the id %q", file, r.ID)
		}
	}
}
