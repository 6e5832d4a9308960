package testkit

import (
	"os/exec"
	"testing"
	"time"
)

// WaitUntil polls cond every 20 ms until it holds, and fails the test
// when it still does not after limit: tests decide on what they can see,
// not on how long a loaded machine usually takes.
func WaitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ended waits for a started cmd to exit; when it has not after limit, it
// kills it and fails the test with what it was waiting for.
func Ended(t testing.TB, cmd *exec.Cmd, limit time.Duration, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: still running after %s", what, limit)
	}
}
