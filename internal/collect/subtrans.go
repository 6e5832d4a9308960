package collect

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
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
// from on the server's clock. (The sessions past 64 subtransactions are
// read with every tick of the sampler, from 16: Backend.Overflowed.)
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
}
