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
