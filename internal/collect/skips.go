package collect

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// skipFor describes a source that could not be read, always with a fix: a
// skipped entry without one leaves the user to guess what to grant.
func skipFor(s *model.Snapshot, what string, err error) model.Skip {
	msg := envelope.Message(err)
	return model.Skip{Reason: what + ": " + msg, Fix: fixFor(s.User, msg)}
}

// fixFor turns PostgreSQL's complaint into the statement that removes it,
// for pgmedic's role.
func fixFor(role, msg string) string {
	r := "<pgmedic's role>"
	if role != "" {
		r = sqlparse.QuoteIdent(role)
	}
	switch {
	case strings.Contains(msg, "permission denied for schema "):
		schema := lastWord(msg, "permission denied for schema ")
		return "GRANT USAGE ON SCHEMA " + schema + " TO " + r + "; GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + r +
			"; (EXPLAIN needs to read the tables' definitions; or run pgmedic as their owner)"
	case strings.Contains(msg, "permission denied for table "), strings.Contains(msg, "permission denied for relation "),
		strings.Contains(msg, "permission denied for view "):
		for _, p := range []string{"permission denied for table ", "permission denied for relation ", "permission denied for view "} {
			if strings.Contains(msg, p) {
				return "GRANT SELECT ON " + lastWord(msg, p) + " TO " + r + ";"
			}
		}
	case strings.Contains(msg, "permission denied for function "):
		return "GRANT EXECUTE ON FUNCTION " + lastWord(msg, "permission denied for function ") + " TO " + r + "; (or GRANT pg_monitor TO " + r + ";)"
	case strings.Contains(msg, "permission denied"), strings.Contains(msg, "must be superuser"), strings.Contains(msg, "insufficient privilege"):
		return "GRANT pg_monitor TO " + r + ";"
	case strings.Contains(msg, "statement timeout"):
		return "raise --statement-timeout: the catalogs are large or the server is busy"
	case strings.Contains(msg, "lock timeout"):
		return "retry once the DDL holding the lock has finished (pgmedic waits at most 100ms for a lock, so it never queues behind your workload)"
	case strings.Contains(msg, "does not exist"):
		return "the object changed while pgmedic read it (concurrent DDL): run check again"
	}
	return "check the server log for this error; with GRANT pg_monitor TO " + r + "; pgmedic can read every catalog it uses"
}

// planFix is fixFor for a statement pgmedic could not EXPLAIN. EXPLAIN
// checks the privileges the statement itself needs: for an UPDATE, DELETE,
// INSERT or MERGE that is the right to write the table, which a monitoring
// role should not get; the fix says so instead of granting SELECT it may
// already have.
func planFix(role, msg, command string) string {
	switch command {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
		if strings.Contains(msg, "permission denied for table ") {
			table := lastWord(msg, "permission denied for table ")
			r := "<pgmedic's role>"
			if role != "" {
				r = sqlparse.QuoteIdent(role)
			}
			return fmt.Sprintf("EXPLAIN of an %s checks the %s privilege on %s (pgmedic only plans it; nothing runs): GRANT %s ON %s TO %s; or leave it, and only this statement's index advice is lost",
				command, command, table, command, table, r)
		}
	}
	return fixFor(role, msg)
}

// lastWord is the object name after prefix in msg ("...schema app").
func lastWord(msg, prefix string) string {
	rest := msg[strings.Index(msg, prefix)+len(prefix):]
	if f := strings.Fields(rest); len(f) > 0 {
		return strings.Trim(f[0], `"`)
	}
	return rest
}
