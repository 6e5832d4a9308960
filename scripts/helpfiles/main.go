// Command helpfiles writes what packages ship beside the binary: the man
// pages (DIR/man1) and the shell completions (DIR/completions), from the
// command tree itself. SOURCE_DATE_EPOCH, when set, dates the pages. It
// is its own program so that the binary does not link the man page
// writer. With -reference it writes the Markdown command reference that
// docs/reference holds (TestReferenceIsCurrent fails when it is stale).
//
// usage: go run ./scripts/helpfiles DIR
//
//	go run ./scripts/helpfiles -reference docs/reference
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra/doc"

	"github.com/pgmedic/pgmedic/internal/cli"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-reference" {
		if err := writeReference(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "helpfiles:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/helpfiles DIR | -reference DIR")
		os.Exit(2)
	}
	date := time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "helpfiles: SOURCE_DATE_EPOCH %q is not a number of seconds\n", s)
			os.Exit(2)
		}
		date = time.Unix(n, 0).UTC()
	}
	dir := os.Args[1]
	for _, err := range []error{writeManPages(filepath.Join(dir, "man1"), date), cli.WriteCompletions(filepath.Join(dir, "completions"))} {
		if err != nil {
			fmt.Fprintln(os.Stderr, "helpfiles:", err)
			os.Exit(1)
		}
	}
}

// writeManPages writes a man page (section 1) for pgmedic and for each of
// its commands into dir, dated date so that two builds of one commit ship
// the same pages: pgmedic.1, pgmedic-check.1, pgmedic-lab-up.1, ...
// Packages install them under /usr/share/man/man1.
func writeManPages(dir string, date time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the man pages: %w", err)
	}
	root := cli.Tree()
	header := &doc.GenManHeader{Title: "PGMEDIC", Section: "1", Source: "pgmedic " + root.Version, Manual: "pgmedic manual", Date: &date}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("writing the man pages: %w", err)
	}
	return nil
}

// writeReference writes one Markdown page per command into dir (its
// earlier pages removed first, so a command that is gone leaves none),
// as cobra renders the tree: usage, flags with their defaults, and links
// between parents and subcommands.
func writeReference(dir string) error {
	old, _ := filepath.Glob(filepath.Join(dir, "pgmedic*.md"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("writing the command reference: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the command reference: %w", err)
	}
	root := cli.Tree()
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("writing the command reference: %w", err)
	}
	return nil
}
