package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// vacuumThrottleSettings are what vacuum-falls-behind sets for its run:
// autovacuum turned down as a DBA does to spare the disks, and a short
// naptime so that the workers start within seconds rather than a minute.
var vacuumThrottleSettings = []string{
	"ALTER SYSTEM SET autovacuum_vacuum_cost_limit = 10",
	"ALTER SYSTEM SET autovacuum_vacuum_cost_delay = '20ms'",
	"ALTER SYSTEM SET autovacuum_naptime = '1s'",
	"SELECT pg_reload_conf()",
}

// vacuumFallsBehind throttles autovacuum for the whole server, then
// changes half the rows of each of the helpdesk's four busiest tables at
// once. It is ready when every autovacuum worker is on a table of this
// database, the fourth table waiting (the scenario has a cluster of its
// own: the workers are the server's, and another database's tables would
// hold them); when it ends it restores the settings and
// ends the crawling workers of its database, so that the scenarios after
// it find autovacuum as PostgreSQL ships it.
func vacuumFallsBehind(ctx context.Context, env *Env) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	defer func() {
		bg := context.Background()
		if err := execAll(bg, admin, "ALTER SYSTEM RESET autovacuum_vacuum_cost_limit", "ALTER SYSTEM RESET autovacuum_vacuum_cost_delay",
			"ALTER SYSTEM RESET autovacuum_naptime", "SELECT pg_reload_conf()",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND datname = current_database()"); err != nil {
			env.Log("restoring autovacuum's settings: %v", err)
		}
	}()
	if err := execAll(ctx, admin, vacuumThrottleSettings...); err != nil {
		return fmt.Errorf("throttling autovacuum: %w", err)
	}
	if err := helpdeskHour(ctx, env); err != nil {
		return err
	}
	// The changed pages written out, as an hour's changes are by the time
	// autovacuum gets to them: each page its workers prune they dirty
	// again, at vacuum_cost_page_dirty.
	if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	// The launcher starts a worker per database every naptime; a bound
	// for a stalled machine, not a measure of speed.
	err = waitUntil(ctx, 90*time.Second, func() (bool, string, error) {
		var busy, ours, slots, counted int
		err := admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE datname = current_database() AND query LIKE 'autovacuum: VACUUM%'),
			current_setting('autovacuum_max_workers')::int, (SELECT count(*) FROM pg_stat_user_tables WHERE n_dead_tup >= 5000)
			FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`).Scan(&busy, &ours, &slots, &counted)
		return ours >= slots && counted == 4, fmt.Sprintf("autovacuum had %d of %d workers busy, %d on this database, and the statistics counted the dead rows of %d of 4 tables", busy, slots, ours, counted), err
	})
	if err != nil {
		return err
	}
	env.Ready()
	<-ctx.Done()
	return ctx.Err()
}

// helpdeskHour changes half the rows of each table, on a session that
// ends with it: a backend sends its row counters when it exits, and
// autovacuum and check both read them.
func helpdeskHour(ctx context.Context, env *Env) error {
	app, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
	return execAll(ctx, app,
		"UPDATE tickets SET status = 'pending', updated_at = now() WHERE id % 2 = 0",
		"UPDATE sla_timers SET due_at = due_at + interval '1 hour' WHERE ticket_id % 2 = 0",
		"UPDATE agent_presence SET state = 'away', seen_at = now() WHERE session_id % 2 = 0",
		"UPDATE ticket_views SET views = views + 1, last_at = now() WHERE ticket_id % 2 = 0")
}
