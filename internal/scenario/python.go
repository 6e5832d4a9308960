package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MissingClient says a scenario's real client is not installed here. The
// scenario cannot run; the others can.
type MissingClient struct {
	Need    string // what is missing: "python3 with asyncpg", "Node.js"
	Install string // the command that installs it
	Also    string // another way, or "" ("point PGMEDIC_PYTHON at a python3 that has it")
}

func (e *MissingClient) Error() string {
	s := fmt.Sprintf("%s is not installed: install it with `%s`", e.Need, e.Install)
	if e.Also != "" {
		s += ", or " + e.Also
	}
	return s
}

// FindPython returns a python3 interpreter that can import module. Debian's
// python3-* packages install for /usr/bin/python3, which may not be the
// python3 first on PATH.
func FindPython(module, pkg string) (string, error) {
	candidates := []string{os.Getenv("PGMEDIC_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if err := exec.Command(c, "-c", "import "+module).Run(); err == nil {
			return c, nil
		}
	}
	return "", &MissingClient{Need: "python3 with " + module, Install: "apt-get install " + pkg,
		Also: "point PGMEDIC_PYTHON at a python3 that has it"}
}

// pythonScript writes an embedded client script to a directory of its
// own and finds a python3 that has module; cleanup removes the script.
func pythonScript(module, pkg, name string, script []byte) (py, path string, cleanup func(), err error) {
	if py, err = FindPython(module, pkg); err != nil {
		return "", "", nil, err
	}
	dir, err := os.MkdirTemp("", "pgmedic-"+module+"-")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, script, 0o644); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return py, path, cleanup, nil
}

// runPython runs an embedded client script with a python3 that has module
// and decodes the one JSON line it prints into out.
func runPython(ctx context.Context, module, pkg, name string, script []byte, out any, args ...string) error {
	py, path, cleanup, err := pythonScript(module, pkg, name, script)
	if err != nil {
		return err
	}
	defer cleanup()
	cmd := exec.CommandContext(ctx, py, append([]string{path}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the %s client failed: %w: %s", module, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("reading the %s client's output %q: %w", module, stdout.String(), err)
	}
	return nil
}

// runPythonUntil runs an embedded client script that runs until it is
// stopped (when check is done); one that ends before is an error.
func runPythonUntil(ctx context.Context, module, pkg, name string, script []byte, args ...string) error {
	py, path, cleanup, err := pythonScript(module, pkg, name, script)
	if err != nil {
		return err
	}
	defer cleanup()
	return runUntilStopped(ctx, exec.CommandContext(ctx, py, append([]string{path}, args...)...), "the "+module+" client "+name)
}

// runUntilStopped runs a client program that runs until ctx ends (while
// check samples) and returns its standard error if it failed before that.
func runUntilStopped(ctx context.Context, cmd *exec.Cmd, what string) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil // stopped when check was done
	}
	if err == nil {
		err = errors.New("it ended on its own")
	}
	return fmt.Errorf("%s failed: %w: %s", what, err, strings.TrimSpace(stderr.String()))
}
