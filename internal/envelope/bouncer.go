package envelope

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Bouncer is a connection to a PgBouncer admin console (its database
// "pgbouncer"), which speaks only the simple query protocol and knows only
// its SHOW commands: none of the session settings the envelope applies
// to PostgreSQL exist there.
type Bouncer struct {
	Conn    *pgx.Conn
	Target  Target
	Version string
}

// ErrNotBouncer says the DSN reached something that is not PgBouncer's
// admin console.
var ErrNotBouncer = errors.New("not a PgBouncer admin console")

// ConnectBouncer connects to a PgBouncer admin console and checks that it
// is one (SHOW VERSION). Its errors, like Connect's, hold no part of a
// password.
func ConnectBouncer(ctx context.Context, dsn string, opts Options) (*Bouncer, error) {
	opts = opts.withDefaults()
	cfg, facts, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	target := Target{Host: cfg.Host, Port: cfg.Port, Database: cfg.Database, User: cfg.User}
	wait := firstAnswerWait(cfg.ConnectTimeout)
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > opts.ConnectTimeout {
		cfg.ConnectTimeout = opts.ConnectTimeout
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	probe := &dialProbe{wait: wait}
	probe.wrap(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(target, err, facts, probe)
	}
	var version string
	if err := conn.QueryRow(ctx, "SHOW VERSION").Scan(&version); err != nil {
		conn.Close(ctx)
		return nil, &ConnectError{Target: target, Err: ErrNotBouncer,
			Cause: fmt.Sprintf("--pgbouncer must name PgBouncer's admin console (database pgbouncer, a user in admin_users or stats_users): SHOW VERSION failed (%s)", Message(err))}
	}
	if !strings.Contains(strings.ToLower(version), "pgbouncer") {
		conn.Close(ctx)
		return nil, &ConnectError{Target: target, Err: ErrNotBouncer, Cause: fmt.Sprintf("--pgbouncer answered %q to SHOW VERSION, which is not PgBouncer", version)}
	}
	return &Bouncer{Conn: conn, Target: target, Version: version}, nil
}

// Close ends the console connection.
func (b *Bouncer) Close() { b.Conn.Close(context.Background()) }
