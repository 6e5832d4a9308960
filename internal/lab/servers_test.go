package lab

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFindServerByMajor: every build the lab finds is found again by its
// major, and a PGMEDIC_PG_BIN of another major is refused with both
// versions named.
func TestFindServerByMajor(t *testing.T) {
	needPostgres(t)
	all := Servers()
	if len(all) == 0 {
		t.Fatal("Servers found none, FindBinDir found one")
	}
	for _, s := range all {
		got, err := FindServer("", s.Major)
		if err != nil || got.Major != s.Major || !strings.HasPrefix(got.Version, strconv.Itoa(s.Major)+".") {
			t.Errorf("FindServer(%d) = %+v, %v", s.Major, got, err)
		}
	}
	other := 13
	if all[0].Major == 13 {
		other = 18
	}
	t.Setenv("PGMEDIC_PG_BIN", all[0].BinDir)
	_, err := FindServer("", other)
	if err == nil || !strings.Contains(err.Error(), "not "+strconv.Itoa(other)) {
		t.Errorf("PGMEDIC_PG_BIN of %d asked for %d: %v", all[0].Major, other, err)
	}
}

func TestNoServerOfThatMajor(t *testing.T) {
	t.Setenv("PGMEDIC_PG_CACHE", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	if _, err := FindServer("", 99); err == nil {
		t.Fatal("found a PostgreSQL 99")
	}
	_, err := Install(context.Background(), 12, func(string, ...any) {})
	if err == nil || !strings.Contains(err.Error(), "13 to 18") {
		t.Errorf("installing 12: %v", err)
	}
}

// TestRestoreSymlinks: the package's links are made inside it; a list
// that points outside the package is refused before anything is linked.
func TestRestoreSymlinks(t *testing.T) {
	pkg := t.TempDir()
	os.MkdirAll(filepath.Join(pkg, "native", "lib"), 0o755)
	os.WriteFile(filepath.Join(pkg, "native", "lib", "libicuuc.so.60.2"), []byte("elf"), 0o644)
	write := func(list string) {
		os.WriteFile(filepath.Join(pkg, "native", "pg-symlinks.json"), []byte(list), 0o644)
	}
	write(`[{"source":"native/lib/libicuuc.so.60.2","target":"native/lib/libicuuc.so.60"}]`)
	if err := restoreSymlinks(pkg); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(pkg, "native", "lib", "libicuuc.so.60")); err != nil || string(b) != "elf" {
		t.Errorf("the link does not lead to the library: %q %v", b, err)
	}
	for _, bad := range []string{
		`[{"source":"../../../etc/passwd","target":"native/lib/x"}]`,
		`[{"source":"native/lib/libicuuc.so.60.2","target":"../outside"}]`,
	} {
		write(bad)
		if err := restoreSymlinks(pkg); err == nil || !strings.Contains(err.Error(), "outside the package") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	write(`not json`)
	if err := restoreSymlinks(pkg); err == nil {
		t.Error("a broken list was accepted")
	}
}

// TestEveryMajorInstallable: each major of pgversion's table has its
// locked build for lab install, so adding a major is its row and its
// package files.
func TestEveryMajorInstallable(t *testing.T) {
	for _, m := range Majors {
		for _, f := range []string{"package.json", "package-lock.json"} {
			if _, err := fs.Stat(postgresPackages, fmt.Sprintf("postgres/%d/%s", m, f)); err != nil {
				t.Errorf("PostgreSQL %d: no locked build for lab install (%v)", m, err)
			}
		}
	}
}
