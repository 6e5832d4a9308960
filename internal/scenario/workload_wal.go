package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// walPressure sets max_wal_size to its smallest value and resets the
// checkpoint and WAL counters (superuser, as a DBA's ALTER SYSTEM would),
// then runs the catalogue's import: 300,000 rows inserted in batches and
// every price updated, then vacuumed, which writes ten times max_wal_size of WAL. It is
// ready once the checkpointer has counted the checkpoints the WAL
// requested, and restores the setting and the counters when it ends, so
// that the scenarios after it start from a server like any other.
func walPressure(ctx context.Context, env *Env) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	v, resets, err := checkpointResets(ctx, admin)
	if err != nil {
		return err
	}
	defer func() {
		bg := context.Background()
		if err := execAll(bg, admin, append([]string{"ALTER SYSTEM RESET max_wal_size", "SELECT pg_reload_conf()"}, resets...)...); err != nil {
			env.Log("restoring max_wal_size: %v", err)
		}
	}()
	if err := execAll(ctx, admin, append([]string{"ALTER SYSTEM SET max_wal_size = '32MB'", "SELECT pg_reload_conf()"}, resets...)...); err != nil {
		return fmt.Errorf("setting max_wal_size: %w", err)
	}
	if err := importCatalogue(ctx, env); err != nil {
		return err
	}
	// The checkpointer counts a checkpoint when it has done it; wait
	// until the WAL's are counted (a bound for a stalled machine, not a
	// measure of speed).
	for deadline := time.Now().Add(time.Minute); ; {
		var req int64
		counter := "SELECT checkpoints_req FROM pg_stat_bgwriter"
		if v >= 170000 {
			counter = "SELECT num_requested FROM pg_stat_checkpointer"
		}
		if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return err
		}
		if err := admin.QueryRow(ctx, counter).Scan(&req); err != nil {
			return err
		}
		if req >= 5 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the checkpointer counted %d requested checkpoints after the import; expected at least 5", req)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	env.Ready()
	<-ctx.Done()
	return ctx.Err()
}

// importCatalogue is the nightly import, on a connection of its own that
// ends with it (a backend flushes its WAL counters when it exits).
func importCatalogue(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for b := 0; b < 6; b++ {
		if _, err := conn.Exec(ctx, `INSERT INTO catalogue_items (sku, supplier, title, price_cents)
			SELECT g, g % 300, 'item ' || g || ' ' || md5(g::text), 100 + g % 9000 FROM generate_series($1::bigint * 50000 + 1, ($1::bigint + 1) * 50000) g`, b); err != nil {
			return err
		}
	}
	// The import's own last step, as its job runs it.
	return execAll(ctx, conn, "UPDATE catalogue_items SET price_cents = price_cents + 1, updated_at = now()", "VACUUM ANALYZE catalogue_items")
}

// checkpointResets are the statements that reset the server's checkpoint
// and WAL counters on its version (pg_stat_checkpointer from 17,
// pg_stat_wal from 14), and the version.
func checkpointResets(ctx context.Context, admin *pgx.Conn) (int, []string, error) {
	var v int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0, nil, err
	}
	resets := []string{"SELECT pg_stat_reset_shared('bgwriter')"}
	if v >= 170000 {
		resets = append(resets, "SELECT pg_stat_reset_shared('checkpointer')")
	}
	if v >= 140000 {
		resets = append(resets, "SELECT pg_stat_reset_shared('wal')")
	}
	return v, resets, nil
}
