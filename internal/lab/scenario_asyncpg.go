package lab

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

	"github.com/jackc/pgx/v5"
)

//go:embed clients/asyncpg_connect.py
var asyncpgClient []byte

const (
	// The introspection query's estimated cost grows with the catalog; at
	// about 20 tables x 100 columns it passes the 500000 inline/optimise
	// thresholds on PostgreSQL 15 (research notes A). 40 leaves margin.
	asyncpgTables      = 40
	asyncpgColumns     = 100
	asyncpgConnections = 8
)

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

func asyncpgIntrospection() Scenario {
	return Scenario{
		Name:    "asyncpg-introspection",
		Summary: "asyncpg opening fresh connections; its type introspection is JIT-compiled every time (UK coronavirus dashboard)",
		Expect: []Expect{
			{Rule: "driver-introspection", Object: "asyncpg"},
			{Rule: "jit-overhead", Object: "typeinfo_tree", Confirmed: true},
		},
		Setup: func(ctx context.Context, env *Env) error {
			if _, err := FindAsyncpgPython(); err != nil {
				return err
			}
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			// A realistic application catalog: many wide tables.
			var stmts []string
			for t := 0; t < asyncpgTables; t++ {
				cols := make([]string, asyncpgColumns)
				for c := range cols {
					cols[c] = fmt.Sprintf("c%d text", c)
				}
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE wide_%d (id bigint PRIMARY KEY, %s)", t, strings.Join(cols, ", ")))
			}
			stmts = append(stmts, "CREATE TYPE order_status AS ENUM ('new', 'paid', 'shipped')")
			if err := execAll(ctx, conn, stmts...); err != nil {
				return err
			}
			// Catalog statistics as autovacuum would leave them.
			admin, err := env.Admin(ctx)
			if err != nil {
				return err
			}
			defer admin.Close(context.Background())
			return execAll(ctx, admin, "ANALYZE pg_catalog.pg_type", "ANALYZE pg_catalog.pg_class", "ANALYZE pg_catalog.pg_attribute")
		},
		Workload: func(ctx context.Context, env *Env) error {
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
		},
	}
}
