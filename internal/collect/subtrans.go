package collect

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// subtransLookups is pg_stat_slru's count of pg_subtrans page lookups
// (blks_hit + blks_read) and reads, and the server's clock. The SLRU is
// named Subtrans before 17 and subtransaction since; any role may read
// the view. The counters are the server's since their reset, flushed by
// each backend when it goes idle (at most once a second from 15, twice a
// second to the statistics collector before): over a sample of seconds
// that is the rate to within a second's lookups.
func subtransLookups(ctx context.Context, q envelope.Conn) (lookups, reads int64, at float64, err error) {
	err = q.QueryRow(ctx, envelope.Tag+`SELECT coalesce(sum(blks_hit + blks_read), 0)::int8, coalesce(sum(blks_read), 0)::int8,
		extract(epoch FROM clock_timestamp())::float8
		FROM pg_stat_slru WHERE lower(name) IN ('subtrans', 'subtransaction')`).Scan(&lookups, &reads, &at)
	return lookups, reads, at, err
}

// subtrans reads the lookups before the sample; 0 when it could not.
func subtrans(ctx context.Context, q envelope.Conn, s *model.Snapshot) (at float64) {
	l, r, at, err := subtransLookups(ctx, q)
	if err != nil {
		s.Missing[model.SrcSubtrans] = skipFor(s, "cannot read pg_stat_slru", err)
		return 0
	}
	s.Subtrans = &model.Subtrans{LookupsBefore: l, ReadsBefore: r}
	return at
}

// subtransAfter reads the lookups again after the sample that began at
// from on the server's clock, and (from 16) the sessions whose
// subtransactions overflowed their cache at that moment.
func subtransAfter(ctx context.Context, q envelope.Conn, s *model.Snapshot, from float64) {
	if s.Subtrans == nil || from == 0 {
		s.Subtrans = nil
		return
	}
	l, r, at, err := subtransLookups(ctx, q)
	if err != nil || at <= from {
		s.Subtrans = nil
		return
	}
	t := s.Subtrans
	t.LookupsAfter, t.ReadsAfter, t.Seconds = l, r, at-from
	if !pgversion.Of(s.Server.VersionNum).BackendSubxact {
		return
	}
	// A backend's cache holds 64 subtransaction ids; the count stops
	// there and the flag says it overflowed.
	rows, err := q.Query(ctx, envelope.Tag+`SELECT a.pid, coalesce(a.application_name, ''), x.subxact_count,
		coalesce(extract(epoch FROM now() - a.xact_start) * 1000, 0)::float8, left(coalesce(a.query, ''), 500)
		FROM pg_stat_get_backend_idset() AS b(id), LATERAL pg_stat_get_backend_subxact(b.id) AS x, pg_stat_activity a
		WHERE a.pid = pg_stat_get_backend_pid(b.id) AND x.subxact_overflowed AND a.pid <> pg_backend_pid()
		ORDER BY a.xact_start LIMIT 20`)
	if err != nil {
		return
	}
	defer rows.Close()
	var out []model.SubxactSession
	for rows.Next() {
		var o model.SubxactSession
		if err := rows.Scan(&o.PID, &o.App, &o.Subxacts, &o.XactMS, &o.Query); err != nil {
			return
		}
		out = append(out, o)
	}
	if rows.Err() == nil {
		t.Overflowed, t.Counted = out, true
	}
}
