package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/model"
)

const (
	keyRows   = 300000 // rows setup.sql loads into each table
	keyInsert = 10000  // rows inserted by the workload right after a checkpoint
	keyBatch  = 500
)

// keyTables are the three tables of random-keys and the insert the
// application runs on each.
var keyTables = []struct{ name, insert string }{
	{"uploads", `INSERT INTO uploads (name) SELECT 'file-' || g FROM generate_series($1::int, $2::int) g`},
	{"image_hashes", `INSERT INTO image_hashes (id, url) SELECT sha256(('https://img.example.com/' || g)::bytea), 'https://img.example.com/' || g FROM generate_series($1::int, $2::int) g`},
	{"image_links_seq", `INSERT INTO image_links_seq (url) SELECT 'https://img.example.com/' || g FROM generate_series($1::int, $2::int) g`},
}

// randomKeys inserts into each table right after a checkpoint, so
// pg_stat_statements sees the full-page writes, and records each key's
// correlation, leaf density, fragmentation and WAL per row.
func randomKeys(ctx context.Context, env *Env) error {
	admin, err := env.Admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, t := range keyTables {
		// Full-page writes happen on the first change of a page
		// after a checkpoint: start each table's inserts right after one.
		if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
			return err
		}
		for lo := keyRows + 1; lo <= keyRows+keyInsert; lo += keyBatch {
			if _, err := conn.Exec(ctx, t.insert, lo, lo+keyBatch-1); err != nil {
				return fmt.Errorf("inserting into %s: %w", t.name, err)
			}
		}
		// pg_stat_statements counts at the end of each statement
		// (pg_stat_wal only when the backend flushes its stats).
		var fpi, rows float64
		if err := admin.QueryRow(ctx, `SELECT coalesce(sum(wal_fpi), 0)::float8, coalesce(sum(rows), 0)::float8 FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE $1`, "INSERT INTO "+t.name+" %").Scan(&fpi, &rows); err != nil {
			return err
		}
		var corr, density, frag, idx, heap float64
		if err := admin.QueryRow(ctx, `SELECT s.correlation, i.avg_leaf_density, i.leaf_fragmentation,
			pg_relation_size($1::regclass), pg_relation_size($2::regclass)
			FROM pg_stats s, pgstatindex($1::regclass) i
			WHERE s.tablename = $3 AND s.attname = 'id'`, t.name+"_pkey", t.name, t.name).Scan(&corr, &density, &frag, &idx, &heap); err != nil {
			return fmt.Errorf("measuring %s: %w", t.name, err)
		}
		env.Record(t.name+": pg_stats.correlation of id", model.Round(corr, 4))
		env.Record(t.name+": avg leaf density %", model.Round(density, 1))
		env.Record(t.name+": leaf fragmentation %", model.Round(frag, 1))
		env.Record(t.name+": pkey size / heap size", model.Round(idx/heap, 4))
		env.Record(t.name+": WAL full-page images per inserted row", model.Round(fpi/rows, 4))
	}
	return nil
}

// idsRunningOut is the sensors reporting: readings inserted in small
// batches, one transaction each, until check has sampled them, and an
// alert now and then.
func idsRunningOut(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i := 0; ; i++ {
		if _, err := conn.Exec(ctx, "INSERT INTO readings (device_id, value) SELECT 1 + (g + $1) % 400, random() FROM generate_series(1, 20) g", i); err != nil {
			return err
		}
		if i%50 == 0 {
			if _, err := conn.Exec(ctx, "INSERT INTO alerts (device_id, kind) VALUES ($1, 'threshold')", 1+i%400); err != nil {
				return err
			}
		}
		if i == 20 {
			env.Ready()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
