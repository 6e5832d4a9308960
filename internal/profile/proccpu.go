package profile

import (
	"bytes"
	"os"
	"strconv"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat
// (sysconf(_SC_CLK_TCK)), 100 on every Linux pgmedic runs on.
const clockTicks = 100

// ProcCPU reads how much CPU a process has used, in milliseconds, from
// /proc: for a server on this machine, the measure of how much of a core
// each backend got while it looked busy, and whether a backend waiting
// for its client did anything at all. ok is false when the pid is not a
// PostgreSQL process here (another host, another pid namespace).
//
// /proc/<pid>/stat counts in clock ticks (10 ms): a backend sending rows
// to a slow reader uses a few milliseconds a second, which ticks round to
// nothing. The scheduler's own count (/proc/<pid>/schedstat, in
// nanoseconds) is read instead where the kernel keeps it.
func ProcCPU(pid int) (ms float64, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, false
	}
	ms, ok = parseProcStat(b)
	if !ok {
		return 0, false
	}
	if sb, err := os.ReadFile(dir + "/schedstat"); err == nil {
		if ns, ok := parseSchedstat(sb); ok {
			return ns / 1e6, true
		}
	}
	return ms, true
}

// parseSchedstat reads the first field of /proc/<pid>/schedstat: the
// time the task has run on a CPU, in nanoseconds.
func parseSchedstat(b []byte) (float64, bool) {
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0, false
	}
	ns, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return 0, false
	}
	return float64(ns), true
}

// parseProcStat reads utime + stime of one /proc/<pid>/stat line, whose
// command is "postgres" (the name in parentheses may hold spaces, so the
// fields are counted from the last parenthesis).
func parseProcStat(b []byte) (float64, bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open || string(b[open+1:end]) != "postgres" {
		return 0, false
	}
	f := bytes.Fields(b[end+1:])
	// After the command: state(0) ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime(11) stime(12).
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(u+s) * 1000 / clockTicks, true
}
