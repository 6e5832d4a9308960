package house

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneDialSeam holds every connection pgmedic opens for itself to this
// package, where the application_name, the timeouts and the cancel on
// Ctrl-C are set: a connection dialled elsewhere would miss them. The
// lab's simulated applications play the application, not pgmedic, and
// dial as an application does.
func TestOneDialSeam(t *testing.T) {
	dial := regexp.MustCompile(`\b(pgx\.Connect|pgconn\.Connect|pgx\.ConnectConfig|pgconn\.ConnectConfig|pgxpool\.New)\(`)
	allowed := []string{"internal/envelope/", "internal/scenario/", "internal/lab/labtest/"}
	root := filepath.Join("..", "..")
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		found++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if !dial.MatchString(line) {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(rel, a)
			}
			if !ok {
				t.Errorf("%s:%d dials a connection of its own (%s): use envelope.Connect, envelope.Dial or envelope.DialLow", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 50 {
		t.Fatalf("walked %d Go files from %s: the walk did not reach the module", found, root)
	}
}
