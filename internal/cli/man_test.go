package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletions: the completion file of each shell asks pgmedic for
// its completions.
func TestCompletions(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCompletions(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pgmedic", "_pgmedic", "pgmedic.fish"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "__complete") {
			t.Errorf("completion %s does not ask pgmedic for its completions", f)
		}
	}
}

// TestCompletionAnswers: what the shells' completion scripts ask, pgmedic
// answers: the commands that start with what was typed, and a command's
// flags.
func TestCompletionAnswers(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "re"}, []string{"rehearse", "replay"}},
		{[]string{"__complete", "rehearse", ""}, []string{"migration", "upgrade"}},
		{[]string{"__complete", "check", "--min-s"}, []string{"--min-severity"}},
	} {
		var out strings.Builder
		Run(t.Context(), c.args, nil, &out, &strings.Builder{})
		for _, w := range c.want {
			if !strings.Contains(out.String(), w+"\t") && !strings.Contains(out.String(), w+"\n") {
				t.Errorf("pgmedic %s: %q missing from\n%s", strings.Join(c.args, " "), w, out.String())
			}
		}
	}
}
