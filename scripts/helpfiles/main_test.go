package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/cli"
)

// TestManPages: every command and subcommand has its page, which names
// it, carries the date given and lists its flags.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if err := writeManPages(dir, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	root := cli.Tree()
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
	if pages < 10 {
		t.Errorf("%d man pages", pages)
	}
}
