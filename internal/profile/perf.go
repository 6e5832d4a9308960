package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Perf is the perf binary, checked to be allowed to sample.
type Perf struct{ Path string }

// ErrUnavailable says perf cannot be used here; its message says what to
// install or which setting or capability is missing.
var ErrUnavailable = errors.New("perf is unavailable")

// FindPerf finds perf and checks that it may sample other processes: as
// root, or with kernel.perf_event_paranoid at 1 or below (a container may
// forbid perf_event_open altogether: a trial run tells).
func FindPerf(ctx context.Context) (*Perf, error) {
	path, err := exec.LookPath("perf")
	if err != nil {
		return nil, fmt.Errorf("%w: perf is not installed (apt-get install linux-perf)", ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 1 {
				return nil, fmt.Errorf("%w: kernel.perf_event_paranoid is %d, so perf may not sample other processes: run pgmedic as root, give it CAP_PERFMON, or sysctl -w kernel.perf_event_paranoid=1", ErrUnavailable, v)
			}
		}
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "stat", "-e", "cpu-clock", "--", "true")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: a trial perf stat failed (%s): in a container, allow perf_event_open (seccomp) and CAP_PERFMON", ErrUnavailable, lastLine(out.String(), err))
	}
	return &Perf{Path: path}, nil
}

func lastLine(s string, err error) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}

// record samples the processes' CPU for d with the cpu-clock software
// event (hardware counters are often missing in virtual machines) at freq
// samples a second, with call graphs from frame pointers, on
// CLOCK_MONOTONIC so samples can be matched with other observations. It
// calls started once perf is recording (its file has its header: perf
// takes from milliseconds to a second to start, longer on a busy
// machine) and returns the perf.data file, in dir.
func (p *Perf) record(ctx context.Context, dir string, pids []int, d time.Duration, freq int, started func()) (string, error) {
	if len(pids) == 0 {
		return "", errors.New("no process to profile")
	}
	data := filepath.Join(dir, "perf.data")
	ids := make([]string, len(pids))
	for i, pid := range pids {
		ids[i] = strconv.Itoa(pid)
	}
	args := []string{"record", "-q", "-e", "cpu-clock", "-F", strconv.Itoa(freq), "-g", "-k", "CLOCK_MONOTONIC",
		"-o", data, "-p", strings.Join(ids, ","), "--", "sleep", fmt.Sprintf("%.3f", d.Seconds())}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, p.Path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("perf record: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
			done <- err
		case <-time.After(5 * time.Millisecond):
			if fi, serr := os.Stat(data); serr == nil && fi.Size() > 0 {
				waiting = false
			}
		}
	}
	if started != nil {
		started()
	}
	if err = <-done; err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		// perf ends itself when every process it follows has exited:
		// what it wrote up to then is the profile.
		if fi, serr := os.Stat(data); serr == nil && fi.Size() > 0 {
			return data, nil
		}
		return "", fmt.Errorf("perf record -p %s: %s", strings.Join(ids, ","), lastLine(out.String(), err))
	}
	return data, nil
}

// script reads a perf.data file back as samples (perf script, streamed).
func (p *Perf) script(ctx context.Context, data string, fn func(Sample)) (ScriptStats, error) {
	cmd := exec.CommandContext(ctx, p.Path, "script", "-i", data, "-F", "comm,pid,tid,time,period,event,ip,sym,dso")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return ScriptStats{}, err
	}
	if err := cmd.Start(); err != nil {
		return ScriptStats{}, fmt.Errorf("perf script: %w", err)
	}
	st, rerr := ReadScript(out, fn)
	werr := cmd.Wait()
	if rerr != nil {
		return st, rerr
	}
	if werr != nil {
		return st, fmt.Errorf("perf script: %s", lastLine(stderr.String(), werr))
	}
	return st, nil
}
