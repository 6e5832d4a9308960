package lab

import (
	"context"
	"testing"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// ForTest starts a throwaway cluster for one test and destroys it when the
// test ends. Without PostgreSQL's server binaries the test is skipped, or
// fails under CI=true (testkit.Missing).
func ForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if _, err := FindBinDir(opts.BinDir); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	c, err := Create(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy(context.Background()) })
	return c
}
