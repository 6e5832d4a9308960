package collect

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// checkpoints reads the checkpointer's counters and, from 14, the WAL
// written since pg_stat_wal was reset: a server whose log pgmedic cannot
// read (a managed one) still says how its checkpoints were started. Every
// role may read these views.
func checkpoints(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	h := pgversion.Of(s.Server.VersionNum)
	var c model.Checkpoints
	counters := `SELECT checkpoints_timed, checkpoints_req, stats_reset FROM pg_stat_bgwriter`
	if h.Checkpointer {
		counters = `SELECT num_timed, num_requested, stats_reset FROM pg_stat_checkpointer`
	}
	if err := q.QueryRow(ctx, envelope.Tag+counters).Scan(&c.Timed, &c.Requested, &c.Reset); err != nil {
		s.Missing[model.SrcCheckpoint] = skipFor(s, "cannot read the checkpoint counters", err)
		return
	}
	if h.StatWAL {
		if err := q.QueryRow(ctx, envelope.Tag+`SELECT wal_bytes::int8, wal_fpi, stats_reset FROM pg_stat_wal`).Scan(&c.WALBytes, &c.FPI, &c.WALReset); err == nil {
			c.HasWAL = true
		}
	}
	s.Checkpoints = &c
}

// databases reads every database's frozen ages: the wraparound limits are
// the server's, and a database nobody checks (template0, an old tenant's)
// stops the whole server's writes when it reaches them.
func databases(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	rows, err := q.Query(ctx, envelope.Tag+`SELECT datname, age(datfrozenxid)::int8, mxid_age(datminmxid)::int8, datallowconn FROM pg_database ORDER BY 2 DESC`)
	if err != nil {
		s.Missing[model.SrcDatabases] = skipFor(s, "cannot read pg_database", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var d model.DatabaseAge
		if err := rows.Scan(&d.Name, &d.FrozenAge, &d.MxidAge, &d.AllowConn); err != nil {
			s.Missing[model.SrcDatabases] = skipFor(s, "cannot read pg_database", err)
			s.Databases = nil
			return
		}
		s.Databases = append(s.Databases, d)
	}
	if err := rows.Err(); err != nil {
		s.Missing[model.SrcDatabases] = skipFor(s, "cannot read pg_database", err)
		s.Databases = nil
	}
}

// nextXID reads the next transaction id the server will assign (the xmax
// of a snapshot: reading it assigns none) and the server's clock.
func nextXID(ctx context.Context, q envelope.Conn) (xid int64, at float64, err error) {
	err = q.QueryRow(ctx, envelope.Tag+`SELECT pg_snapshot_xmax(pg_current_snapshot())::text::int8, extract(epoch FROM clock_timestamp())::float8`).Scan(&xid, &at)
	return xid, at, err
}
