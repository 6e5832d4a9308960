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
// each backend got while it looked busy. ok is false when the pid is not
// a PostgreSQL process here (another host, another pid namespace).
func ProcCPU(pid int) (ms float64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
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
