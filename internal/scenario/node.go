package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// nodeClients is where the Node clients and their locked npm packages
// live, relative to the repository; PGMEDIC_NODE_CLIENTS overrides it.
const nodeClients = "internal/scenario/clients/node"

// findNodeClients returns node and the directory of the Node clients with
// their packages installed (npm ci), looked up from the working directory
// up to the repository's root.
func findNodeClients() (node, dir string, err error) {
	missing := &MissingClient{Module: "node with the lab's npm packages (pg, piscina)",
		Package: "nodejs npm, then run `npm ci` in " + nodeClients}
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", missing
	}
	candidates := []string{os.Getenv("PGMEDIC_NODE_CLIENTS")}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, nodeClients))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(c, "node_modules", "piscina")); err == nil {
			if _, err := os.Stat(filepath.Join(c, "node_modules", "pg")); err == nil {
				return node, c, nil
			}
		}
	}
	return "", "", missing
}

// runNode runs a Node client until ctx ends (it runs while check samples)
// and returns its standard error if it failed before that.
func runNode(ctx context.Context, script string, args ...string) error {
	node, dir, err := findNodeClients()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, script)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil // stopped when check was done
	}
	if err == nil {
		err = errors.New("it ended on its own")
	}
	return fmt.Errorf("the Node client %s failed: %w: %s", script, err, strings.TrimSpace(stderr.String()))
}

// blockedEventLoop runs the exporter with fire-and-forget inserts, a
// blocked event loop and timed-out retries while check samples, then
// counts the events exported more than once (they must be).
func blockedEventLoop(ctx context.Context, env *Env) error {
	return exporter(ctx, env, "broken", "exported", true)
}

// blockedEventLoopFixed is the twin: awaited, idempotent inserts and the
// CPU work outside the transaction; it must export no event twice.
func blockedEventLoopFixed(ctx context.Context, env *Env) error {
	return exporter(ctx, env, "fixed", "exported_ok", false)
}

func exporter(ctx context.Context, env *Env, mode, table string, wantDuplicates bool) error {
	if err := runNode(ctx, "exporter.js", env.AppDSN(), mode); err != nil {
		return err
	}
	// Count what reached the destination, after the client is gone.
	admin, err := env.Admin(context.Background())
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var events, rows int64
	if err := admin.QueryRow(context.Background(), "SELECT count(DISTINCT event_id), count(*) FROM "+table).Scan(&events, &rows); err != nil {
		return err
	}
	env.Record("events exported ("+mode+")", float64(events))
	env.Record("rows exported more than once ("+mode+")", float64(rows-events))
	if wantDuplicates != (rows > events) {
		return fmt.Errorf("the %s exporter exported %d events as %d rows: the scenario did not reproduce", mode, events, rows)
	}
	return nil
}
