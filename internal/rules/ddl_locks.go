package rules

import (
	"strings"

	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ddlFix is how to make the change without queueing the table's traffic
// behind it: a short lock_timeout with retries always (a schema change
// that waits for a lock makes every later statement on the table wait
// behind it, even those its holder would not block), and the form of
// the statement that takes a weaker lock or holds it for less time, when
// there is one.
func ddlFix(d *sqlparse.DDL, text string) (summary, sql string) {
	ways := migration.Lighter(d)
	table := sqlparse.QuoteQualified(d.Table.Schema, d.Table.Name)
	if d.Table.Name == "" {
		table = "the_table"
	}
	summary = "a waiting schema change heads the queue: every later statement on the table that conflicts with its lock waits behind it, even those the blocker would let through. Run it with a short lock_timeout and retry with backoff until it gets the lock; do not run schema changes while long transactions are open on the table (or end the blocker if it must go)"
	if len(ways) > 0 {
		summary += "; " + strings.Join(ways, "; ")
	}
	stmt := strings.TrimRight(strings.TrimSpace(text), ";")
	if stmt == "" {
		stmt = "-- the schema change on " + table
	}
	sql = "SET lock_timeout = '2s';  -- give up after 2 s instead of queueing the table's traffic\n" +
		stmt + ";  -- on SQLSTATE 55P03 (lock_not_available) wait a little and run it again"
	return summary, sql
}
