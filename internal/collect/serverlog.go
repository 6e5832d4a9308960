package collect

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ServerLog is the end of the server's current log file, read over the
// connection.
type ServerLog struct {
	// Path is the file, relative to the data directory as the server
	// names it (log/postgresql-2026-11-23.json).
	Path string
	// Size is the file's size; Data is its last bytes from a line start.
	Size int64
	Data []byte
}

// serverLogChunk is what one pg_read_binary_file call reads: a few
// megabytes stay well inside statement_timeout.
const serverLogChunk = 4 << 20

// ReadServerLog reads the last maxBytes of the server's current log file:
// pg_current_logfile() names it (jsonlog, then csvlog, then stderr, the
// order in which they say most), else the newest file pg_ls_logdir()
// lists; pg_read_binary_file() reads it, in chunks. Reading files on the
// server is a privilege: a role without it gets a skip that names the
// GRANT, and check goes on without the log. The skip's Rule is "server
// log".
func ReadServerLog(ctx context.Context, q envelope.Conn, role string, maxBytes int64) (*ServerLog, *model.Skip) {
	skip := func(reason, fix string) (*ServerLog, *model.Skip) {
		return nil, &model.Skip{Rule: "server log", Reason: reason, Fix: fix}
	}
	r := "<pgmedic's role>"
	if role != "" {
		r = sqlparse.QuoteIdent(role)
	}
	orFile := " (or give the log with --log FILE)"
	var collector string
	if err := q.QueryRow(ctx, envelope.Tag+"SELECT current_setting('logging_collector')").Scan(&collector); err != nil {
		return skip("server log not read: "+envelope.Message(err), "give the log with --log FILE")
	}
	if collector != "on" {
		return skip("server log not read: logging_collector is off, so the server's log goes to its standard error (a journal, a container's log, pg_ctl -l)",
			"give that log with --log FILE (journalctl -u postgresql > pg.log, docker logs db > pg.log)")
	}
	file, err := currentLogFile(ctx, q)
	if err != nil {
		if denied(err) {
			return skip("server log not read: the role may not ask which file the server logs to ("+envelope.Message(err)+")",
				"GRANT pg_monitor TO "+r+";"+orFile)
		}
		return skip("server log not read: "+envelope.Message(err), "give the log with --log FILE")
	}
	if file == "" {
		return skip("server log not read: the log directory holds no file", "give the log with --log FILE")
	}
	var size int64
	if err := q.QueryRow(ctx, envelope.Tag+"SELECT size FROM pg_stat_file($1)", file).Scan(&size); err != nil {
		if denied(err) {
			return skip("server log "+file+" not read: the role may not read server files ("+envelope.Message(err)+")",
				"GRANT pg_read_server_files TO "+r+";"+orFile)
		}
		return skip("server log "+file+" not read: "+envelope.Message(err), "give the log with --log FILE")
	}
	start := max(0, size-maxBytes)
	out := &ServerLog{Path: file, Size: size}
	for off := start; off < size; off += serverLogChunk {
		var chunk []byte
		n := min(int64(serverLogChunk), size-off)
		if err := q.QueryRow(ctx, envelope.Tag+"SELECT pg_read_binary_file($1, $2, $3)", file, off, n).Scan(&chunk); err != nil {
			if denied(err) {
				return skip("server log "+file+" not read: the role may not read server files ("+envelope.Message(err)+")",
					"GRANT pg_read_server_files TO "+r+";"+orFile)
			}
			return skip("server log "+file+" not read: "+envelope.Message(err), "give the log with --log FILE")
		}
		out.Data = append(out.Data, chunk...)
		if int64(len(chunk)) < n {
			break // the file was rotated or truncated while being read
		}
	}
	if start > 0 {
		// The tail starts inside an entry: from the next line on.
		if i := strings.IndexByte(string(out.Data[:min(len(out.Data), 1<<20)]), '\n'); i >= 0 {
			out.Data = out.Data[i+1:]
		}
	}
	return out, nil
}

// currentLogFile names the file the server writes now, preferring the
// formats that say the most.
func currentLogFile(ctx context.Context, q envelope.Conn) (string, error) {
	for _, format := range []string{"jsonlog", "csvlog", "stderr"} {
		var file *string
		err := q.QueryRow(ctx, envelope.Tag+"SELECT pg_current_logfile($1)", format).Scan(&file)
		if err != nil && !denied(err) {
			// PostgreSQL before 15 does not know jsonlog: 22023
			// (invalid_parameter_value), "log format "jsonlog" is not
			// supported".
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "22023" {
				continue
			}
			return "", err
		}
		if err != nil {
			break // not allowed to ask: the directory listing may be
		}
		if file != nil && *file != "" {
			return *file, nil
		}
	}
	var dir string
	if err := q.QueryRow(ctx, envelope.Tag+"SELECT current_setting('log_directory')").Scan(&dir); err != nil {
		return "", err
	}
	var name *string
	err := q.QueryRow(ctx, envelope.Tag+"SELECT name FROM pg_ls_logdir() ORDER BY modification DESC, name DESC LIMIT 1").Scan(&name)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil
		}
		return "", err
	}
	if name == nil {
		return "", nil
	}
	return path.Join(dir, *name), nil
}

// denied says whether PostgreSQL refused for want of a privilege.
func denied(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

// String says what was read, for progress lines.
func (l *ServerLog) String() string {
	return fmt.Sprintf("%s (%d of %d bytes)", l.Path, len(l.Data), l.Size)
}
