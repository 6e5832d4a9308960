package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// WriteManPages writes a man page (section 1) for pgmedic and for each of
// its commands into dir, dated date so that two builds of one commit
// ship the same pages: pgmedic.1, pgmedic-check.1, pgmedic-lab-up.1, ...
// Packages install them under /usr/share/man/man1.
func WriteManPages(dir string, date time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the man pages: %w", err)
	}
	root := newRoot(nil, nil, io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	header := &doc.GenManHeader{Title: "PGMEDIC", Section: "1", Source: "pgmedic " + versionText(), Manual: "pgmedic manual", Date: &date}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("writing the man pages: %w", err)
	}
	return nil
}

// WriteCompletions writes the shell completions of pgmedic into dir, one
// file per shell under the name each shell's package directory expects:
// pgmedic (bash-completion), _pgmedic (zsh), pgmedic.fish.
func WriteCompletions(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the shell completions: %w", err)
	}
	root := newRoot(nil, nil, io.Discard, io.Discard)
	for _, c := range []struct {
		file  string
		write func(*cobra.Command, string) error
	}{
		{"pgmedic", func(r *cobra.Command, f string) error { return r.GenBashCompletionFileV2(f, true) }},
		{"_pgmedic", (*cobra.Command).GenZshCompletionFile},
		{"pgmedic.fish", func(r *cobra.Command, f string) error { return r.GenFishCompletionFile(f, true) }},
	} {
		if err := c.write(root, filepath.Join(dir, c.file)); err != nil {
			return fmt.Errorf("writing the shell completions: %w", err)
		}
	}
	return nil
}
