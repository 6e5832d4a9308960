package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// toolDirs are where scripts/install-deps.sh unpacks a tool it does not
// install as a Debian package (Prometheus, whose package starts a server).
var toolDirs = []string{"/var/cache/pgmedic/prometheus/usr/bin"}

// Tool finds an executable on PATH or where install-deps.sh unpacks it;
// without it the test skips (fails under CI=true), naming what installs it.
func Tool(t testing.TB, name, installedBy string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range toolDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	Missing(t, name, fmt.Errorf("not on PATH nor in %v (%s)", toolDirs, installedBy))
	return ""
}
