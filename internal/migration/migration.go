// Package migration reads a schema migration as PostgreSQL will run it:
// for each statement, the table lock it takes, whether it rewrites or
// scans the table under that lock, the lighter way to make the same
// change, and that lighter way written out as statements to rehearse.
//
// What each kind of schema change does is one row of one table (kinds,
// below); the rules' lock-queue finding and `rehearse migration` both
// read it.
package migration

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// kind is what one schema change does to its table: the lock, when it
// rewrites the table or reads all of it while holding that lock, and the
// lighter way to make the same change ("" when it is already light).
type kind struct {
	lock              string
	rewrites, scans   string
	lighter           string
	concurrentVersion bool // has a CONCURRENTLY form (Statement.Concurrently)
}

// kinds are the schema changes whose lock or cost matters, by command,
// and ALTER TABLE's by subcommand ("ALTER TABLE/SET NOT NULL"). The
// facts are PostgreSQL's documentation's (ALTER TABLE's notes, CREATE
// INDEX's "Building Indexes Concurrently"); they hold from 12 on.
var kinds = sync.OnceValue(func() map[string]kind {
	return map[string]kind{
		"CREATE INDEX": {lock: Share, scans: "builds the index from every row while writes wait",
			lighter: "build the index with CREATE INDEX CONCURRENTLY (it does not block writes; it cannot run inside a transaction block)", concurrentVersion: true},
		"REINDEX":    {lock: Share, scans: "rebuilds from every row while writes wait", lighter: "use REINDEX ... CONCURRENTLY (PostgreSQL 12 and later)", concurrentVersion: true},
		"DROP INDEX": {lock: AccessExclusive, lighter: "use DROP INDEX CONCURRENTLY", concurrentVersion: true},
		"REFRESH MATERIALIZED VIEW": {lock: AccessExclusive, scans: "runs the view's query while reads wait",
			lighter: "use REFRESH MATERIALIZED VIEW CONCURRENTLY (it needs a unique index on the view) so readers are not blocked"},
		"VACUUM FULL": {lock: AccessExclusive, rewrites: "always",
			lighter: "rebuild the table online with pg_repack or pg_squeeze instead of VACUUM FULL, which holds AccessExclusiveLock for the whole rewrite"},
		"CLUSTER": {lock: AccessExclusive, rewrites: "always",
			lighter: "rebuild the table online with pg_repack or pg_squeeze instead of CLUSTER, which holds AccessExclusiveLock for the whole rewrite"},
		"TRUNCATE":       {lock: AccessExclusive},
		"DROP TABLE":     {lock: AccessExclusive},
		"LOCK TABLE":     {lock: AccessExclusive},
		"CREATE TRIGGER": {lock: ShareRowExclusive},
		"DROP TRIGGER":   {lock: AccessExclusive},
		"VACUUM":         {lock: ShareUpdateExclusive},
		"ANALYZE":        {lock: ShareUpdateExclusive},

		"ALTER TABLE/ADD COLUMN": {lock: AccessExclusive, rewrites: "when its default is volatile (random(), clock_timestamp(), gen_random_uuid(), nextval()) or it is a stored generated or identity column",
			lighter: "adding a column with no default or a constant one changes only the catalog (PostgreSQL 11 and later); a volatile default rewrites the table: add the column without it, set the default, and backfill in batches"},
		"ALTER TABLE/ALTER COLUMN TYPE": {lock: AccessExclusive, rewrites: "unless the new type is binary-coercible from the old (varchar(n) to text or a wider varchar, numeric to a wider numeric)",
			lighter: "changing a column's type rewrites the table under AccessExclusiveLock: add a new column, backfill it in batches, then switch the application and drop the old one"},
		"ALTER TABLE/SET NOT NULL": {lock: AccessExclusive, scans: "reads every row to prove no NULL is left, while reads and writes wait",
			lighter: "add CHECK (col IS NOT NULL) NOT VALID, then VALIDATE CONSTRAINT (ShareUpdateExclusiveLock, reads and writes go on), then SET NOT NULL, which PostgreSQL 12 and later prove from the constraint without a scan"},
		"ALTER TABLE/ADD FOREIGN KEY": {lock: ShareRowExclusive, scans: "checks every row against the referenced table while writes wait (unless NOT VALID)",
			lighter: "add the constraint NOT VALID (a short lock, no scan), then VALIDATE CONSTRAINT in its own transaction (ShareUpdateExclusiveLock: reads and writes go on)"},
		"ALTER TABLE/ADD CHECK": {lock: AccessExclusive, scans: "checks every row while reads and writes wait (unless NOT VALID)",
			lighter: "add the constraint NOT VALID (a short lock, no scan), then VALIDATE CONSTRAINT in its own transaction (ShareUpdateExclusiveLock: reads and writes go on)"},
		"ALTER TABLE/ADD PRIMARY KEY": {lock: AccessExclusive, scans: "builds its unique index from every row while reads and writes wait",
			lighter: "build the unique index first with CREATE UNIQUE INDEX CONCURRENTLY, then ADD CONSTRAINT ... USING INDEX (a short lock)"},
		"ALTER TABLE/ADD UNIQUE": {lock: AccessExclusive, scans: "builds its unique index from every row while reads and writes wait",
			lighter: "build the unique index first with CREATE UNIQUE INDEX CONCURRENTLY, then ADD CONSTRAINT ... USING INDEX (a short lock)"},
		"ALTER TABLE/ADD EXCLUDE":               {lock: AccessExclusive, scans: "builds its index from every row while reads and writes wait"},
		"ALTER TABLE/VALIDATE CONSTRAINT":       {lock: ShareUpdateExclusive, scans: "reads every row, while reads and writes go on"},
		"ALTER TABLE/SET STATISTICS":            {lock: ShareUpdateExclusive},
		"ALTER TABLE/SET COLUMN OPTIONS":        {lock: ShareUpdateExclusive},
		"ALTER TABLE/CLUSTER ON":                {lock: ShareUpdateExclusive},
		"ALTER TABLE/ATTACH PARTITION":          {lock: ShareUpdateExclusive, scans: "reads the partition to prove its rows fit the bound, unless a CHECK constraint proves it"},
		"ALTER TABLE/SET STORAGE PARAMETERS":    {lock: ShareUpdateExclusive}, // fillfactor, autovacuum_*: most of them
		"ALTER TABLE/ENABLE OR DISABLE TRIGGER": {lock: ShareRowExclusive},
		"ALTER TABLE/DETACH PARTITION":          {lock: AccessExclusive, lighter: "use DETACH PARTITION ... CONCURRENTLY (PostgreSQL 14 and later)"},
	}
})

// actionOf is an ALTER TABLE subcommand's row; a subcommand the table
// does not name takes AccessExclusiveLock, PostgreSQL's default for ALTER
// TABLE.
func actionOf(k string) kind {
	if r, ok := kinds()["ALTER TABLE/"+k]; ok {
		return r
	}
	return kind{lock: AccessExclusive}
}

// rowsOf are the rows of a schema change: its command's, or each of its
// subcommands'.
func rowsOf(d *sqlparse.DDL) []kind {
	if d.Command != "ALTER TABLE" {
		return []kind{kinds()[d.Command]}
	}
	var out []kind
	for _, a := range d.Actions {
		out = append(out, actionOf(a.Kind))
	}
	return out
}

// Lighter is how to make the change holding a weaker lock, or holding it
// for less time: one sentence per subcommand that has a lighter form.
// Empty when the change is already as light as it gets.
func Lighter(d *sqlparse.DDL) []string {
	var out []string
	for i, r := range rowsOf(d) {
		if r.lighter == "" || (r.concurrentVersion && d.Concurrently) {
			continue
		}
		if d.Command == "ALTER TABLE" {
			a := d.Actions[i]
			if (a.Kind == "ADD FOREIGN KEY" || a.Kind == "ADD CHECK") && a.NotValid {
				continue
			}
			if a.Column != "" && strings.Contains(r.lighter, "col") {
				out = append(out, strings.ReplaceAll(r.lighter, "(col ", "("+sqlparse.QuoteIdent(a.Column)+" "))
				continue
			}
		}
		out = append(out, r.lighter)
	}
	return out
}

// Statement is one statement of a migration as read, before it runs.
type Statement struct {
	// N counts the file's statements from 1; Line is where it starts.
	N    int    `json:"n"`
	Line int    `json:"line"`
	SQL  string `json:"sql"`
	// What names the change ("ALTER TABLE ADD COLUMN", "CREATE INDEX",
	// "UPDATE", "BEGIN").
	What  string        `json:"what"`
	Table sqlparse.Name `json:"table"`
	// Lock is the table lock it takes ("" for none that the application
	// waits for); BlocksReads and BlocksWrites what that lock stops.
	Lock         string `json:"lock,omitempty"`
	BlocksReads  bool   `json:"blocks_reads,omitempty"`
	BlocksWrites bool   `json:"blocks_writes,omitempty"`
	// Rewrites and Scans say when it rewrites the table, or reads all
	// of it, while it holds the lock ("" when it does not).
	Rewrites string `json:"rewrites,omitempty"`
	Scans    string `json:"scans,omitempty"`
	// Also are the other tables it locks in the same mode (a foreign key's
	// referenced table): their writers wait too.
	Also []sqlparse.Name `json:"also,omitempty"`
	// Lighter are the lighter ways to make the change, in words.
	Lighter []string `json:"lighter,omitempty"`
	// Transaction is transaction control (BEGIN, COMMIT, ...): it takes
	// no lock itself, and keeps every lock the block took until it ends.
	Transaction bool `json:"transaction,omitempty"`
	// Unread says what it locks cannot be read from its text (a DO block,
	// a CALL): the rehearsal measures it.
	Unread bool `json:"unread,omitempty"`
	// Risky says the statement stops the application's reads or writes
	// while it holds its lock, or rewrites or scans under it.
	Risky bool `json:"risky"`
	// Kept says why its safe form keeps it as written although a
	// lighter way is known (the column's facts name a blocker), set by
	// SaferWith.
	Kept string `json:"kept,omitempty"`

	parsed *sqlparse.Statement
	ddl    *sqlparse.DDL
}

// Migration is a migration file, read.
type Migration struct {
	Name       string       `json:"name"`
	Statements []*Statement `json:"statements"`
}

// Read reads a migration script: the statements, cut by PostgreSQL's own
// parser, and what each does. A script that does not parse is an error
// that names the line.
func Read(name string, script []byte) (*Migration, error) {
	text := string(script)
	parts, err := sqlparse.Split(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s: no SQL statement in it", name)
	}
	m := &Migration{Name: name}
	from := 0
	for i, p := range parts {
		sql := strings.TrimSpace(dropLeadingComments(p))
		at := strings.Index(text[from:], sql)
		line := 1 + strings.Count(text[:from+max(at, 0)], "\n")
		if at >= 0 {
			from += at + len(sql)
		}
		st, err := sqlparse.Parse(sql)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: statement %d: %w", name, line, i+1, err)
		}
		m.Statements = append(m.Statements, describe(i+1, line, sql, st))
	}
	return m, nil
}

// dropLeadingComments cuts the comments before a statement's first word
// (the parser's split keeps them with the statement they precede).
func dropLeadingComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return s
			}
			s = s[i+2:]
		default:
			return s
		}
	}
}

// harmless are statements that take no lock an application's statement
// waits for (they create what nobody uses yet, or set the session).
var harmless = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"CreateStmt": true, "CreateFunctionStmt": true, "ViewStmt": true, "CommentStmt": true, "VariableSetStmt": true,
		"GrantStmt": true, "GrantRoleStmt": true, "CreateSeqStmt": true, "CreateSchemaStmt": true, "CreateEnumStmt": true, "CreateDomainStmt": true,
		"CompositeTypeStmt": true, "SelectStmt": true, "CreateExtensionStmt": true, "CreateTableAsStmt": true, "AlterSeqStmt": true}
})

// describe reads one statement.
func describe(n, line int, sql string, st *sqlparse.Statement) *Statement {
	s := &Statement{N: n, Line: line, SQL: sql, parsed: st}
	kind := st.Kind()
	switch {
	case kind == "TransactionStmt":
		s.What, s.Transaction = strings.ToUpper(strings.Fields(sql)[0]), true
		return s
	case kind == "InsertStmt" || kind == "UpdateStmt" || kind == "DeleteStmt" || kind == "MergeStmt":
		s.What = strings.TrimSuffix(strings.ToUpper(kind), "STMT")
		if rels := st.Relations(); len(rels) > 0 {
			s.Table = rels[0]
		}
		s.Lock = RowExclusive
		s.BlocksWrites = true // the rows it changes, until its transaction ends
		if kind != "InsertStmt" {
			s.Scans = "locks every row it changes until its transaction ends: writers of those rows wait"
			s.Lighter = []string{"change the rows in batches (a few thousand per transaction), so no row stays locked long"}
			s.Risky = true
		}
		return s
	}
	d := st.DDL()
	if d == nil {
		s.What = strings.ToUpper(strings.Fields(sql)[0])
		if !harmless()[kind] {
			// A DO block, a procedure call, a statement kinds does not
			// know: what it locks is seen when it runs, not read here.
			s.Unread = true
		}
		return s
	}
	s.ddl, s.Table = d, d.Table
	s.What = d.Command
	if d.Concurrently {
		s.What += " CONCURRENTLY"
	}
	var acts []string
	for _, a := range d.Actions {
		acts = append(acts, a.Kind)
		if a.References.Name != "" && !slices.Contains(s.Also, a.References) {
			s.Also = append(s.Also, a.References)
		}
	}
	if len(acts) > 0 {
		s.What += " " + strings.Join(acts, ", ")
	}
	s.Lock = Lock(d)
	s.BlocksReads, s.BlocksWrites = BlocksReads(s.Lock), BlocksWrites(s.Lock)
	for i, r := range rowsOf(d) {
		if d.Command == "ALTER TABLE" {
			a := d.Actions[i]
			if a.NotValid {
				r.scans = ""
			}
			if a.Kind == "ADD COLUMN" && !st.VolatileDefault() {
				r.rewrites = ""
			}
		}
		if r.rewrites != "" && s.Rewrites == "" {
			s.Rewrites = r.rewrites
		}
		if r.scans != "" && s.Scans == "" && !d.Concurrently {
			s.Scans = r.scans
		}
	}
	for _, l := range Lighter(d) {
		// A column with no default, or a constant or stable one, is added
		// in the catalog alone: its lighter form is for volatile defaults.
		if l == kinds()["ALTER TABLE/ADD COLUMN"].lighter && !st.VolatileDefault() {
			continue
		}
		s.Lighter = append(s.Lighter, l)
	}
	s.Risky = s.BlocksReads || s.BlocksWrites || s.Rewrites != "" || s.Scans != ""
	return s
}
