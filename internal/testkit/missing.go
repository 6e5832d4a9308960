package testkit

import (
	"os"
	"testing"
)

// InCI says whether the tests run under CI=true, where nothing may be
// skipped: CI installs every dependency, so a missing one is a broken CI
// set-up, not a machine that lacks something.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing handles a dependency a test cannot run without (PostgreSQL,
// HypoPG, python3-asyncpg, chromium): it skips with one message, the same
// in every package, or under CI=true fails with it.
func Missing(t testing.TB, what string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("missing dependency under CI=true: %s: %v", what, err)
	}
	t.Skipf("skipped: %s is missing (%v); CI=true makes this a failure", what, err)
}
