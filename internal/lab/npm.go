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
func NPMCI(ctx context.Context, npm, dir, mark string, files fs.FS, what string, timeout time.Duration, progress func(string, ...any), prepare func(tmp string) error, extra ...string) error {
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
	if progress != nil {
		// npm ci at --loglevel=error says nothing until it ends, and a
		// first install fetches tens of megabytes: what has landed so far
		// is said every few seconds.
		began := time.Now()
		done := make(chan struct{})
		defer close(done)
		go func() {
			t := time.NewTicker(3 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					progress("installing %s: %.0f s, %.1f MB unpacked so far", what, time.Since(began).Seconds(), float64(dirBytes(tmp))/(1<<20))
				}
			}
		}()
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		reason, network := npmFailure(out.String())
		if network {
			return fmt.Errorf("installing %s with npm ci failed (%v): %s; check the network or npm's registry settings, then run again", what, err, reason)
		}
		return fmt.Errorf("installing %s with npm ci failed (%v): %s; the locked packages cannot be installed as they are: their package.json and package-lock.json must name versions the registry has (npm install --package-lock-only writes the lock)", what, err, reason)
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

// npmFailure reads why npm failed from its output: its message (the
// "npm error" lines after the code, syscall and errno ones, up to a blank
// line, a stack trace or the path of its log), and whether the cause is
// the network or the registry (a connection, a name, an HTTP status) rather
// than the packages asked for (a version the registry does not have, no
// lock file), which no retry mends.
func npmFailure(out string) (reason string, network bool) {
	var code string
	var msg []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		rest, ok := strings.CutPrefix(l, "npm error")
		if !ok {
			rest, ok = strings.CutPrefix(l, "npm ERR!") // npm before 10
		}
		if !ok {
			continue
		}
		if rest != "" && rest[0] == ' ' {
			rest = rest[1:]
		}
		word, _, _ := strings.Cut(rest, " ")
		switch {
		case word == "code" && code == "":
			code = strings.TrimSpace(strings.TrimPrefix(rest, "code"))
			continue
		case (word == "syscall" || word == "errno") && len(msg) == 0:
			continue
		case strings.TrimSpace(rest) == "" || strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "A complete log"):
			if len(msg) > 0 {
				return npmReason(code, msg), npmNetwork(code)
			}
			continue
		}
		msg = append(msg, strings.TrimSpace(rest))
	}
	if len(msg) == 0 {
		if last := strings.TrimSpace(lastLine(out)); last != "" {
			msg = []string{last}
		} else {
			msg = []string{"npm said nothing"}
		}
	}
	return npmReason(code, msg), npmNetwork(code)
}

func npmReason(code string, msg []string) string {
	r := strings.Join(msg, " ")
	if code != "" {
		r = code + ": " + r
	}
	if len(r) > 300 {
		r = strings.ToValidUTF8(r[:300], "") + "..."
	}
	return r
}

// npmNetwork says whether an npm error code is the network's or the
// registry's: a system error of a connection or a name, or an HTTP status
// (E401, E404 of the registry itself, E503).
func npmNetwork(code string) bool {
	switch code {
	case "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EPROTO",
		"UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "SELF_SIGNED_CERT_IN_CHAIN", "CERT_HAS_EXPIRED", "":
		return true
	}
	if len(code) == 4 && code[0] == 'E' && code[1] >= '0' && code[1] <= '9' {
		return code != "E404" // a package or version the registry does not have
	}
	return false
}

// dirBytes is the size of the regular files under dir, as far as they
// can be read while another process writes them.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
