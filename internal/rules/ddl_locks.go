package rules

import (
	"strings"

	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ddlFix is how to make the change without queueing the table's traffic
// behind it, as SQL to paste: the statement's safe form (migration.Safer:
// CONCURRENTLY where there is one, NOT VALID then VALIDATE, a new column
// backfilled in batches), each step that takes a lock the application
// waits for under a short lock_timeout with retries (a schema change that
// waits for a lock makes every later statement on the table wait behind
// it, even those its holder would not block). A CONCURRENTLY step gets
// no lock_timeout: its lock blocks no read or write, and a concurrent
// build cancelled by the timeout would leave an invalid index behind.
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
		return summary, "-- the schema change on " + table + ", under SET lock_timeout = '2s', retried on SQLSTATE 55P03"
	}
	var lines []string
	for _, st := range saferSteps(stmt) {
		q := strings.TrimRight(strings.TrimSpace(st.SQL), ";")
		switch {
		case st.Retry:
			lines = append(lines, "SET lock_timeout = '2s';  -- give up after 2 s instead of queueing the table's traffic",
				q+";  -- on SQLSTATE 55P03 (lock_not_available) wait a little and run it again")
		case st.Batches:
			lines = append(lines, q+";  -- a batch: run it again until it updates no row")
		default:
			lines = append(lines, q+";")
		}
	}
	return summary, strings.Join(lines, "\n")
}

// saferSteps is a statement's safe form, or the statement as written
// (with its lock_timeout and retries) when it has none or cannot be read.
func saferSteps(stmt string) []migration.Step {
	m, err := migration.Read("the sampled statement", []byte(stmt))
	if err != nil || len(m.Statements) != 1 {
		return []migration.Step{{SQL: stmt, Retry: true, Written: true}}
	}
	steps := migration.Safer(m.Statements[0], false)
	if len(steps) == 0 {
		return []migration.Step{{SQL: stmt, Retry: true, Written: true}}
	}
	return steps
}
