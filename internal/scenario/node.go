package scenario

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"

	"github.com/pgmedic/pgmedic/internal/lab"
)

// The lab's Node clients travel inside the binary with their locked npm
// packages (package-lock.json), so a pgmedic built or installed anywhere
// can run them: on first use they are written to the user's cache and
// their packages installed there with npm ci; later runs find them ready
// and need no network.
//
//go:embed clients/node/package.json clients/node/package-lock.json clients/node/*.js
var nodeFiles embed.FS

// nodeInstallTimeout bounds npm ci (a few seconds with a warm npm cache).
const nodeInstallTimeout = 5 * time.Minute

// NodeClientsDir is where the Node clients are installed: under
// PGMEDIC_NODE_CLIENTS when set, else the user's cache directory, in a
// folder named by the clients' contents (a new pgmedic with other clients
// installs beside the old ones).
func NodeClientsDir() (string, error) {
	root := os.Getenv("PGMEDIC_NODE_CLIENTS")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = filepath.Join(os.TempDir(), fmt.Sprintf("pgmedic-cache-%d", os.Getuid()))
		}
		root = filepath.Join(cache, "pgmedic", "node-clients")
	}
	h := sha256.New()
	err := fs.WalkDir(nodeFiles, "clients/node", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := nodeFiles.ReadFile(p)
		fmt.Fprintf(h, "%s %d\n", path.Base(p), len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// installedMark is written last into a complete installation.
const installedMark = ".installed"

// nodeClients returns node and the directory of the Node clients with
// their packages, installing them there on first use.
func nodeClients(ctx context.Context) (node, dir string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", &MissingClient{Need: "Node.js (node and npm)", Install: "apt-get install nodejs npm",
			Also: "install Node.js 18 or later from nodejs.org"}
	}
	if dir, err = NodeClientsDir(); err != nil {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(dir, installedMark)); err == nil {
		return node, dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", &MissingClient{Need: "npm (to install the lab's Node packages once)", Install: "apt-get install npm",
			Also: "install Node.js with its npm from nodejs.org"}
	}
	if err := installNodeClients(ctx, npm, dir); err != nil {
		return "", "", err
	}
	return node, dir, nil
}

// installNodeClients installs the clients and their locked packages
// into dir (lab.NPMCI: a half-made installation never looks complete).
func installNodeClients(ctx context.Context, npm, dir string) error {
	files, err := fs.Sub(nodeFiles, "clients/node")
	if err != nil {
		return err
	}
	return lab.NPMCI(ctx, npm, dir, installedMark, files, "the lab's Node packages (pg, piscina)", nodeInstallTimeout, nil, nil)
}

// runNode runs a Node client until ctx ends (it runs while check samples)
// and returns its standard error if it failed before that.
func runNode(ctx context.Context, script string, args ...string) error {
	node, dir, err := nodeClients(ctx)
	if err != nil {
		return err
	}
	return runUntilStopped(ctx, exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, script)}, args...)...), "the Node client "+script)
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
	// Ready once the destination shows what the scenario is about: an
	// event exported twice (broken), or events exported (fixed). On a
	// loaded machine Node and its workers start late, and a check begun
	// at a fixed time could see an exporter that had not retried yet.
	readyCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	go func() {
		admin, err := env.Admin(readyCtx)
		if err != nil {
			return
		}
		defer admin.Close(context.Background())
		for readyCtx.Err() == nil {
			var events, rows int64
			if admin.QueryRow(readyCtx, "SELECT count(DISTINCT event_id), count(*) FROM "+table).Scan(&events, &rows) == nil &&
				(wantDuplicates && rows > events || !wantDuplicates && events >= 2) {
				env.Ready()
				return
			}
			select {
			case <-readyCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
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
