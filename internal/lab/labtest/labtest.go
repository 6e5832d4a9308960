// Package labtest gives tests a throwaway lab cluster. It lives apart from
// lab so that pgmedic's binary does not link the test helpers.
package labtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// Cluster starts a throwaway cluster for one test and destroys it when the
// test ends. Without PostgreSQL's server binaries the test is skipped, or
// fails under CI=true (testkit.Missing).
func Cluster(t testing.TB, opts lab.Options) *lab.Cluster {
	t.Helper()
	if _, err := lab.FindBinDir(opts.BinDir); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	c, err := lab.Create(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy(context.Background()) })
	return c
}

// Admin is a connection to the cluster's postgres database as its
// superuser, closed when the test ends.
func Admin(t testing.TB, c *lab.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Loop loads a workload folder (setup.sql, then workload.sql: one
// statement) into a new database of the cluster named after the folder
// and runs the statement in a loop from one connection, with jit and
// parallel workers off (the lab keeps PostgreSQL's defaults, and the
// workload is about its statement), until stop; runs counts the runs.
func Loop(t testing.TB, c *lab.Cluster, dir string, runs *atomic.Int64) (db string, stop func()) {
	t.Helper()
	ctx := context.Background()
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	db = strings.ReplaceAll(filepath.Base(dir), "-", "_")
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	admin.Exec(ctx, "CREATE DATABASE "+db)
	admin.Close(ctx)
	conn, err := pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, read("setup.sql"), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	q := strings.TrimSpace(read("workload.sql"))
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(wctx, c.DSN(db))
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(wctx, "SET jit = off")
		conn.Exec(wctx, "SET max_parallel_workers_per_gather = 0")
		for wctx.Err() == nil {
			if _, err := conn.Exec(wctx, q); err == nil {
				runs.Add(1)
			}
		}
	}()
	return db, func() { cancel(); wg.Wait() }
}

// LogSize is the size of the cluster's server log now: where a capture
// of what follows starts.
func LogSize(c *lab.Cluster) int64 {
	fi, err := os.Stat(filepath.Join(c.Dir, "server.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogSince writes the cluster's server log from byte from on to a file of
// the test's, once it holds at least n disconnection lines (the server
// writes a session's last lines a moment after the client has gone), and
// returns its path.
func LogSince(t testing.TB, c *lab.Cluster, from int64, n int) string {
	t.Helper()
	path := filepath.Join(c.Dir, "server.log")
	part := filepath.Join(t.TempDir(), "capture.log")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		b = b[min(int64(len(b)), from):]
		if bytes.Count(b, []byte("disconnection: ")) >= n || time.Now().After(deadline) {
			if err := os.WriteFile(part, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return part
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Clients runs n clients at once, each on its own connection to dsn,
// calling fn with it and its index, and returns when all are done.
func Clients(t testing.TB, dsn string, n int, fn func(ctx context.Context, conn *pgx.Conn, i int)) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ClientsConfig(t, cfg, n, fn)
}

// ClientsConfig is Clients with a connection configuration.
func ClientsConfig(t testing.TB, cfg *pgx.ConnConfig, n int, fn func(ctx context.Context, conn *pgx.Conn, i int)) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			fn(ctx, conn, i)
		}()
	}
	wg.Wait()
}

// CPUHeavy makes a test that saturates the machine's cores on purpose (a
// connection storm), or whose proof is a ratio of CPU times another such
// test would distort, the only one of them running until it ends, across
// the test binaries go test runs side by side: two at once measure each
// other. It waits for the others; the lock is released when the test
// ends, or earlier by release.
func CPUHeavy(t testing.TB) (release func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "pgmedic-cpu-heavy.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { f.Close() }) } // closing the file releases the lock
	t.Cleanup(release)
	return release
}

// OwnErrors are the ERROR and FATAL lines of the cluster's log from byte
// from on whose statement is pgmedic's (it carries envelope's tag): teams
// alert on such lines, and pgmedic reads the log as evidence, so it must
// leave none.
func OwnErrors(t testing.TB, c *lab.Cluster, from int64) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b[min(int(from), len(b)):]), "\n")
	var own []string
	for i, l := range lines {
		level := strings.Index(l, " ERROR:  ")
		if level < 0 {
			level = strings.Index(l, " FATAL:  ")
		}
		pid := l[strings.IndexByte(l, '[')+1:]
		if level < 0 || strings.IndexByte(pid, ']') < 0 {
			continue
		}
		pid = "[" + pid[:strings.IndexByte(pid, ']')+1]
		for _, next := range lines[i+1 : min(i+8, len(lines))] {
			if strings.Contains(next, pid) && strings.Contains(next, "STATEMENT:  ") {
				if strings.Contains(next, strings.TrimSpace(envelope.Tag)) {
					own = append(own, l+"\n    "+printable.Clip(next[strings.Index(next, "STATEMENT:  "):], 200))
				}
				break
			}
		}
	}
	return own
}

// NoOwnErrors fails the test when pgmedic's sessions left an ERROR or
// FATAL line in the cluster's log from byte from on.
func NoOwnErrors(t testing.TB, c *lab.Cluster, from int64) {
	t.Helper()
	if p := OwnErrorsProblem(t, c, from); p != "" {
		t.Error(p)
	}
}

// OwnErrorsProblem is what NoOwnErrors fails with ("" when pgmedic's
// sessions left no ERROR or FATAL line), for a test that judges later.
func OwnErrorsProblem(t testing.TB, c *lab.Cluster, from int64) string {
	t.Helper()
	own := OwnErrors(t, c, from)
	if len(own) == 0 {
		return ""
	}
	return fmt.Sprintf("pgmedic's sessions left %d ERROR or FATAL lines in the server's log:\n%s", len(own), strings.Join(own, "\n"))
}
