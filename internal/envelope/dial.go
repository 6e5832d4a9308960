package envelope

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// Every connection pgmedic opens for itself is dialled here: the target's
// read-only session (Connect), PgBouncer's console (ConnectBouncer), and
// the connections to servers pgmedic may write to (Dial, DialLow): a twin,
// a lab cluster, a replay's copy, a concurrency experiment's workers. Each
// gets, in one place, what a DBA needs to recognise and stop it:
//   - an application_name that names pgmedic, so pg_stat_activity and the
//     log say whose it is;
//   - a bounded connect timeout, so a silent host is an error in seconds;
//   - PostgreSQL's cancel request when its context ends (Ctrl-C, SIGTERM,
//     a deadline), so the backend stops at once instead of working on for
//     a client that has gone;
//   - the statement and lock timeouts asked for.
// Only the lab's simulated applications (internal/scenario, the tests'
// helpers) dial on their own: they play the application, not pgmedic.

// Work says how a connection to a server pgmedic may write to is set up.
type Work struct {
	// AppName is its application_name (default AppName).
	AppName string
	// Database, when set, replaces the DSN's database.
	Database string
	// Params are more startup parameters (a replay's --set for side B).
	Params map[string]string
	// StatementTimeout and LockTimeout are sent as startup parameters
	// when set; zero leaves the server's.
	StatementTimeout, LockTimeout time.Duration
	// ConnectTimeout bounds the connection's opening (default 10s, or
	// the DSN's connect_timeout when shorter).
	ConnectTimeout time.Duration
	// SimpleProtocol sends every statement unprepared: for PgBouncer in
	// transaction mode, which gives each transaction any server
	// connection, so nothing prepared may outlive one.
	SimpleProtocol bool
}

// apply sets on a low-level configuration what every connection shares:
// the bounded connect timeout, pgmedic's application_name, the protocol.
func (w Work) apply(cfg *pgconn.Config) {
	timeout := w.ConnectTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = timeout
	}
	if w.Database != "" {
		cfg.Database = w.Database
	}
	params := map[string]string{}
	for k, v := range cfg.RuntimeParams {
		params[k] = v
	}
	for k, v := range w.Params {
		params[k] = v
	}
	params["application_name"] = AppName
	if w.AppName != "" {
		params["application_name"] = w.AppName
	}
	if w.StatementTimeout > 0 {
		params["statement_timeout"] = fmt.Sprint(w.StatementTimeout.Milliseconds())
	}
	if w.LockTimeout > 0 {
		params["lock_timeout"] = fmt.Sprint(w.LockTimeout.Milliseconds())
	}
	cfg.RuntimeParams = params
	cancelOnDone(cfg)
}

// cancelOnDone makes a cancelled context send PostgreSQL's cancel request
// for the statement in flight, then close the socket if the server has
// not answered within two seconds.
func cancelOnDone(cfg *pgconn.Config) {
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 2 * time.Second}
	}
}

// WorkConfig parses dsn into a low-level configuration set up as w says,
// for callers that dial it many times (a replay's sessions). Its error
// holds no part of a password.
func WorkConfig(dsn string, w Work) (*pgconn.Config, error) {
	cfg, _, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	w.apply(&cfg.Config)
	return &cfg.Config, nil
}

// Dial opens a pgx connection to a server pgmedic may write to.
func Dial(ctx context.Context, dsn string, w Work) (*pgx.Conn, error) {
	cfg, facts, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	w.apply(&cfg.Config)
	if w.SimpleProtocol {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	probe := &dialProbe{wait: firstAnswerWait(cfg.ConnectTimeout)}
	probe.wrap(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(Target{Host: cfg.Host, Port: cfg.Port, Database: cfg.Database, User: cfg.User}, err, facts, probe)
	}
	return conn, nil
}

// DialLow opens a low-level connection from a configuration WorkConfig
// made (a copy of it, changed by edit when not nil).
func DialLow(ctx context.Context, cfg *pgconn.Config, edit func(*pgconn.Config)) (*pgconn.PgConn, error) {
	c := cfg.Copy()
	if edit != nil {
		edit(c)
		// edit may have replaced the parameters: the name and the
		// cancel handler stay pgmedic's.
		if c.RuntimeParams == nil {
			c.RuntimeParams = map[string]string{}
		}
		if c.RuntimeParams["application_name"] == "" {
			c.RuntimeParams["application_name"] = AppName
		}
		cancelOnDone(c)
	}
	return pgconn.ConnectConfig(ctx, c)
}
