package scenario

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed clients/asyncpg_connect.py
var asyncpgClient []byte

// asyncpgConnections is how many fresh connections the client opens. The
// introspection query's estimated cost grows with the catalogue; at about
// 20 tables x 100 columns it passes the 500000 inline and optimisation
// thresholds on PostgreSQL 15, and setup.sql creates 40 to leave a margin.
const asyncpgConnections = 8

// ErrNoAsyncpg is returned when no Python with asyncpg is installed.
var ErrNoAsyncpg = errors.New("no python3 with asyncpg found: install it with `apt-get install python3-asyncpg`, or point PGMEDIC_PYTHON at a python3 that has it")

// FindAsyncpgPython returns a python3 interpreter that can import asyncpg.
// Debian's python3-asyncpg installs for /usr/bin/python3, which may not be
// the python3 first on PATH.
func FindAsyncpgPython() (string, error) {
	candidates := []string{os.Getenv("PGMEDIC_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if err := exec.Command(c, "-c", "import asyncpg").Run(); err == nil {
			return c, nil
		}
	}
	return "", ErrNoAsyncpg
}

// asyncpgIntrospection runs the Python client, which opens the
// connections and reports how long each first query took.
func asyncpgIntrospection(ctx context.Context, env *Env) error {
	py, err := FindAsyncpgPython()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pgmedic-asyncpg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "asyncpg_connect.py")
	if err := os.WriteFile(script, asyncpgClient, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, py, script, env.AppDSN(), fmt.Sprint(asyncpgConnections))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("asyncpg client failed: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var res struct {
		Connections  int       `json:"connections"`
		FirstQueryMS []float64 `json:"first_query_ms"`
		Version      string    `json:"asyncpg"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return fmt.Errorf("reading the asyncpg client's output %q: %w", out.String(), err)
	}
	env.Log("asyncpg %s: first query per new connection took %v ms", res.Version, res.FirstQueryMS)
	return nil
}
