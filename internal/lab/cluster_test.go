package lab

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := FindBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
}

func TestClusterLifecycle(t *testing.T) {
	needPostgres(t)
	ctx := context.Background()
	c, err := Create(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, pid := c.Dir, c.PostmasterPID()
	if pid == 0 || !c.Running() {
		t.Fatalf("server not running after Create (pid %d)", pid)
	}
	conn, err := pgx.Connect(ctx, c.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	var preload, jit, listen string
	if err := conn.QueryRow(ctx, "SELECT current_setting('shared_preload_libraries'), current_setting('jit'), current_setting('listen_addresses')").Scan(&preload, &jit, &listen); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if !strings.Contains(preload, "pg_stat_statements") || !strings.Contains(preload, "auto_explain") {
		t.Errorf("shared_preload_libraries = %q", preload)
	}
	if jit != "on" {
		t.Errorf("the lab must keep JIT at PostgreSQL's default (on), got %q", jit)
	}
	if listen != "127.0.0.1" {
		t.Errorf("listen_addresses = %q", listen)
	}
	loaded, err := Load(dir)
	if err != nil || loaded.Port != c.Port {
		t.Fatalf("Load: %+v, %v", loaded, err)
	}
	if err := loaded.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.WaitGone(pid, 10*time.Second) {
		t.Errorf("postmaster %d still alive after Destroy", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Destroy", dir)
	}
}

func TestFailedSetupLeavesNothing(t *testing.T) {
	needPostgres(t)
	var dir string
	var pid int
	_, err := Create(context.Background(), Options{afterStart: func(c *Cluster) error {
		dir, pid = c.Dir, c.PostmasterPID()
		return errors.New("injected failure")
	}})
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("err = %v", err)
	}
	if pid == 0 {
		t.Fatal("the hook ran before the server started")
	}
	if !(&Cluster{}).WaitGone(pid, 10*time.Second) {
		t.Errorf("postmaster %d left running", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind", dir)
	}
}

func TestCreateRefusesNonEmptyDir(t *testing.T) {
	needPostgres(t)
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious.txt")
	os.WriteFile(keep, []byte("x"), 0o644)
	if _, err := Create(context.Background(), Options{Dir: dir}); err == nil {
		t.Fatal("created a cluster in a non-empty directory")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("user file removed: %v", err)
	}
}

func TestMissingBinaries(t *testing.T) {
	_, err := FindBinDir(t.TempDir())
	if !errors.Is(err, ErrNoPostgres) || !strings.Contains(err.Error(), "apt-get install postgresql-15") {
		t.Fatalf("err = %v", err)
	}
}

// TestInterruptLeavesNoOrphan runs `pgmedic lab run` as a real process,
// interrupts it while the scenario runs, and checks that the server and its
// directory are gone.
func TestInterruptLeavesNoOrphan(t *testing.T) {
	needPostgres(t)
	bin := pgmedicBinary(t)
	cmd := exec.Command(bin, "lab", "run", "jit-oltp", "--dir", filepath.Join(t.TempDir(), "none"))
	// The cluster is the one pgmedic names on stderr: other packages'
	// tests make lab clusters in the same temporary directory meanwhile.
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderrText strings.Builder
	named := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			stderrText.WriteString(line + "\n")
			mu.Unlock()
			const mark = "throwaway lab cluster in "
			if i := strings.Index(line, mark); i >= 0 {
				select {
				case named <- strings.Fields(line[i+len(mark):])[0]:
				default:
				}
			}
		}
	}()
	// Wait for the throwaway cluster to be up.
	var dir string
	var pid int
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && pid == 0 {
		if dir == "" {
			select {
			case dir = <-named:
			default:
			}
		}
		if dir != "" {
			pid = (&Cluster{Dir: dir}).PostmasterPID()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pid == 0 {
		cmd.Process.Kill()
		t.Fatal("the lab cluster never came up")
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	// stderr is read to its end (the process exits) before it is waited for.
	select {
	case <-read:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-read
		t.Errorf("pgmedic did not end within 60 s of Ctrl-C")
	}
	testkit.Ended(t, cmd, 60*time.Second, "pgmedic after Ctrl-C")
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("an interrupted run exits 2, got %d", code)
	}
	mu.Lock()
	got := stderrText.String()
	mu.Unlock()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "interrupted") || strings.Contains(got, "context canceled") || len(lines) > 2 {
		t.Errorf("stderr after Ctrl-C should be the throwaway line and one 'interrupted' line, got:\n%s", got)
	}
	if !(&Cluster{}).WaitGone(pid, 10*time.Second) {
		t.Errorf("postmaster %d orphaned", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind", dir)
	}
}
