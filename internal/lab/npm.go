package lab

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// NPMCI installs locked npm packages into dir: the top-level files of
// files (package.json, package-lock.json, scripts) are written into a
// directory of their own beside dir, `npm ci` runs there (npm's cache
// first, with the flags in extra), then prepare (nil for nothing), then mark,
// and the directory is renamed to dir. mark is the file written last into
// a complete installation: a directory without it is not one. A pgmedic killed half-way, or two
// installing at once, never leave a dir that looks complete and is not.
// what names the packages in an error.
func NPMCI(ctx context.Context, npm, dir, mark string, files fs.FS, what string, timeout time.Duration, prepare func(tmp string) error, extra ...string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating the directory for %s: %w", what, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".part-")
	if err != nil {
		return fmt.Errorf("creating the directory for %s: %w", what, err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", what, err)
		}
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// --prefer-offline: packages npm has cached are not fetched again.
	args := append([]string{"ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"}, extra...)
	cmd := exec.CommandContext(ictx, npm, args...)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("installing %s with npm ci failed (%v): %s; check the network or npm's registry settings, then run again",
			what, err, strings.TrimSpace(lastLine(out.String())))
	}
	if prepare != nil {
		if err := prepare(tmp); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, mark), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another pgmedic finished first: its installation is as good.
		if _, serr := os.Stat(filepath.Join(dir, mark)); serr == nil {
			return nil
		}
		return fmt.Errorf("installing %s in %s: %w", what, dir, err)
	}
	return nil
}
