// Package labtest gives tests a throwaway lab cluster. It lives apart from
// lab so that pgmedic's binary does not link the test helpers.
package labtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
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
