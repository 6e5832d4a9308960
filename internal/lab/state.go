package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Phases of Create, recorded in state.json as they begin.
const (
	PhaseInitdb   = "initdb"
	PhaseStarting = "starting"
	PhaseRunning  = "running"
)

// save writes state.json atomically (a temporary file renamed over it),
// so a kill at any moment leaves the old state or the new, never half.
func (c *Cluster) save() error {
	b, _ := json.MarshalIndent(c, "", "  ")
	// Written whole or not at all: a kill between the two steps leaves
	// the previous state, never half a file.
	tmp := filepath.Join(c.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing the lab state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.Dir, stateFile)); err != nil {
		return fmt.Errorf("writing the lab state: %w", err)
	}
	return nil
}

// ErrNoCluster says a directory holds no lab cluster at all.
var ErrNoCluster = errors.New("no lab cluster")

// Load reads the cluster recorded in dir, complete or half-made. A
// directory pgmedic created always holds state.json (it is written before
// initdb); an empty directory is reported as an empty half-made cluster,
// since that is what a kill right after creating it leaves.
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		if entries, rerr := os.ReadDir(dir); rerr == nil && len(entries) == 0 {
			c := &Cluster{Dir: dir}
			c.owner, err = serverOwner()
			return c, err
		}
		return nil, fmt.Errorf("%w in %s: start one with `pgmedic lab up`", ErrNoCluster, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the lab state: %w", err)
	}
	var c Cluster
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("lab state %s is corrupt (%v): remove the directory", filepath.Join(dir, stateFile), err)
	}
	if abs, aerr := filepath.Abs(dir); aerr == nil {
		c.Dir = abs
	}
	if c.owner, err = serverOwner(); err != nil {
		return nil, err
	}
	if c.Standby != nil {
		c.Standby.owner = c.owner
	}
	if c.Port == 0 {
		c.Port = c.pidFilePort()
	}
	return &c, nil
}

// Complete says Create finished: the cluster is usable.
func (c *Cluster) Complete() bool {
	return c.Phase == PhaseRunning || (c.Phase == "" && c.Version != "")
}

// Describe says in words what state the cluster is in, for lab status.
func (c *Cluster) Describe() string {
	running := c.Running()
	switch {
	case c.Complete() && running:
		return "running"
	case c.Complete():
		return "stopped"
	case running:
		return fmt.Sprintf("half-made (pgmedic stopped during %q) with its server running", c.Phase)
	case c.Phase == "":
		return "half-made (empty)"
	}
	return fmt.Sprintf("half-made (pgmedic stopped during %q), no server running", c.Phase)
}

// Adopt finishes a cluster whose server is running but whose creator died
// before recording it as running (killed after the server started).
func (c *Cluster) Adopt() error {
	if !c.Running() {
		return errors.New("the server is not running")
	}
	if c.Port == 0 {
		return errors.New("the server's port is not recorded")
	}
	if c.BinDir == "" {
		bin, err := FindBinDir("")
		if err != nil {
			return err
		}
		c.BinDir = bin
	}
	if s, ok := inspect(c.BinDir, c.Source); ok && c.Major == 0 {
		c.Major, c.JIT, c.HypoPG = s.Major, s.JIT, s.HypoPG
	}
	v, err := c.serverVersion()
	if err != nil {
		return err
	}
	c.Version, c.Phase, c.OwnerPID, c.Throwaway = v, PhaseRunning, os.Getpid(), false
	if c.Superuser == "" {
		c.Superuser = "postgres"
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	return c.save()
}

// pidFilePort reads the port from postmaster.pid (its fourth line).
func (c *Cluster) pidFilePort() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0
	}
	port, _ := strconv.Atoi(strings.TrimSpace(lines[3]))
	return port
}

// ownsProcess says whether pid is alive and works in this cluster's data
// directory: pg_ctl starts the postmaster with "-D <data>", and initdb
// takes it as an argument too. A pid reused by an unrelated process after
// a machine restart is not ours and is never signalled.
func (c *Cluster) ownsProcess(pid int) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return true // no /proc: trust postmaster.pid, as pg_ctl does
	}
	return bytes.Contains(cmdline, []byte(c.dataDir()))
}

// stragglers are the processes still working in this cluster's directory
// without pgmedic: an initdb whose pgmedic was killed, a postmaster or
// backend of a server whose pid file is gone.
func (c *Cluster) stragglers() []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []int
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(c.dataDir())) {
			continue
		}
		name := filepath.Base(string(bytes.SplitN(b, []byte{0}, 2)[0]))
		switch name {
		// sh: pg_ctl starts the server through "sh -c exec postgres ...",
		// and a shell caught between the two becomes a postmaster later.
		case "initdb", "postgres", "pg_ctl", "sh":
			out = append(out, pid)
		}
	}
	return out
}

// killStragglers ends what stragglers finds: initdb and pg_ctl outright,
// a postmaster with SIGQUIT (immediate shutdown; the cluster is being
// thrown away), and waits for them to go.
func (c *Cluster) killStragglers() {
	pids := c.stragglers()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGQUIT)
	}
	for _, pid := range pids {
		if !c.WaitGone(pid, 5*time.Second) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			c.WaitGone(pid, 5*time.Second)
		}
	}
}

// Leftovers lists the throwaway clusters in the system temp directory
// whose pgmedic process is gone (killed before it could clean up).
func Leftovers() []*Cluster {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgmedic-lab-*"))
	sort.Strings(dirs)
	var out []*Cluster
	for _, d := range dirs {
		c, err := Load(d)
		if err != nil || c.Phase == "" && c.OwnerPID == 0 && !isEmptyDir(d) {
			continue
		}
		if c.OwnerPID != 0 && alive(c.OwnerPID) && c.OwnerPID != os.Getpid() {
			continue // its pgmedic still runs and will clean up
		}
		if !c.Throwaway && c.Phase != "" {
			continue
		}
		out = append(out, c)
	}
	return out
}

func isEmptyDir(d string) bool {
	entries, err := os.ReadDir(d)
	return err == nil && len(entries) == 0
}
