package collect

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
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

// members reads the multixact member space. PostgreSQL exposes no view of
// it: the next offset is in the control file (pg_control_checkpoint(), as
// of the last checkpoint) and the oldest multixact's offset is its 4-byte
// entry in pg_multixact/offsets, in segments of 65,536 entries named by
// the segment number in hex. Both functions are the superuser's unless
// granted, so their privilege is asked first: a refused call would be an
// ERROR in the server's log. The member pages zeroed (pg_stat_slru, any
// role) are read here and again after the sample: the rate.
func members(ctx context.Context, q envelope.Conn, s *model.Snapshot) (at float64) {
	var may bool
	if err := q.QueryRow(ctx, envelope.Tag+`SELECT has_function_privilege('pg_control_checkpoint()', 'EXECUTE')
		AND has_function_privilege('pg_read_binary_file(text, bigint, bigint)', 'EXECUTE')`).Scan(&may); err != nil {
		s.Missing[model.SrcMembers] = skipFor(s, "cannot ask for the privileges the member space needs", err)
		return 0
	}
	if !may {
		r := "<pgmedic's role>"
		if s.User != "" {
			r = sqlparse.QuoteIdent(s.User)
		}
		s.Missing[model.SrcMembers] = model.Skip{
			Reason: "the multixact member space is read from the control file and pg_multixact/offsets, which only a superuser may read unless granted",
			Fix: "run check as a superuser, or GRANT EXECUTE ON FUNCTION pg_control_checkpoint() TO " + r +
				"; GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint) TO " + r + "; (the second lets the role read any file of the data directory)"}
		return 0
	}
	var m model.Members
	err := q.QueryRow(ctx, envelope.Tag+`SELECT c.next_multixact_id::text::int8, c.next_multi_offset::text::int8, c.checkpoint_time,
		d.datminmxid::text::int8, d.datname
		FROM pg_control_checkpoint() c,
		(SELECT datname, datminmxid FROM pg_database ORDER BY mxid_age(datminmxid) DESC, datname <> current_database(), datname LIMIT 1) d`).
		Scan(&m.NextMulti, &m.NextOffset, &m.Checkpoint, &m.OldestMulti, &m.OldestDatabase)
	if err == nil && m.OldestMulti != m.NextMulti {
		// Entries are in the server's byte order: little-endian on the
		// x86-64 and ARM64 servers PostgreSQL runs on. A page the server
		// has not written out yet reads short: no entry, and no ERROR
		// from get_byte in the server's log.
		var off *int64
		err = q.QueryRow(ctx, envelope.Tag+`SELECT CASE WHEN length(b) = 4 THEN get_byte(b, 0) + get_byte(b, 1) * 256 + get_byte(b, 2) * 65536 + get_byte(b, 3)::int8 * 16777216 END
			FROM pg_read_binary_file(format('pg_multixact/offsets/%s', lpad(upper(to_hex($1::int8 / 65536)), 4, '0')), ($1::int8 % 65536) * 4, 4) b`, m.OldestMulti).
			Scan(&off)
		if err == nil && off == nil {
			s.Missing[model.SrcMembers] = model.Skip{Reason: "the oldest multixact's entry is not in pg_multixact/offsets on disk yet (the server writes it out at its next checkpoint)",
				Fix: "run check again after the next checkpoint"}
			return 0
		}
		if off != nil {
			m.OldestOffset = *off
		}
	}
	if err != nil {
		s.Missing[model.SrcMembers] = skipFor(s, "cannot read the multixact member space", err)
		return 0
	}
	m.PagesBefore, at, _ = memberPages(ctx, q)
	s.Members = &m
	return at
}

// membersAfter reads the member pages zeroed once more, after the sample
// that began at from on the server's clock.
func membersAfter(ctx context.Context, q envelope.Conn, s *model.Snapshot, from float64) {
	if s.Members == nil || from == 0 {
		return
	}
	pages, at, err := memberPages(ctx, q)
	if err != nil || at <= from {
		return
	}
	s.Members.PagesAfter, s.Members.Seconds = pages, at-from
}

// memberPages is pg_stat_slru's count of member pages zeroed (named
// MultiXactMember before 17, multixact_member since) and the server's
// clock.
func memberPages(ctx context.Context, q envelope.Conn) (pages int64, at float64, err error) {
	err = q.QueryRow(ctx, envelope.Tag+`SELECT coalesce(sum(blks_zeroed), 0)::int8, extract(epoch FROM clock_timestamp())::float8
		FROM pg_stat_slru WHERE lower(replace(name, '_', '')) = 'multixactmember'`).Scan(&pages, &at)
	return pages, at, err
}
