package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// armedBy runs pgmedic in-process with args under a WithInterrupts
// context and says whether the run installed the signal handler.
func armedBy(t *testing.T, args ...string) bool {
	t.Helper()
	ctx, stop := WithInterrupts(context.Background())
	defer stop()
	Run(ctx, args, strings.NewReader(""), io.Discard, io.Discard)
	in := ctx.Value(interruptsKey{}).(*interrupts)
	return in.ch != nil
}

// A plan file explained to stdout has nothing for Ctrl-C to clean up and
// installs no handler; with --out (a file half written) or --dsn
// (statements to cancel) it does, and so does every other command.
func TestInterruptsArmedWhereThereIsCleanUp(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, []byte(`[{"Plan": {"Node Type": "Result", "Total Cost": 0.01, "Plan Rows": 1, "Plan Width": 4}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report.txt")
	for _, c := range []struct {
		args  []string
		armed bool
	}{
		{[]string{"explain", file}, false},
		{[]string{"explain", "--format", "json", file}, false},
		{[]string{"explain", "--out", out, file}, true},
		{[]string{"explain", "--dsn", "postgres://127.0.0.1:1/none?connect_timeout=1", "--query", "SELECT 1"}, true},
		{[]string{"logs", "--format", "json", file}, true},
		{[]string{"lab", "list"}, true},
	} {
		if got := armedBy(t, c.args...); got != c.armed {
			t.Errorf("pgmedic %s: handler installed %v, want %v", strings.Join(c.args, " "), got, c.armed)
		}
	}
}

// Whole processes: Ctrl-C ends a quiet explain at once (the default
// action: nothing was installed), while a command that armed its handler
// turns the same signal into its one "interrupted" line and exit 2.
func TestInterruptOfAQuietExplain(t *testing.T) {
	bin := testkit.Pgmedic(t)
	for _, c := range []struct {
		args     []string
		signaled bool
	}{
		{[]string{"explain", "-"}, true},
		{[]string{"explain", "--out", filepath.Join(t.TempDir(), "r.txt"), "-"}, false},
	} {
		cmd := exec.Command(bin, c.args...)
		stdin, err := cmd.StdinPipe() // held open: explain waits on it
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The handler, when there is one, is installed before explain
		// reads stdin; a signal sent before Go's runtime is up would
		// kill either process, so wait until it blocks reading.
		waitBlockedOnRead(t, cmd.Process.Pid)
		cmd.Process.Signal(os.Interrupt)
		testkit.Ended(t, cmd, 60*time.Second, "pgmedic "+strings.Join(c.args, " ")+" after Ctrl-C")
		stdin.Close()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if c.signaled {
			if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
				t.Errorf("pgmedic %s: %v (stderr %q), want it ended by SIGINT", strings.Join(c.args, " "), cmd.ProcessState, stderr.String())
			}
			continue
		}
		if ws.Signaled() || ws.ExitStatus() != ExitInput || !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("pgmedic %s: %v, stderr %q; want exit 2 and the interrupted line", strings.Join(c.args, " "), cmd.ProcessState, stderr.String())
		}
	}
}

// waitBlockedOnRead polls /proc until one of the process's threads sleeps
// in read(2) on its stdin (syscall 0 on amd64, 63 on arm64; fd 0).
func waitBlockedOnRead(t *testing.T, pid int) {
	t.Helper()
	testkit.WaitUntil(t, 60*time.Second, fmt.Sprintf("process %d to block reading its stdin", pid), func() bool {
		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "syscall"))
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) > 1 && (f[0] == "0" || f[0] == "63") && f[1] == "0x0" {
				return true
			}
		}
		return false
	})
}
