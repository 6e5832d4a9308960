package testkit

import (
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Process is a program a test started: its stderr can be read while it
// runs, and it is killed when the test ends if it still runs.
type Process struct {
	Cmd *exec.Cmd
	mu  sync.Mutex
	out strings.Builder
}

// Start starts exe with args.
func Start(t testing.TB, exe string, args ...string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(exe, args...)}
	p.Cmd.Stderr = p
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			p.Cmd.Process.Kill()
			p.Cmd.Wait()
		}
	})
	return p
}

func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// String is what the process wrote to stderr so far.
func (p *Process) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Stop ends the process with SIGTERM, as a service manager does, and
// returns how it exited.
func (p *Process) Stop() error {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	return p.Cmd.Wait()
}
