package collect

import (
	"context"
	"strconv"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// horizonSQL lists everything that keeps the xmin horizon back, in every
// database (the rules judge which hold this one's): client backends with
// an xmin or an xid (their snapshot, their own writes), WAL senders with
// a standby's feedback xmin, prepared transactions, replication slots.
// pgmedic's own sessions are left out, and so are autovacuum's workers:
// a VACUUM's xmin is ignored by every other VACUUM. age() reads the next
// transaction id without assigning one, so asking writes nothing.
const horizonSQL = `SELECT CASE WHEN backend_type = 'walsender' THEN 'standby' ELSE 'session' END,
		CASE WHEN backend_type = 'walsender' THEN coalesce(application_name, '') ELSE pid::text END,
		pid, coalesce(datname, ''), coalesce(usename, ''), coalesce(application_name, ''), coalesce(host(client_addr), ''),
		coalesce(state, ''), coalesce(left(query, 2000), ''),
		greatest(age(backend_xmin), age(backend_xid))::bigint, false, xact_start, true, 0::bigint
	FROM pg_stat_activity
	WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid()
		AND application_name IS DISTINCT FROM '` + envelope.AppName + `'
		AND backend_type IN ('client backend', 'walsender')
UNION ALL
SELECT 'prepared', gid, 0, coalesce(database, ''), coalesce(owner, ''), '', '', '', '', age(transaction)::bigint, false, prepared, false, 0::bigint
	FROM pg_prepared_xacts
UNION ALL
SELECT 'slot', slot_name, coalesce(active_pid, 0), coalesce(database, ''), '', coalesce(plugin, ''), '', slot_type::text, '',
		coalesce(greatest(age(xmin), age(catalog_xmin)), 0)::bigint, xmin IS NULL AND catalog_xmin IS NOT NULL, NULL::timestamptz, active,
		coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn() END, restart_lsn), 0)::bigint
	FROM pg_replication_slots`

// horizon reads the xmin holders. Every role may read these views; a role
// without pg_read_all_stats sees other roles' sessions without their
// query and state, but with their xmin, which is what counts here.
func horizon(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	rows, err := q.Query(ctx, envelope.Tag+horizonSQL)
	if err != nil {
		s.Missing[model.SrcHorizon] = skipFor(s, "cannot read the xmin holders (pg_stat_activity, pg_prepared_xacts, pg_replication_slots)", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var h model.XminHolder
		var since *time.Time
		if err := rows.Scan(&h.Kind, &h.Name, &h.PID, &h.Database, &h.User, &h.App, &h.Client, &h.State, &h.Query,
			&h.XminAge, &h.CatalogOnly, &since, &h.Active, &h.RetainedWAL); err != nil {
			s.Missing[model.SrcHorizon] = skipFor(s, "cannot read the xmin holders", err)
			return
		}
		if since != nil {
			t := since.UTC()
			h.Since = &t
		}
		if h.Kind == model.HolderStandby && h.Name == "" {
			h.Name = "walsender " + strconv.Itoa(h.PID)
		}
		s.Holders = append(s.Holders, h)
	}
	if err := rows.Err(); err != nil {
		s.Holders = nil
		s.Missing[model.SrcHorizon] = skipFor(s, "cannot read the xmin holders", err)
	}
}
