package rules

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// ddlLock is the table lock PostgreSQL takes for a schema change (the
// ALTER TABLE, CREATE INDEX, ... pages of its documentation): the
// strongest of its subcommands'. pg_locks says which lock a waiting
// session asked for; this is for when it could not be read.
func ddlLock(d *sqlparse.DDL) string {
	const (
		accessExclusive = "AccessExclusiveLock"
		shareUpdate     = "ShareUpdateExclusiveLock"
		shareRow        = "ShareRowExclusiveLock"
	)
	switch d.Command {
	case "CREATE INDEX", "REINDEX":
		if d.Concurrently {
			return shareUpdate
		}
		return "ShareLock"
	case "DROP INDEX":
		if d.Concurrently {
			return shareUpdate
		}
		return accessExclusive
	case "VACUUM", "ANALYZE":
		return shareUpdate
	case "REFRESH MATERIALIZED VIEW":
		if d.Concurrently {
			return "ExclusiveLock"
		}
		return accessExclusive
	case "CREATE TRIGGER":
		return shareRow
	case "LOCK TABLE":
		if d.LockMode != "" {
			return d.LockMode
		}
		return accessExclusive
	case "ALTER TABLE":
		rank := map[string]int{shareUpdate: 1, shareRow: 2, accessExclusive: 3}
		mode := ""
		for _, a := range d.Actions {
			m := accessExclusive
			switch a.Kind {
			case "VALIDATE CONSTRAINT", "SET STATISTICS", "SET COLUMN OPTIONS", "CLUSTER ON", "ATTACH PARTITION":
				m = shareUpdate
			case "SET STORAGE PARAMETERS":
				m = shareUpdate // fillfactor, autovacuum_*: most of them
			case "ADD FOREIGN KEY", "ENABLE OR DISABLE TRIGGER":
				m = shareRow
			}
			if rank[m] > rank[mode] {
				mode = m
			}
		}
		if mode == "" {
			mode = accessExclusive
		}
		return mode
	}
	return accessExclusive // DROP TABLE, TRUNCATE, VACUUM FULL, CLUSTER
}

// blocksReads says whether a lock mode conflicts with the AccessShareLock
// every SELECT takes: only AccessExclusiveLock does.
func blocksReads(mode string) bool { return mode == "AccessExclusiveLock" }

// ddlFix is how to make the change without queueing the table's traffic
// behind it: a short lock_timeout with retries always (a schema change
// that waits for a lock makes every later statement on the table wait
// behind it, even those its holder would not block), and the form of
// the statement that takes a weaker lock or holds it for less time, when
// there is one.
func ddlFix(d *sqlparse.DDL, text string) (summary, sql string) {
	var ways []string
	add := func(s string) { ways = append(ways, s) }
	table := sqlparse.QuoteQualified(d.Table.Schema, d.Table.Name)
	if d.Table.Name == "" {
		table = "the_table"
	}
	switch d.Command {
	case "CREATE INDEX":
		if !d.Concurrently {
			add("build the index with CREATE INDEX CONCURRENTLY (it does not block writes; it cannot run inside a transaction block)")
		}
	case "REINDEX":
		if !d.Concurrently {
			add("use REINDEX ... CONCURRENTLY (PostgreSQL 12 and later)")
		}
	case "DROP INDEX":
		if !d.Concurrently {
			add("use DROP INDEX CONCURRENTLY")
		}
	case "VACUUM FULL", "CLUSTER":
		add("rebuild the table online with pg_repack or pg_squeeze instead of " + d.Command + ", which holds AccessExclusiveLock for the whole rewrite")
	case "REFRESH MATERIALIZED VIEW":
		if !d.Concurrently {
			add("use REFRESH MATERIALIZED VIEW CONCURRENTLY (it needs a unique index on the view) so readers are not blocked")
		}
	case "ALTER TABLE":
		for _, a := range d.Actions {
			col := sqlparse.QuoteIdent(a.Column)
			switch a.Kind {
			case "ALTER COLUMN TYPE":
				add(fmt.Sprintf("changing the type of %s rewrites the table under AccessExclusiveLock: add a new column, backfill it in batches, then switch the application and drop the old one", col))
			case "SET NOT NULL":
				add(fmt.Sprintf("add CHECK (%s IS NOT NULL) NOT VALID, then VALIDATE CONSTRAINT (ShareUpdateExclusiveLock, reads and writes go on), then SET NOT NULL, which PostgreSQL 12 and later prove from the constraint without a scan", col))
			case "ADD FOREIGN KEY", "ADD CHECK":
				if !a.NotValid {
					add("add the constraint NOT VALID (a short lock, no scan), then VALIDATE CONSTRAINT in its own transaction (ShareUpdateExclusiveLock: reads and writes go on)")
				}
			case "ADD PRIMARY KEY", "ADD UNIQUE":
				add("build the unique index first with CREATE UNIQUE INDEX CONCURRENTLY, then ADD CONSTRAINT ... USING INDEX (a short lock)")
			case "ADD COLUMN":
				add("adding a column with no default or a constant one changes only the catalog (PostgreSQL 11 and later); a volatile default rewrites the table: add the column without it and backfill in batches")
			}
		}
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
