package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// Tree is pgmedic's whole command tree, for what is generated from it
// (scripts/helpfiles writes the man pages from it). The binary itself
// does not link the man page writer: its Markdown renderer would add to
// every command's start-up.
func Tree() *cobra.Command {
	root := newRoot(nil, nil, io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	return root
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
