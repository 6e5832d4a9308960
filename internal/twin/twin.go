// Package twin builds pgmedic's throwaway twin of a target database: the
// tables an experiment needs, their definitions and rows, copied into a
// lab cluster of the target's major version (or a scratch database the
// user names), where experiments may write, build indexes and run
// ANALYZE. Nothing is written to the target: its rows are read with COPY
// ... TO STDOUT inside one read-only repeatable-read transaction, so every
// table is copied as of the same moment.
package twin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// DefaultMaxBytes bounds what a twin copies (--twin-max-size).
const DefaultMaxBytes = 1 << 30

// DBName is the twin's database in a lab cluster.
const DBName = "pgmedic_twin"

// Options configure Build.
type Options struct {
	// MaxBytes bounds the bytes of the tables copied (their heaps, as the
	// target's catalog says); a set larger than that is copied as a
	// sample of every table, the same fraction of each.
	MaxBytes int64
	// CopyTimeout is the target's statement_timeout while its rows are
	// read; 10 minutes when zero.
	CopyTimeout time.Duration
	// DSN is a scratch database to use instead of a lab cluster
	// (--twin-dsn): a staging database, a branch, a thin clone. Its
	// tables of the same names are replaced.
	DSN string
	// Dir is where a lab cluster's files go; a new temporary directory,
	// readable only by its owner, when empty.
	Dir string
	// Keep leaves the lab cluster running (--keep-twin).
	Keep bool
	// DefinitionOnly are tables whose definition is enough (a lock
	// queue's reproduction needs the table, not its rows): no row of theirs
	// is read, so no lock on them is asked for on the target.
	DefinitionOnly map[model.RelRef]bool
	Log            func(format string, args ...any)
	// Major makes the lab cluster of another PostgreSQL major than the
	// target's (0: the target's): an upgrade's rehearsal.
	Major int
	// SetOnly gives the twin only the planner settings the target sets
	// (its configuration, not its binary's defaults): what an upgrade
	// carries over, so a default that changed between majors shows.
	SetOnly bool
	// Jobs is how many connections to the target read the rows at once
	// (check's --max-connections, less what the load rule keeps back),
	// each with a connection of its own to the twin; 1 or less is the
	// session alone. Dial opens one more read-only session on the target,
	// in pgmedic's envelope; without it the session copies alone.
	Jobs int
	Dial func(ctx context.Context) (conn *pgx.Conn, close func(), err error)
}

// Table is one table as the twin holds it.
type Table struct {
	Ref model.RelRef
	// Rows copied, and the bytes of COPY's binary stream that left the
	// target for them.
	Rows, Bytes int64
	// Fraction is the share of the target's rows copied: 1 for a full
	// copy, less for a sample; Empty says no row was copied at all (the
	// definition only).
	Fraction float64
	Empty    bool
	// Locked says why rows were wanted and none copied: the table was
	// behind a lock (a schema change queued on it), and pgmedic's read
	// gave up at its lock_timeout rather than join the queue.
	Locked string
}

// Twin is a built twin: a connection to its database and what it holds.
type Twin struct {
	Conn   *pgx.Conn
	Tables []Table
	// Server is the twin's server ("PostgreSQL 17.10, lab cluster").
	Server  string
	Seconds float64
	// Differs says how the twin's database sorts text unlike the
	// target's ("" when alike): its default collation could not be made
	// here.
	Differs string
	cluster *lab.Cluster
	keep    bool
	dsn     string
}

// Connect opens another session on the twin's database (for experiments
// that need concurrent workers), with the target's planner settings.
func (t *Twin) Connect(ctx context.Context) (*pgx.Conn, error) {
	return envelope.Dial(ctx, t.dsn, envelope.Work{AppName: envelope.AppName + " worker"})
}

// DSN is the twin's database, for sessions of pgmedic's own (a replay).
func (t *Twin) DSN() string { return t.dsn }

// Release closes the twin's own session, leaving its server up: a replay
// copies the twin's database for each run, which PostgreSQL allows only
// with no one connected to it.
func (t *Twin) Release(ctx context.Context) {
	if t.Conn != nil {
		t.Conn.Close(ctx)
		t.Conn = nil
	}
}

// Bytes is what left the target's server for the twin.
func (t *Twin) Bytes() int64 {
	var n int64
	for _, tb := range t.Tables {
		n += tb.Bytes
	}
	return n
}

// Fraction is the share of a table's rows the twin holds (0 when it does
// not hold the table).
func (t *Twin) Fraction(ref model.RelRef) float64 {
	if tb := t.find(ref); tb != nil {
		return tb.Fraction
	}
	return 0
}

// find is the table a reference names: a reference without a schema (as
// a statement writes it) matches by name.
func (t *Twin) find(ref model.RelRef) *Table {
	for i, tb := range t.Tables {
		if tb.Ref.Name == ref.Name && (ref.Schema == "" || tb.Ref.Schema == ref.Schema) {
			return &t.Tables[i]
		}
	}
	return nil
}

// Locked says why the twin holds no rows of a table it wanted them for
// (the table was behind a lock on the target), "" otherwise.
func (t *Twin) Locked(ref model.RelRef) string {
	if tb := t.find(ref); tb != nil {
		return tb.Locked
	}
	return ""
}

// Sampled says whether any table is a sample rather than a full copy.
func (t *Twin) Sampled() bool {
	for _, tb := range t.Tables {
		if tb.Fraction < 1 {
			return true
		}
	}
	return false
}

// Where says where an experiment on the twin ran, for a verification:
// "twin (PostgreSQL 17.10 lab cluster; full copy of public.orders,
// 200,000 rows)" or "... sample of 12% of public.events ...".
func (t *Twin) Where(ref model.RelRef) string {
	if t.Differs != "" {
		return strings.TrimSuffix(t.where(ref), ")") + "; text sorts unlike the target's: " + t.Differs + ")"
	}
	return t.where(ref)
}

func (t *Twin) where(ref model.RelRef) string {
	if tb := t.find(ref); tb != nil {
		what := "full copy"
		switch {
		case tb.Empty:
			return fmt.Sprintf("twin (%s; the definition of %s, no rows)", t.Server, name(tb.Ref))
		case tb.Fraction < 1:
			what = fmt.Sprintf("sample of %.0f%%", 100*tb.Fraction)
		}
		return fmt.Sprintf("twin (%s; %s of %s, %s rows)", t.Server, what, name(tb.Ref), printable.Count(float64(tb.Rows)))
	}
	return "twin (" + t.Server + ")"
}

// Summary is one line for the report: what was copied and what it cost.
func (t *Twin) Summary() string {
	var names []string
	for _, tb := range t.Tables {
		n := name(tb.Ref)
		switch {
		case tb.Locked != "":
			n += " (definition only: its rows were behind a lock)"
		case tb.Empty:
			n += " (definition only)"
		case tb.Fraction < 1:
			n += fmt.Sprintf(" (sample of %.0f%%)", 100*tb.Fraction)
		}
		names = append(names, n)
	}
	differs := ""
	if t.Differs != "" {
		differs = "; unlike the target, the twin has " + t.Differs
	}
	if len(names) == 0 {
		return fmt.Sprintf("twin on %s: no table copied (its experiments read only the catalogs) in %.1f s%s", t.Server, t.Seconds, differs)
	}
	return fmt.Sprintf("twin on %s: copied %s (%s rows, %s read from the target) in %.1f s%s", t.Server, strings.Join(names, ", "),
		printable.Count(float64(t.rows())), printable.KB(float64(t.Bytes())/1024), t.Seconds, differs)
}

func (t *Twin) rows() int64 {
	var n int64
	for _, tb := range t.Tables {
		n += tb.Rows
	}
	return n
}

// Close ends the twin: the lab cluster is stopped and its directory
// removed, unless it is to be kept.
func (t *Twin) Close(ctx context.Context) {
	if t.Conn != nil {
		t.Conn.Close(ctx)
	}
	if t.cluster != nil && !t.keep {
		t.cluster.Destroy(context.WithoutCancel(ctx))
	}
}

// Kept says where a kept twin is, for the user.
func (t *Twin) Kept() string {
	if t.cluster == nil || !t.keep {
		return ""
	}
	return fmt.Sprintf("the twin is kept: %s (remove it with pgmedic lab down --dir %s)", t.cluster.DSN(DBName), t.cluster.Dir)
}

// Build copies the tables into a new twin. target is pgmedic's session on
// the target; snap is its snapshot (the tables' sizes); major the target's
// major version. Tables that cannot be copied are left out, each with the
// reason in skipped; an error means there is no twin at all.
func Build(ctx context.Context, target *pgx.Conn, snap *model.Snapshot, refs []model.RelRef, o Options) (tw *Twin, skipped map[model.RelRef]string, err error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	started := time.Now()
	defs, total, skipped, err := defineAll(ctx, target, snap, refs, o.DefinitionOnly)
	if err != nil {
		return nil, skipped, err
	}
	fraction := 1.0
	maxBytes := o.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if total > maxBytes {
		fraction = float64(maxBytes) / float64(total)
	}
	built := &Twin{keep: o.Keep}
	// On any failure the half-built twin goes: its server stopped, its
	// files removed.
	defer func() {
		if err != nil {
			built.keep = false
			built.Close(ctx)
		}
	}()
	tw = built
	loc, err := readLocale(ctx, target, envelope.Tag)
	if err != nil {
		return nil, skipped, fmt.Errorf("reading the target's default collation: %s", envelope.Message(err))
	}
	if err := tw.open(ctx, snap, loc, o, logf); err != nil {
		return nil, skipped, err
	}
	if err := notTheTarget(ctx, target, tw.Conn); err != nil {
		return nil, skipped, err
	}
	if err := createTypes(ctx, tw.Conn, defs); err != nil {
		return nil, skipped, err
	}
	for _, d := range defs {
		for _, q := range d.create() {
			if _, err := tw.Conn.Exec(ctx, q); err != nil {
				return nil, skipped, fmt.Errorf("creating %s on the twin: %s", name(d.ref), envelope.Message(err))
			}
		}
	}
	if err := settings(ctx, target, tw.Conn, o.DSN == "", o.SetOnly); err != nil {
		logf("twin: %v", err)
	}
	logf("twin: copying %d tables (%s of heap%s) from the target in one read-only snapshot", len(defs),
		printable.KB(float64(total)/1024), sampleNote(fraction))
	writers, err := tw.copyRows(ctx, target, defs, fraction, snap, o, logf)
	defer closeAll(context.WithoutCancel(ctx), writers[1:])
	if err != nil {
		return nil, skipped, err
	}
	if err := tw.finish(ctx, writers, defs); err != nil {
		return nil, skipped, err
	}
	tw.Seconds = model.Round(time.Since(started).Seconds(), 1)
	logf("%s", tw.Summary())
	return tw, skipped, nil
}

// defineAll reads the definitions of the tables to copy, and the bytes of
// those whose rows are copied; a table the twin cannot hold is left out
// with the reason, and none at all is an error that names them.
func defineAll(ctx context.Context, target *pgx.Conn, snap *model.Snapshot, refs []model.RelRef, noRows map[model.RelRef]bool) ([]*definition, int64, map[model.RelRef]string, error) {
	skipped := map[model.RelRef]string{}
	var defs []*definition
	var total int64
	for _, r := range refs {
		t := snap.Table(r)
		if t == nil {
			// Not in the snapshot: its size could not be read (a lock
			// queue on it blocks pg_relation_size). The catalog still
			// names it without taking a lock.
			if t = lookup(ctx, target, r); t == nil {
				skipped[r] = "the table is not in the snapshot"
				continue
			}
		}
		d, why := define(ctx, target, t)
		if why != "" {
			skipped[r] = why
			continue
		}
		d.noRows = noRows[r]
		defs = append(defs, d)
		if !d.noRows {
			total += d.bytes
		}
	}
	if len(defs) == 0 && len(refs) > 0 {
		var whys []string
		for r, why := range skipped {
			whys = append(whys, name(r)+": "+why)
		}
		sort.Strings(whys)
		return nil, 0, skipped, fmt.Errorf("no table could be copied (%s)", strings.Join(whys, "; "))
	}
	return defs, total, skipped, nil
}

// finish builds what comes after the rows (constraints, indexes) and
// analyses each table.

// lookup finds a table in the target's catalog by name, without a lock.
func lookup(ctx context.Context, target *pgx.Conn, r model.RelRef) *model.Table {
	t := &model.Table{}
	err := target.QueryRow(ctx, envelope.Tag+`SELECT c.oid, n.nspname::text, c.relname::text, c.relkind = 'p'
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`, quote(r)).
		Scan(&t.OID, &t.Schema, &t.Name, &t.Partitioned)
	if err != nil {
		return nil
	}
	return t
}

func sampleNote(fraction float64) string {
	if fraction >= 1 {
		return ""
	}
	return fmt.Sprintf(", over the bound: a %.0f%% sample of each", 100*fraction)
}

// open starts the twin's server (a lab cluster of the target's major) or
// connects to the scratch database, and connects.
func (tw *Twin) open(ctx context.Context, snap *model.Snapshot, loc dbLocale, o Options, logf func(string, ...any)) error {
	dsn := o.DSN
	if dsn == "" {
		major := pgversion.Major(snap.Server.VersionNum)
		if o.Major != 0 {
			major = o.Major
		}
		logf("twin: starting a PostgreSQL %d lab cluster", major)
		c, err := lab.Create(ctx, lab.Options{Major: major, Dir: o.Dir, Log: logf})
		if err != nil {
			return fmt.Errorf("starting the twin's server: %w", err)
		}
		tw.cluster = c
		admin, err := envelope.Dial(ctx, c.DSN("postgres"), envelope.Work{})
		if err != nil {
			return fmt.Errorf("connecting to the twin's server: %w", err)
		}
		_, tw.Differs, err = createDatabase(ctx, admin, loc, major)
		admin.Close(ctx)
		if err != nil {
			return err
		}
		dsn = c.DSN(DBName)
		tw.Server = "PostgreSQL " + c.Server().Version + " lab cluster"
	}
	tw.dsn = dsn
	conn, err := envelope.Dial(ctx, dsn, envelope.Work{})
	if err != nil {
		// The DSN is not repeated: it may hold a password.
		return fmt.Errorf("connecting to the twin's database: %s", envelope.Message(err))
	}
	tw.Conn = conn
	if tw.Server == "" {
		var v string
		conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&v)
		tw.Server = "PostgreSQL " + v + ", --twin-dsn"
		if got, err := readLocale(ctx, conn, ""); err == nil && !got.same(loc) {
			tw.Differs = localeDiffers(loc, got, nil)
		}
	}
	if tw.Differs != "" {
		logf("twin: %s", tw.Differs)
	}
	return nil
}

// notTheTarget refuses a twin on the target's own server: the twin's
// tables of the same names are dropped and written, and its experiments
// load the server they run on. Two servers are told apart by when their
// postmaster started, to the microsecond.
func notTheTarget(ctx context.Context, target, twin *pgx.Conn) error {
	var a, b string
	if err := target.QueryRow(ctx, envelope.Tag+"SELECT pg_postmaster_start_time()::text").Scan(&a); err != nil {
		return fmt.Errorf("reading the target's start time: %s", envelope.Message(err))
	}
	if err := twin.QueryRow(ctx, "SELECT pg_postmaster_start_time()::text").Scan(&b); err != nil {
		return fmt.Errorf("reading the twin's start time: %s", envelope.Message(err))
	}
	if a == b {
		return errors.New("--twin-dsn points at the target's own server: the twin must be another server (a staging server, a branch, a thin clone), since its tables are replaced and written")
	}
	return nil
}

// lockedWhy is why the twin holds a table's definition only when it wanted
// its rows.
const lockedWhy = "an ACCESS EXCLUSIVE lock was held or queued on it (a schema change), and reading its rows would have queued behind a lock on it, so the twin holds its definition only, without its secondary indexes"

// errLocked is a read of the target that gave up at lock_timeout.
var errLocked = errors.New("reading the target: canceling statement due to lock timeout")

// pipe runs COPY TO on from and COPY FROM on to, streaming between them;
// it returns the bytes streamed and the rows written.
func pipe(ctx context.Context, from, to *pgx.Conn, out, in string) (int64, int64, error) {
	pr, pw := io.Pipe()
	counted := &counter{r: pr}
	done := make(chan error, 1)
	go func() {
		// COPY TO hands over each row as a write of its own, and a pipe
		// passes each write across to the reading goroutine before taking
		// the next: unbuffered, the copy went one row per goroutine
		// switch (590 MB took 36 s; pg_dump writes the same in 6 s).
		buf := bufio.NewWriterSize(pw, 256<<10)
		_, err := from.PgConn().CopyTo(ctx, buf, out)
		if err == nil {
			err = buf.Flush()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	tag, err := to.PgConn().CopyFrom(ctx, counted, in)
	if err != nil {
		pr.CloseWithError(err)
	}
	if rerr := <-done; rerr != nil {
		var pgErr *pgconn.PgError
		if errors.As(rerr, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			return counted.n, 0, errLocked
		}
		return counted.n, 0, fmt.Errorf("reading the target: %s", envelope.Message(rerr))
	}
	if err != nil {
		return counted.n, 0, fmt.Errorf("writing the twin: %s", envelope.Message(err))
	}
	return counted.n, tag.RowsAffected(), nil
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func name(r model.RelRef) string {
	if r.Schema == "" {
		return r.Name
	}
	return r.Schema + "." + r.Name
}

func quote(r model.RelRef) string { return sqlparse.QuoteQualified(r.Schema, r.Name) }

// Pool starts PgBouncer in transaction mode in front of the twin's lab
// cluster with size server connections, and returns a connector through
// it and the function that stops it. A twin on a scratch server
// (--twin-dsn) has no pool pgmedic may start.
func (t *Twin) Pool(ctx context.Context, size int) (connect func(context.Context) (*pgx.Conn, error), stop func(), err error) {
	if t.cluster == nil {
		return nil, nil, fmt.Errorf("the twin is a scratch server (--twin-dsn): pgmedic starts a pool only in front of its own lab cluster")
	}
	b, err := t.cluster.StartPgBouncer(ctx, lab.BouncerOptions{PoolSize: size, Mode: "transaction"})
	if err != nil {
		return nil, nil, err
	}
	dsn := b.DSN(t.cluster.Superuser, DBName)
	connect = func(ctx context.Context) (*pgx.Conn, error) {
		// A transaction-mode pool gives each transaction any server
		// connection: nothing prepared may outlive one.
		return envelope.Dial(ctx, dsn, envelope.Work{AppName: envelope.AppName + " worker", SimpleProtocol: true})
	}
	return connect, b.Stop, nil
}

// clientRole is the role a held-sessions replay connects as: an ordinary
// role, because the server's connection limits do not apply to
// superusers.
const clientRole = "pgmedic_clients"

// Admit makes a role on the twin's lab cluster that the server admits at
// most limit sessions of (CONNECTION LIMIT: past it, a connection is
// refused with SQLSTATE 53300, as max_connections refuses one), with the
// rights the replayed statements need on the twin's tables. It returns a
// connector as that role, one through a PgBouncer pool of it, and the
// function that drops the role. A scratch server's roles are not
// pgmedic's to make.
func (t *Twin) Admit(ctx context.Context, limit int) (connect func(context.Context) (*pgx.Conn, error),
	pool func(context.Context, int) (func(context.Context) (*pgx.Conn, error), func(), error), drop func(), err error) {
	if t.cluster == nil {
		return nil, nil, nil, fmt.Errorf("the twin is a scratch server (--twin-dsn): pgmedic makes a role of limited connections only on its own lab cluster")
	}
	return AdmitOn(ctx, t.cluster, t.Conn, DBName, limit)
}

// AdmitOn is Admit on database db of lab cluster c, the role made
// through admin (a superuser's session on db).
func AdmitOn(ctx context.Context, c *lab.Cluster, admin envelope.Conn, db string, limit int) (connect func(context.Context) (*pgx.Conn, error),
	pool func(context.Context, int) (func(context.Context) (*pgx.Conn, error), func(), error), drop func(), err error) {
	drop = func() {
		bg := context.WithoutCancel(ctx)
		admin.Exec(bg, envelope.Tag+"DROP OWNED BY "+clientRole)
		admin.Exec(bg, envelope.Tag+"DROP ROLE IF EXISTS "+clientRole)
	}
	drop() // one a run that died left behind
	grant := envelope.Tag + fmt.Sprintf(`CREATE ROLE %[1]s LOGIN CONNECTION LIMIT %[2]d;
DO $$DECLARE s text;
BEGIN
	FOR s IN SELECT quote_ident(nspname) FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%%' AND nspname <> 'information_schema' LOOP
		EXECUTE format('GRANT USAGE ON SCHEMA %%s TO %[1]s', s);
		EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %%s TO %[1]s', s);
		EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %%s TO %[1]s', s);
	END LOOP;
END$$`, clientRole, limit)
	if _, err := admin.Exec(ctx, grant); err != nil {
		drop()
		return nil, nil, nil, fmt.Errorf("making role %s on the twin: %w", clientRole, err)
	}
	dsn := c.UserDSN(clientRole, db)
	connect = func(ctx context.Context) (*pgx.Conn, error) {
		return envelope.Dial(ctx, dsn, envelope.Work{AppName: envelope.AppName + " worker"})
	}
	pool = func(ctx context.Context, size int) (func(context.Context) (*pgx.Conn, error), func(), error) {
		b, err := c.StartPgBouncer(ctx, lab.BouncerOptions{PoolSize: size, Mode: "transaction", Users: []string{clientRole}})
		if err != nil {
			return nil, nil, err
		}
		dsn := b.DSN(clientRole, db)
		return func(ctx context.Context) (*pgx.Conn, error) {
			return envelope.Dial(ctx, dsn, envelope.Work{AppName: envelope.AppName + " worker", SimpleProtocol: true})
		}, b.Stop, nil
	}
	return connect, pool, drop, nil
}
