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

// TestReferenceIsCurrent: docs/reference is what the command tree renders
// now, page for page; a flag added, removed or reworded without it fails.
func TestReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := writeReference(dir); err != nil {
		t.Fatal(err)
	}
	const committed = "../../docs/reference"
	fix := "regenerate it: go run ./scripts/helpfiles -reference docs/reference"
	want, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	have, _ := filepath.Glob(filepath.Join(committed, "*.md"))
	if len(want) < 10 {
		t.Fatalf("%d reference pages rendered", len(want))
	}
	for _, f := range have {
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(f))); err != nil {
			t.Errorf("docs/reference/%s names no command any more: %s", filepath.Base(f), fix)
		}
	}
	for _, f := range want {
		got, _ := os.ReadFile(f)
		old, err := os.ReadFile(filepath.Join(committed, filepath.Base(f)))
		if err != nil {
			t.Errorf("docs/reference/%s is missing: %s", filepath.Base(f), fix)
			continue
		}
		if string(got) != string(old) {
			t.Errorf("docs/reference/%s is stale: %s", filepath.Base(f), fix)
		}
	}
}
