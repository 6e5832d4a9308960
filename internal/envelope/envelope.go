// Package envelope opens pgmedic's own database session and keeps it inside the
// safety envelope: pgmedic runs against production databases and must never
// become the next incident.
//
// The envelope, applied right after connecting and before any other query:
//   - application_name = pgmedic, so DBAs can see and cancel it;
//   - jit = off, so none of pgmedic's catalog reads pays for LLVM compilation
//     (the very incident it diagnoses);
//   - statement_timeout, lock_timeout and idle_in_transaction_session_timeout,
//     so nothing it runs can hold locks or run away;
//   - default_transaction_read_only = on, so a mistake cannot write.
//
// The settings are applied with SET rather than as startup parameters on
// purpose: pg_settings.reset_val then still shows the value the server would
// give a session without pgmedic's overrides, which is what the application
// sees and what the rules need.
package envelope

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
)

// Tag is prefixed to every statement pgmedic sends, so its own statements can
// be told apart (and left out) in pg_stat_statements, which keeps comments
// in the query text it stores.
const Tag = "/* pgmedic */ "

// Options set the envelope's limits.
type Options struct {
	StatementTimeout time.Duration // default 5s
	LockTimeout      time.Duration // default 100ms
	IdleInTxTimeout  time.Duration // default 30s
	ConnectTimeout   time.Duration // default 10s
	// Database, when set, replaces the DSN's database: watch reads an
	// incident's database with the credentials it was given.
	Database string
}

// withDefaults fills the timeouts left at zero.
func (o Options) withDefaults() Options {
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 100 * time.Millisecond
	}
	if o.IdleInTxTimeout <= 0 {
		o.IdleInTxTimeout = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	return o
}

// Target is the server and database a session is connected to (model.Target).
type Target = model.Target

// Session is pgmedic's single connection to a target.
type Session struct {
	Conn    *pgx.Conn
	Target  Target
	Options Options
	// StatsUntracked says pg_stat_statements records none of this
	// session's statements (pg_stat_statements.track = none took), and
	// LogQuiet that the server's log keeps none of its failures
	// (log_min_messages = panic took).
	StatsUntracked, LogQuiet bool
}

// ConnectError is a connection failure explained for a person: what failed,
// against which target, and how to fix it. The CLI prints it as one line.
type ConnectError struct {
	Target Target
	Cause  string
	Fix    string
	Err    error
}

// Error is the one line the user sees: what failed and how to fix it.
func (e *ConnectError) Error() string {
	msg := fmt.Sprintf("cannot connect to %s: %s", e.Target, e.Cause)
	if e.Target.Host == "?" {
		msg = "cannot connect: " + e.Cause // the connection string did not parse
	}
	if e.Fix != "" {
		msg += ": " + e.Fix
	}
	return msg
}

func (e *ConnectError) Unwrap() error { return e.Err }

// answerWait bounds how long pgmedic waits for the first byte of the
// server's reply once the TCP connection is up. PostgreSQL answers the
// opening SSLRequest (or startup packet) as soon as the postmaster has
// forked a backend, in milliseconds even on a loaded server; a port that
// stays silent is some other service. connect_timeout in the DSN, when
// given, is used instead.
const answerWait = 750 * time.Millisecond

// firstAnswerWait is answerWait, or the DSN's connect_timeout when it
// gives one.
func firstAnswerWait(connectTimeout time.Duration) time.Duration {
	if connectTimeout > 0 {
		return connectTimeout
	}
	return answerWait
}

// Connect opens a session from a DSN (URL or key=value; empty means libpq
// environment variables, .pgpass and PGSERVICE, as pgx resolves them).
func Connect(ctx context.Context, dsn string, opts Options) (*Session, error) {
	opts = opts.withDefaults()
	cfg, facts, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if opts.Database != "" {
		cfg.Database = opts.Database
	}
	target := Target{Host: cfg.Host, Port: cfg.Port, Database: cfg.Database, User: cfg.User}
	wait := firstAnswerWait(cfg.ConnectTimeout)
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > opts.ConnectTimeout {
		cfg.ConnectTimeout = opts.ConnectTimeout
	}
	cfg.RuntimeParams["application_name"] = AppName
	// pgmedic sends each statement once; the simple protocol avoids leaving
	// prepared statements behind on the server.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	// On Ctrl-C (a cancelled context) send PostgreSQL's cancel request for
	// the statement in flight instead of only dropping the socket: a backend
	// whose client vanished goes on working until it next writes to it,
	// which for a table copy is the whole copy.
	cancelOnDone(&cfg.Config)
	probe := &dialProbe{wait: wait}
	probe.wrap(&cfg.Config)

	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(target, err, facts, probe)
	}
	s := &Session{Conn: conn, Target: target, Options: opts}
	envelope := []string{
		// pgmedic's own statements kept out of pg_stat_statements for
		// this session, where its role may (a superuser; from 15 a role
		// granted SET ON PARAMETER pg_stat_statements.track): otherwise
		// its catalog reads, its PREPAREs and, under track = all, the
		// statements inside its PL/pgSQL blocks take the view's slots
		// from the application's and show beside them in the next
		// check. Tried inside a block that traps the refusal, so that a
		// role without the right leaves no ERROR in the server's log;
		// Session.StatsUntracked says whether it took.
		untrack,
		"SET jit = off",
		fmt.Sprintf("SET statement_timeout = %d", opts.StatementTimeout.Milliseconds()),
		fmt.Sprintf("SET lock_timeout = %d", opts.LockTimeout.Milliseconds()),
		fmt.Sprintf("SET idle_in_transaction_session_timeout = %d", opts.IdleInTxTimeout.Milliseconds()),
		"SET default_transaction_read_only = on",
	}
	for _, q := range envelope {
		if _, err := conn.Exec(ctx, Tag+q); err != nil {
			conn.Close(ctx)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &ConnectError{Target: target, Cause: "could not apply pgmedic's session limits (" + err.Error() + ")", Err: err}
		}
	}
	var ver, track, logMin string
	var num int
	if err := conn.QueryRow(ctx, Tag+"SELECT current_setting('server_version'), current_setting('server_version_num')::int, coalesce(current_setting('pg_stat_statements.track', true), ''), current_setting('log_min_messages')").Scan(&ver, &num, &track, &logMin); err != nil {
		conn.Close(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnectError{Target: target, Cause: "the server does not answer like PostgreSQL (" + err.Error() + ")", Err: err}
	}
	s.Target.ServerVersion, s.Target.ServerVersionNum = ver, num
	s.StatsUntracked, s.LogQuiet = track == "none", logMin == "panic"
	return s, nil
}

// untrack stops pg_stat_statements from recording the session's
// statements, where the role may set pg_stat_statements.track; a refusal
// is trapped (no ERROR in the server's log) and the session goes on
// tracked.
//
// The same block keeps the session's own failures out of the server's
// log where the role may (log_min_messages, likewise a superuser's or a
// granted role's): pgmedic runs on production servers whose teams alert
// on ERROR lines, and what fails of its own (an experiment past its
// statement_timeout, a read behind a migration's lock) is said in its
// report instead. Session.LogQuiet says whether it took; without it
// pgmedic avoids and traps the failures it can foresee.
const untrack = "DO $pgmedic$BEGIN " +
	"BEGIN SET " + Tag + "pg_stat_statements.track = none; EXCEPTION WHEN OTHERS THEN NULL; END; " +
	"BEGIN SET " + Tag + "log_min_messages = panic; EXCEPTION WHEN OTHERS THEN NULL; END; END$pgmedic$"

// parseDSN checks and parses a connection string without connecting. Its
// errors are ConnectErrors that hold no part of a password.
func parseDSN(dsn string) (*pgx.ConnConfig, dsnFacts, error) {
	facts := inspectDSN(dsn)
	unknown := Target{Host: "?", Database: "?", User: "?"}
	if facts.problem != nil {
		return nil, facts, &ConnectError{Target: unknown, Cause: "invalid connection string", Fix: facts.problem.Error(), Err: facts.problem}
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, facts, &ConnectError{Target: unknown,
			Cause: "invalid connection string (" + facts.parseErrorText(err) + ")",
			Fix:   "use postgres://user@host:port/dbname or host=... dbname=... key=value pairs", Err: err}
	}
	return cfg, facts, nil
}

// dialProbe records whether the TCP (or socket) connection was made and
// whether the server ever answered on it, so a silent port can be told from
// an unreachable host.
type dialProbe struct {
	wait     time.Duration
	dialed   atomic.Bool
	answered atomic.Bool
	// silent is set when a connection got no byte within wait; pgx's
	// next attempt (without TLS, after sslmode=prefer's TLS try) would
	// only wait as long again, so it is not made.
	silent atomic.Bool
}

// errSilent stops pgx's fallback attempts to a port that never answered.
var errSilent = errors.New("the port did not answer the first attempt")

// wrap makes pgx dial through the probe, which sees whether the port
// answered at all.
func (p *dialProbe) wrap(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p.silent.Load() {
			return nil, errSilent
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		p.dialed.Store(true)
		return &firstAnswer{Conn: c, probe: p}, nil
	}
}

// firstAnswer puts a deadline on the server's first reply only; after that
// pgx's own deadlines and the statement_timeout govern the session.
type firstAnswer struct {
	net.Conn
	probe *dialProbe
	seen  bool
}

// Read waits at most answerWait for the server's first byte.
func (c *firstAnswer) Read(b []byte) (int, error) {
	if c.seen {
		return c.Conn.Read(b)
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.probe.wait))
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.seen = true
		c.probe.answered.Store(true)
		_ = c.Conn.SetReadDeadline(time.Time{})
	} else if isTimeout(err) {
		c.probe.silent.Store(true)
	}
	return n, err
}

// Close ends the session.
func (s *Session) Close() {
	if s != nil && s.Conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.Conn.Close(ctx)
	}
}

// classify turns a pgx connection error into one actionable sentence. No
// part of the connection string's secrets survives into it.
func classify(t Target, err error, facts dsnFacts, probe *dialProbe) error {
	ce := &ConnectError{Target: t, Err: err}
	var pgErr *pgconn.PgError
	var dnsErr *net.DNSError
	addr := fmt.Sprintf("%s:%d", t.Host, t.Port)
	switch {
	case errors.As(err, &pgErr):
		switch pgErr.Code {
		case "28P01":
			ce.Cause = fmt.Sprintf("password authentication failed for user %q", t.User)
			ce.Fix = "check the password (PGPASSWORD, ~/.pgpass or the DSN)"
		case "28000":
			ce.Cause = pgErr.Message
			ce.Fix = "check the user name and the server's pg_hba.conf entry for this host"
		case "3D000":
			ce.Cause = pgErr.Message
			ce.Fix = "check the database name (PGDATABASE or the DSN); `psql -l` lists them"
		case "53300":
			ce.Cause = "the server has no free connection slots (" + pgErr.Message + ")"
			ce.Fix = "retry later, or use a superuser-reserved slot; this itself is a finding: see connection-pressure"
		case "57P03":
			ce.Cause = "the server is starting up or shutting down (" + pgErr.Message + ")"
			ce.Fix = "retry in a moment"
		default:
			ce.Cause = fmt.Sprintf("server refused the connection: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		}
	case errors.As(err, &dnsErr):
		ce.Cause = fmt.Sprintf("unknown host %q", t.Host)
		ce.Fix = "check the host name (PGHOST or the DSN)"
	case errors.Is(err, syscall.ECONNREFUSED):
		ce.Cause = "connection refused"
		ce.Fix = "is PostgreSQL running and listening on that address and port? check PGHOST/PGPORT or the DSN"
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		ce.Cause = "no server socket at that path"
		ce.Fix = "is PostgreSQL running? check PGHOST or use host=127.0.0.1"
	case errors.Is(err, context.Canceled):
		return err
	case probe != nil && probe.silent.Load() && !probe.answered.Load():
		ce.Cause = fmt.Sprintf("%s accepted the connection but did not answer the PostgreSQL protocol within %s", addr, probe.wait)
		ce.Fix = "is this port a PostgreSQL server? (for a PostgreSQL server that is this slow to answer, add connect_timeout=SECONDS to the DSN)"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		ce.Cause = "timed out"
		ce.Fix = "check the host, port and firewall, or raise connect_timeout"
	case strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), "SASL"):
		ce.Cause = "authentication failed (" + lastPart(err, facts) + ")"
		ce.Fix = "supply the password with PGPASSWORD, ~/.pgpass or the DSN"
	case strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "x509"):
		ce.Cause = "TLS negotiation failed (" + lastPart(err, facts) + ")"
		ce.Fix = "check sslmode and the server certificate"
	case probe != nil && probe.answered.Load():
		ce.Cause = fmt.Sprintf("%s answered, but not in the PostgreSQL protocol (%s)", addr, lastPart(err, facts))
		ce.Fix = "check that the port belongs to a PostgreSQL server"
	default:
		ce.Cause = "the server did not answer as PostgreSQL (" + lastPart(err, facts) + ")"
		ce.Fix = "check that the port belongs to a PostgreSQL server"
	}
	return ce
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// lastPart keeps the innermost cause of a pgx error chain, which is the part
// that says what happened; the outer parts repeat the target.
func lastPart(err error, facts dsnFacts) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	if clean, ok := facts.scrub(msg); ok {
		return clean
	}
	return "details withheld: they would show part of the password"
}

// Settings are the envelope's session settings as a person reads them,
// for the report's header.
func (s *Session) Settings() []string {
	out := []string{"application_name = pgmedic", "jit = off",
		"statement_timeout = " + s.Options.StatementTimeout.String(),
		"lock_timeout = " + s.Options.LockTimeout.String(),
		"idle_in_transaction_session_timeout = " + s.Options.IdleInTxTimeout.String(),
		"default_transaction_read_only = on", "experiments in transactions that are rolled back"}
	if s.StatsUntracked {
		out = append(out, "pg_stat_statements.track = none (its statements stay out of the view)")
	}
	if s.LogQuiet {
		out = append(out, "log_min_messages = panic (its own failures are in this report, not the server's log)")
	}
	return out
}

// AppName is the application_name of every pgmedic session.
const AppName = "pgmedic"

// Own says whether a statement text, as a catalog view or a server log
// shows it, is pgmedic's: it starts with Tag (after white space), or it
// names one of the statements pgmedic prepares. pg_stat_statements and
// auto_explain keep the text the client sent, comments included, but a
// prepared statement may reach them as the text inside PREPARE, which is
// why the prepared names count too. What pgmedic runs is never evidence
// of what the application does.
func Own(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	// The tag anywhere: the statements inside pgmedic's PL/pgSQL blocks
	// carry it after the word PL/pgSQL puts before them (PERFORM becomes
	// "SELECT /* pgmedic */ set_config(...)"), and pg_stat_statements
	// records them so under track = all.
	if strings.Contains(t, strings.TrimSpace(Tag)) {
		return true
	}
	// One scan for the common case, a text that names nothing of pgmedic's.
	if !strings.Contains(t, "pgmedic_") {
		return false
	}
	for _, name := range ownPrepared {
		if strings.Contains(t, name) {
			return true
		}
	}
	return false
}

// OwnSession says whether a session is pgmedic's, by its
// application_name or by the statement it runs.
func OwnSession(app, query string) bool {
	return app == AppName || Own(query)
}

// ownPrepared are the prefixes of the names pgmedic prepares statements
// under (pgmedic_verify, pgmedic_plan, pgmedic_copy_stmt, ...), as PREPARE
// and EXECUTE spell them.
var ownPrepared = []string{"PREPARE pgmedic_", "EXECUTE pgmedic_", "prepare pgmedic_", "execute pgmedic_"}

// Conn is pgmedic's one connection seam: everything it asks of a
// PostgreSQL (or PgBouncer admin) connection. *pgx.Conn is one; the
// tests' recorder and replayer (testkit) are others, so collect, verify
// and profile run from recorded transcripts without a server.
type Conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Explain runs EXPLAIN (options, FORMAT JSON) on target, tagged, and parses
// what the server printed. It runs quietly (quietExplain): a statement
// that cannot be planned or run (a privilege pgmedic's role lacks, a
// relation gone since pg_stat_statements saw it) leaves no ERROR line in
// the server's log. The server's error comes back as a *pgconn.PgError,
// so a caller can tell a statement_timeout (SQLSTATE 57014, never trapped)
// from other failures; reading the output fails with a wrapped error.
func Explain(ctx context.Context, q Conn, options, target string) (*plan.Explain, error) {
	opts := "FORMAT JSON"
	if options != "" {
		opts = options + ", FORMAT JSON"
	}
	out, err := quietExplain(ctx, q, "EXPLAIN ("+opts+") "+target)
	if err != nil {
		return nil, err
	}
	ex, err := plan.ParseJSON([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("reading the EXPLAIN output: %w", err)
	}
	return ex, nil
}

// Access modes for RolledBack.
const (
	ReadOnly  = "READ ONLY"
	ReadWrite = "READ WRITE" // for temporary objects only (verify's copies)
	// Snapshot reads every statement of the transaction as of its start
	// (the twin's copy of several tables, consistent with each other).
	Snapshot = "ISOLATION LEVEL REPEATABLE READ READ ONLY"
)

// RolledBack runs fn inside a transaction that is always rolled back, even
// when ctx has been cancelled (Ctrl-C): whatever fn does inside it, the
// target is left as it was. It is the way pgmedic opens a transaction.
func RolledBack(ctx context.Context, q Conn, mode string, fn func() error) error {
	if _, err := q.Exec(ctx, Tag+"BEGIN "+mode); err != nil {
		return fmt.Errorf("starting a %s transaction: %w", strings.ToLower(mode), err)
	}
	defer q.Exec(context.WithoutCancel(ctx), Tag+"ROLLBACK")
	return fn()
}

// Prepare prepares query under name, outside any transaction. When
// PostgreSQL cannot infer every parameter's type (pg_stat_statements puts
// bare $n where literals stood), it tries again with each list of
// fallback types in turn; if they all fail, the first error is returned,
// which says more about the statement.
func Prepare(ctx context.Context, q Conn, name, query string, fallback [][]string) error {
	_, err := PrepareGuessing(ctx, q, name, query, fallback)
	return err
}

// PrepareGuessing is Prepare, saying whether the fallback types were used:
// then the plan holds pgmedic's guesses, and a cast in it may exist only
// in pgmedic's copy, not in what the application runs. A failed attempt
// leaves no ERROR in the server's log (see quietPrepare).
func PrepareGuessing(ctx context.Context, q Conn, name, query string, fallback [][]string) (guessed bool, err error) {
	return quietPrepare(ctx, q, name, nil, query, fallback)
}

// PrepareAs prepares query under name with its parameters' types
// declared: the types a client binds, the ones an earlier PREPARE
// settled on, or fallbacks ("unknown" leaves one to inference).
func PrepareAs(ctx context.Context, q Conn, name string, types []string, query string) error {
	_, err := quietPrepare(ctx, q, name, types, query, nil)
	return err
}

// Message is what a person needs from an error of the server: its message
// alone (pgx adds the SQLSTATE and the severity); other errors as they are.
func Message(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	return err.Error()
}

// NoSlot says whether a connection was refused because the server had no
// slot for it: SQLSTATE 53300, too_many_connections (max_connections, the
// slots reserved for superusers, a role's or database's CONNECTION LIMIT).
func NoSlot(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}
