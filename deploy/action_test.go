package deploy

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v3"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// lint runs actionlint, with shellcheck on the scripts, on workflow files
// of the repository at root, and returns what it reports.
func lint(t *testing.T, root string, files ...string) []string {
	t.Helper()
	shellcheck := testkit.Tool(t, "shellcheck", "scripts/install-deps.sh installs Debian's shellcheck")
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{Shellcheck: shellcheck, WorkingDir: root, Oneline: true})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestActionLints: the example workflow, and through it the composite
// action's metadata and the inputs it is given, pass actionlint (with
// shellcheck on the workflow's scripts); the action's own scripts pass
// shellcheck. A workflow that gives the action an input it does not have
// is caught, so the lint is known to read the action.
func TestActionLints(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	workflow := filepath.Join(root, ".github/workflows/pgmedic-baseline-example.yml")
	// The project's own CI (.ci/run in Debian 12) is linted the same way.
	for _, e := range lint(t, root, workflow, filepath.Join(root, ".github/workflows/ci.yml")) {
		t.Errorf("actionlint: %s", e)
	}

	b, err := os.ReadFile(workflow)
	if err != nil {
		t.Fatal(err)
	}
	// The broken copy lives in a repository of its own, beside a copy of
	// the action.
	other := t.TempDir()
	actionYML, err := os.ReadFile(filepath.Join(root, ".github/actions/pgmedic-baseline/action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(other, ".git"), 0o755) // actionlint finds a project by it
	os.MkdirAll(filepath.Join(other, ".github/workflows"), 0o755)
	os.MkdirAll(filepath.Join(other, ".github/actions/pgmedic-baseline"), 0o755)
	os.WriteFile(filepath.Join(other, ".github/actions/pgmedic-baseline/action.yml"), actionYML, 0o644)
	broken := filepath.Join(other, ".github/workflows/broken.yml")
	bad := strings.Replace(string(b), "fail-on: new:warning,regression", "fail_on: new:warning,regression", 1)
	if err := os.WriteFile(broken, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := lint(t, other, broken); !strings.Contains(strings.Join(errs, "\n"), "fail_on") {
		t.Errorf("an input the action does not have passed actionlint: %v", errs)
	}

	var action struct {
		Runs struct {
			Using string
			Steps []struct {
				Name, Shell, Run, Uses string
			}
		}
	}
	if err := yaml.Unmarshal(actionYML, &action); err != nil {
		t.Fatal(err)
	}
	if action.Runs.Using != "composite" {
		t.Fatalf("runs.using %q", action.Runs.Using)
	}
	shellcheck := testkit.Tool(t, "shellcheck", "scripts/install-deps.sh installs Debian's shellcheck")
	for _, s := range action.Runs.Steps {
		if s.Run == "" {
			continue
		}
		if s.Shell != "bash" {
			t.Errorf("step %q: a composite action's run step needs shell: bash, has %q", s.Name, s.Shell)
		}
		// GitHub replaces ${{ }} before bash reads the script; the
		// scripts here take inputs from env only, so none is left.
		if strings.Contains(s.Run, "${{") {
			t.Errorf("step %q puts an expression into its script: pass it through env", s.Name)
		}
		cmd := exec.Command(shellcheck, "--shell=bash", "-")
		cmd.Stdin = strings.NewReader(s.Run)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("shellcheck of step %q: %v\n%s", s.Name, err, out)
		}
	}
}
