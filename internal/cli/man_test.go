package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestManPages: every command and subcommand has its page, which names
// it and lists its flags, and the completions of each shell know every
// command.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if err := WriteManPages(dir, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompletions(dir); err != nil {
		t.Fatal(err)
	}
	root := newRoot(nil, nil, nil, nil)
	pages := 0
	for _, c := range root.Commands() {
		for _, sub := range append(c.Commands(), c) {
			name := strings.ReplaceAll(sub.CommandPath(), " ", "-")
			b, err := os.ReadFile(filepath.Join(dir, name+".1"))
			if err != nil {
				t.Errorf("%s: no man page: %v", sub.CommandPath(), err)
				continue
			}
			pages++
			page := string(b)
			if !strings.Contains(page, ".SH NAME\n"+name+" - ") || !strings.Contains(page, `"Nov 2026"`) {
				t.Errorf("%s.1 does not open with its name and date:\n%.300s", name, page)
			}
			if sub.HasAvailableLocalFlags() && !strings.Contains(page, ".SH OPTIONS") {
				t.Errorf("%s.1 lists no options", name)
			}
		}
	}
	if pages < len(commands) {
		t.Errorf("%d man pages, want one per command at least (%d)", pages, len(commands))
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
