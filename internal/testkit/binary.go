// Package testkit holds what the tests of several packages share (it
// imports model and profile, for the shapes of what it records): the
// pgmedic binary built once per test process, golden files, and the rule
// for a missing dependency.
//
// The binary is for the tests that must run it as a real process: signals
// (Ctrl-C, kill -9), exit codes as a shell sees them, what is left behind
// when it dies.
package testkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Remove deletes the built binary; a package's TestMain calls it after
// m.Run, since the binary is shared by all the package's tests.
func Remove() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// Pgmedic returns the path of a freshly built cmd/pgmedic. It skips the
// test under -short, since building takes a few seconds.
func Pgmedic(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the pgmedic binary")
	}
	once.Do(func() {
		d, e := os.MkdirTemp("", "pgmedic-bin-")
		if e != nil {
			err = e
			return
		}
		dir = d
		path = filepath.Join(dir, "pgmedic")
		if out, e := exec.Command("go", "build", "-o", path, "github.com/pgmedic/pgmedic/cmd/pgmedic").CombinedOutput(); e != nil {
			err = errors.New("go build: " + e.Error() + "\n" + string(out))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}
