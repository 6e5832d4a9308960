package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// replicaReportStalls sets the standby to let queries hold replay for
// ever (max_standby_streaming_delay = -1, as a reporting replica is
// often set), opens the finance report's repeatable-read snapshot there,
// then runs the fare correction on the primary (half the trips updated,
// VACUUM after) and goes on writing new trips. Replay stops at VACUUM's
// cleanup, which the report's snapshot conflicts with. It is ready once
// the standby is 2 MB behind; at the end the report ends and the
// standby's setting is restored.
func replicaReportStalls(ctx context.Context, env *Env) error {
	dsn := env.StandbyDSN()
	if dsn == "" {
		return errors.New("the lab cluster has no standby")
	}
	standby, err := replicated(ctx, dsn)
	if err != nil {
		return err
	}
	defer standby.Close(context.Background())
	defer func() {
		if err := execAll(context.Background(), standby, "ALTER SYSTEM RESET max_standby_streaming_delay", "SELECT pg_reload_conf()"); err != nil {
			env.Log("restoring the standby's max_standby_streaming_delay: %v", err)
		}
	}()
	if err := execAll(ctx, standby, "ALTER SYSTEM SET max_standby_streaming_delay = -1", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	if err := pollUntil(ctx, standby, "SELECT current_setting('max_standby_streaming_delay') = '-1'"); err != nil {
		return fmt.Errorf("the standby did not take max_standby_streaming_delay = -1: %w", err)
	}
	report, err := pgx.Connect(ctx, dsn+"&application_name=finance-report")
	if err != nil {
		return err
	}
	defer report.Close(context.Background())
	if err := execAll(ctx, report, "BEGIN ISOLATION LEVEL REPEATABLE READ",
		"SELECT city, sum(fare_cents) FROM trips GROUP BY city"); err != nil {
		return err
	}
	app, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
	if err := execAll(ctx, app, "UPDATE trips SET fare_cents = fare_cents + 25 WHERE id % 2 = 0", "VACUUM trips"); err != nil {
		return err
	}
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	next := int64(100001)
	for {
		if _, err := app.Exec(ctx, `INSERT INTO trips SELECT g, g % 20000, g % 3000, 700, 'city-' || g % 40, now()
			FROM generate_series($1::bigint, $1::bigint + 1999) g`, next); err != nil {
			return err
		}
		next += 2000
		var behind int64
		if err := admin.QueryRow(ctx, `SELECT coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)), 0)::int8 FROM pg_stat_replication`).Scan(&behind); err != nil {
			return err
		}
		if behind >= 2<<20 {
			env.Ready()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// replicated connects to the scenario database on the standby once replay
// has brought it there, with the setup's rows.
func replicated(ctx context.Context, dsn string) (*pgx.Conn, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			var n int64
			if err = c.QueryRow(ctx, "SELECT count(*) FROM trips").Scan(&n); err == nil && n >= 100000 {
				return c, nil
			}
			c.Close(context.Background())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the standby did not replay the scenario's database within a minute: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pollUntil asks a yes-or-no question until the answer is yes (a bound of
// a minute for a stalled machine, not a measure of speed).
func pollUntil(ctx context.Context, c *pgx.Conn, question string) error {
	return waitUntil(ctx, time.Minute, func() (bool, string, error) {
		var yes bool
		err := c.QueryRow(ctx, question).Scan(&yes)
		return yes, "still no: " + question, err
	})
}

// waitUntil calls done every 100 ms until it says yes, an error, or limit
// has passed (a bound for a stalled machine, not a measure of speed: the
// error then says what was seen, in done's words).
func waitUntil(ctx context.Context, limit time.Duration, done func() (ok bool, seen string, err error)) error {
	for deadline := time.Now().Add(limit); ; {
		ok, seen, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %s", limit, seen)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
