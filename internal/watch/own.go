package watch

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/envelope"
)

// OwnWork is what watch itself added to pg_stat_database's counters, in
// every database, since it started: the transactions it rolled back (the
// envelope rolls back every transaction it opens, and reading an
// incident's catalogs opens dozens) and the sessions it opened (each
// reconnect, each database read for a bundle). The burst triggers judge
// the counters less this, so watch never opens an incident on its own
// work.
type OwnWork struct {
	Rollbacks int64 `json:"rollbacks"`
	Sessions  int64 `json:"sessions"`
}

// ownCounter counts watch's own rollbacks and sessions as they happen.
type ownCounter struct {
	rollbacks, sessions atomic.Int64
}

func (o *ownCounter) work() *OwnWork {
	return &OwnWork{Rollbacks: o.rollbacks.Load(), Sessions: o.sessions.Load()}
}

// counted wraps a connection of watch's so that the transactions it ends
// with ROLLBACK, and the statements that fail (each aborts its
// transaction), are counted.
func (o *ownCounter) counted(c envelope.Conn) envelope.Conn { return countingConn{c, o} }

type countingConn struct {
	envelope.Conn
	own *ownCounter
}

func (c countingConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := c.Conn.Exec(ctx, sql, args...)
	if err != nil || strings.HasSuffix(strings.TrimSpace(sql), "ROLLBACK") {
		c.own.rollbacks.Add(1)
	}
	return tag, err
}

func (c countingConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return countingRow{c.Conn.QueryRow(ctx, sql, args...), c.own}
}

type countingRow struct {
	pgx.Row
	own *ownCounter
}

func (r countingRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if err != nil && err != pgx.ErrNoRows {
		r.own.rollbacks.Add(1)
	}
	return err
}
