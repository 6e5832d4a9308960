// Package labtest gives tests a throwaway lab cluster. It lives apart from
// lab so that pgmedic's binary does not link the test helpers.
package labtest

import (
	"context"
	"testing"

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
