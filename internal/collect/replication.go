package collect

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// WAL positions are read as bytes from 0/0, which Go compares and
// subtracts as numbers; the lags are PostgreSQL's, in seconds, -1 when it
// has none. A role without pg_read_all_stats sees a WAL sender's pid and
// name but no position: it is kept, marked hidden.
const (
	primaryWALSQL = `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::int8, extract(epoch FROM clock_timestamp())::float8`
	standbysSQL   = `SELECT pid, coalesce(application_name, ''), coalesce(host(client_addr), ''), coalesce(state, ''), coalesce(sync_state, ''),
	coalesce(pg_wal_lsn_diff(sent_lsn, '0/0'), -1)::int8, coalesce(pg_wal_lsn_diff(write_lsn, '0/0'), -1)::int8,
	coalesce(pg_wal_lsn_diff(flush_lsn, '0/0'), -1)::int8, coalesce(pg_wal_lsn_diff(replay_lsn, '0/0'), -1)::int8,
	coalesce(extract(epoch FROM write_lag), -1)::float8, coalesce(extract(epoch FROM flush_lag), -1)::float8,
	coalesce(extract(epoch FROM replay_lag), -1)::float8
	FROM pg_stat_replication ORDER BY application_name, pid`
	// On a standby: what it received and replayed, since when nothing
	// was replayed, whether replay is paused, its WAL receiver (a role
	// without pg_read_all_stats sees its pid and no status: "hidden"),
	// and what the startup process (replay) waits for.
	standbySideSQL = `SELECT coalesce(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), '0/0'), 0)::int8,
	coalesce(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0'), 0)::int8,
	coalesce(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()), -1)::float8,
	pg_is_wal_replay_paused(), coalesce((SELECT coalesce(status, 'hidden') FROM pg_stat_wal_receiver), ''),
	coalesce((SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'startup'), ''),
	extract(epoch FROM clock_timestamp())::float8`
	conflictsSQL = `SELECT confl_tablespace, confl_lock, confl_snapshot, confl_bufferpin, confl_deadlock
	FROM pg_stat_database_conflicts WHERE datname = current_database()`
	oldestQueriesSQL = `SELECT pid, coalesce(usename, ''), coalesce(application_name, ''), coalesce(state, ''), left(coalesce(query, ''), 500),
	coalesce(extract(epoch FROM clock_timestamp() - xact_start), 0)::float8
	FROM pg_stat_activity WHERE backend_type = 'client backend' AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
	ORDER BY xact_start LIMIT 5`
	slotsSQL = `SELECT slot_name, slot_type, coalesce(database, ''), active,
	coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END, restart_lsn), 0)::int8,
	coalesce(wal_status, ''), coalesce(safe_wal_size, -1)::int8, xmin IS NOT NULL OR catalog_xmin IS NOT NULL
	FROM pg_replication_slots ORDER BY slot_name`
)

// replication reads one look at the server's streaming replication into
// the snapshot (the first call also its slots and whether it is a
// standby); a failure leaves replication out (see Missing).
func replication(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	if _, failed := s.Missing[model.SrcReplication]; failed {
		return
	}
	fail := func(err error) {
		s.Missing[model.SrcReplication] = skipFor(s, "cannot read the server's replication", err)
		s.Replication = nil
	}
	if s.Replication == nil {
		r := &model.Replication{}
		if err := q.QueryRow(ctx, envelope.Tag+"SELECT pg_is_in_recovery()").Scan(&r.InRecovery); err != nil {
			fail(err)
			return
		}
		s.Replication = r
	}
	r := s.Replication
	var rd model.ReplicationReading
	var err error
	if r.InRecovery {
		rd, err = standbyReading(ctx, q)
	} else {
		rd, err = primaryReading(ctx, q)
	}
	if err == nil {
		r.Slots, err = slots(ctx, q)
	}
	if err != nil {
		fail(err)
		return
	}
	r.Readings = append(r.Readings, rd)
}

func primaryReading(ctx context.Context, q envelope.Conn) (model.ReplicationReading, error) {
	var rd model.ReplicationReading
	if err := q.QueryRow(ctx, envelope.Tag+primaryWALSQL).Scan(&rd.WAL, &rd.At); err != nil {
		return rd, err
	}
	rows, err := q.Query(ctx, envelope.Tag+standbysSQL)
	if err != nil {
		return rd, err
	}
	defer rows.Close()
	for rows.Next() {
		var st model.StandbyStatus
		if err := rows.Scan(&st.PID, &st.Name, &st.Client, &st.State, &st.Sync, &st.Sent, &st.Written, &st.Flushed, &st.Replayed,
			&st.WriteLagS, &st.FlushLagS, &st.ReplayLagS); err != nil {
			return rd, err
		}
		st.Hidden = st.Sent < 0
		rd.Standbys = append(rd.Standbys, st)
	}
	return rd, rows.Err()
}

func standbyReading(ctx context.Context, q envelope.Conn) (model.ReplicationReading, error) {
	var rd model.ReplicationReading
	if err := q.QueryRow(ctx, envelope.Tag+standbySideSQL).Scan(&rd.WAL, &rd.Replayed, &rd.ReplayDelayS, &rd.Paused, &rd.Receiver, &rd.StartupWait, &rd.At); err != nil {
		return rd, err
	}
	c := &rd.Conflicts
	if err := q.QueryRow(ctx, envelope.Tag+conflictsSQL).Scan(&c.Tablespace, &c.Lock, &c.Snapshot, &c.BufferPin, &c.Deadlock); err != nil {
		return rd, err
	}
	rows, err := q.Query(ctx, envelope.Tag+oldestQueriesSQL)
	if err != nil {
		return rd, err
	}
	defer rows.Close()
	for rows.Next() {
		var sq model.StandbyQuery
		if err := rows.Scan(&sq.PID, &sq.User, &sq.App, &sq.State, &sq.Query, &sq.XactS); err != nil {
			return rd, err
		}
		if envelope.OwnSession(sq.App, sq.Query) {
			continue
		}
		rd.OldestQuery = append(rd.OldestQuery, sq)
	}
	return rd, rows.Err()
}

func slots(ctx context.Context, q envelope.Conn) ([]model.ReplicationSlot, error) {
	rows, err := q.Query(ctx, envelope.Tag+slotsSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.ReplicationSlot
	for rows.Next() {
		var sl model.ReplicationSlot
		if err := rows.Scan(&sl.Name, &sl.Type, &sl.Database, &sl.Active, &sl.Retained, &sl.WALStatus, &sl.SafeBytes, &sl.HoldsXmin); err != nil {
			return nil, err
		}
		out = append(out, sl)
	}
	return out, rows.Err()
}
