// Package logs reads PostgreSQL's server logs (every format of the formats
// table in formats.go: stderr with any log_line_prefix, csvlog, jsonlog,
// syslog, the cloud and operator exports, PgBouncer's own; plain or gzip;
// large files in parallel ranges where the format allows) into entries, leaves pgmedic's own sessions out, and
// aggregates the rest into a Summary: statements by fingerprint with their
// durations, auto_explain plans, errors by SQLSTATE, connections, lock
// waits, temporary files, checkpoints and autovacuum per table. The rules
// judge the summary's counts (model.LogEvents) and plans; diagnose runs
// them.
package logs

import (
	"sync"
	"time"
)

// Entry is one log message, with what its prefix or its csv/json columns
// said about the session.
type Entry struct {
	Time     time.Time
	PID      int
	User     string
	Database string
	App      string
	Client   string
	// Session is the session's identifier (%c in log_line_prefix,
	// session_id in csvlog and jsonlog): the backend's start time and
	// pid in hex, which tells apart two sessions that had the same pid.
	Session  string
	SQLState string
	// Level is LOG, ERROR, FATAL, PANIC, WARNING, NOTICE, ...
	Level   string
	Message string
	// Detail, Hint, Context and Statement are the lines PostgreSQL adds
	// to a message (separate lines of the same process in stderr logs,
	// columns in csv and json logs).
	Detail, Hint, Context, Statement string
	// Source is the program that wrote a line that is not PostgreSQL's
	// own (PgBouncer); "" for PostgreSQL.
	Source Format
}

// detailLevels are the stderr lines that belong to the message before
// them from the same process.
var detailLevels = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"DETAIL": true, "HINT": true, "CONTEXT": true, "STATEMENT": true, "QUERY": true, "LOCATION": true}
})

// attach adds a DETAIL/HINT/... line to the entry it belongs to.
func (e *Entry) attach(level, text string) {
	switch level {
	case "DETAIL":
		e.Detail = join(e.Detail, text)
	case "HINT":
		e.Hint = join(e.Hint, text)
	case "CONTEXT":
		e.Context = join(e.Context, text)
	case "STATEMENT", "QUERY":
		e.Statement = join(e.Statement, text)
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}
