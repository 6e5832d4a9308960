package lab

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Remove()
	os.Exit(code)
}

// pgmedicBinary is the binary the tests kill.
func pgmedicBinary(t *testing.T) string { return testkit.Pgmedic(t) }

// labDir is a directory the postgres account can reach, for `--dir`.
func labDir(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "pgmedic-recovery-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(parent, 0o755)
	t.Cleanup(func() { os.RemoveAll(parent) })
	return filepath.Join(parent, "lab")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pgmedic(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(pgmedicBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// assertNothingLeft checks that no process works in dir and dir is gone.
func assertNothingLeft(t *testing.T, dir string) {
	t.Helper()
	c := &Cluster{Dir: dir}
	if pids := c.stragglers(); len(pids) > 0 {
		t.Errorf("processes still working in %s: %v", dir, pids)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists", dir)
	}
}

// kill -9 of `lab up` at each step of Create: lab status names what is
// left, lab down removes it (server, initdb and directory).
func TestKill9DuringLabUp(t *testing.T) {
	needPostgres(t)
	for _, step := range []struct {
		name string
		// reached says the step is under way.
		reached func(dir string) bool
	}{
		{"initdb", func(dir string) bool {
			_, err := os.Stat(filepath.Join(dir, "data", "base"))
			return err == nil
		}},
		{"server starting", func(dir string) bool {
			c, err := Load(dir)
			return err == nil && c.Phase == PhaseStarting
		}},
	} {
		t.Run(step.name, func(t *testing.T) {
			dir := labDir(t)
			cmd := exec.Command(pgmedicBinary(t), "lab", "up", "--dir", dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, step.name, func() bool { return step.reached(dir) })
			cmd.Process.Kill() // SIGKILL: no cleanup runs
			cmd.Wait()
			code, out := pgmedic(t, nil, "lab", "status", "--dir", dir)
			if code != 0 || !strings.Contains(out, dir) || strings.Contains(out, "no lab cluster") {
				t.Fatalf("lab status after kill -9 during %s: exit %d\n%s", step.name, code, out)
			}
			t.Logf("status: %s", strings.TrimSpace(out))
			code, out = pgmedic(t, nil, "lab", "down", "--dir", dir)
			if code != 0 {
				t.Fatalf("lab down: exit %d\n%s", code, out)
			}
			assertNothingLeft(t, dir)
		})
	}
}

// kill -9 once the server runs: lab up adopts the server (or finds it
// complete), and it serves connections.
func TestLabUpAdoptsServerOfKilledPgmedic(t *testing.T) {
	needPostgres(t)
	dir := labDir(t)
	cmd := exec.Command(pgmedicBinary(t), "lab", "up", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server", func() bool {
		c, err := Load(dir)
		return err == nil && c.Phase == PhaseStarting && c.Running()
	})
	cmd.Process.Kill()
	cmd.Wait()
	code, out := pgmedic(t, nil, "lab", "up", "--dir", dir)
	if code != 0 && !strings.Contains(out, "already running") {
		t.Fatalf("lab up after kill -9: exit %d\n%s", code, out)
	}
	code, out = pgmedic(t, nil, "lab", "status", "--dir", dir)
	if code != 0 || !strings.Contains(out, "lab cluster running") || !strings.Contains(out, "postgres://") {
		t.Fatalf("lab status: exit %d\n%s", code, out)
	}
	if code, out = pgmedic(t, nil, "lab", "down", "--dir", dir); code != 0 {
		t.Fatalf("lab down: %d %s", code, out)
	}
	assertNothingLeft(t, dir)
}

// A throwaway cluster says where it is, and survives a kill -9 of its
// pgmedic only as a leftover that lab status lists and lab down removes.
func TestKill9LeavesFindableThrowaway(t *testing.T) {
	needPostgres(t)
	tmp, err := os.MkdirTemp("", "pgmedic-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(tmp, 0o755)
	defer os.RemoveAll(tmp)
	env := []string{"TMPDIR=" + tmp}
	cmd := exec.Command(pgmedicBinary(t), "lab", "run", "healthy", "--dir", filepath.Join(tmp, "none"))
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, "throwaway lab cluster in ") {
		cmd.Process.Kill()
		t.Fatalf("first stderr line %q does not name the throwaway directory", line)
	}
	dir := strings.Fields(strings.SplitN(line, "throwaway lab cluster in ", 2)[1])[0]
	waitFor(t, "the throwaway server", func() bool {
		c, err := Load(dir)
		return err == nil && c.Running()
	})
	cmd.Process.Kill()
	cmd.Wait()
	code, out := pgmedic(t, env, "lab", "status", "--dir", filepath.Join(tmp, "none"))
	if code != 0 || !strings.Contains(out, "leftover throwaway cluster in "+dir) {
		t.Fatalf("lab status does not list the leftover: exit %d\n%s", code, out)
	}
	if code, out = pgmedic(t, env, "lab", "down", "--leftovers"); code != 0 || !strings.Contains(out, dir) {
		t.Fatalf("lab down --leftovers: exit %d\n%s", code, out)
	}
	assertNothingLeft(t, dir)
}
