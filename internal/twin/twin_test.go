package twin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
)

// setup is a table with what a twin must carry over: an enum, a column
// with its own collation, a generated column, a check constraint, a
// unique constraint, a partial index, storage options, NULLs, and text
// that binary COPY must move byte for byte.
const setup = `
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE shop.orders (
	id bigint PRIMARY KEY,
	code text COLLATE "C" NOT NULL UNIQUE,
	feeling mood,
	amount numeric(12,2) NOT NULL CHECK (amount >= 0),
	taxed numeric GENERATED ALWAYS AS (amount * 1.2) STORED,
	placed_at timestamptz NOT NULL,
	tags text[],
	note text
) WITH (fillfactor = 90);
CREATE INDEX orders_open_idx ON shop.orders (placed_at) WHERE note IS NULL;
INSERT INTO shop.orders (id, code, feeling, amount, placed_at, tags, note)
	SELECT g, 'c-' || g, (ARRAY['sad','ok','happy'])[1 + g % 3]::mood, g % 500, timestamptz '2025-01-01' + g * interval '1 minute',
		ARRAY['t' || g % 7], CASE WHEN g % 5 = 0 THEN NULL ELSE E'line\n"quoted"\t' || g END
	FROM generate_series(1, 20000) g;
ANALYZE shop.orders;
CREATE TABLE shop.points (id int, p point);`

const checksum = `SELECT count(*), md5(string_agg(o::text, '|' ORDER BY id)) FROM shop.orders o`

func TestBuild(t *testing.T) {
	ctx := context.Background()
	// Autovacuum analysing a catalog during the build writes pg_statistic
	// rows, which pg_stat_database counts as the target's writes.
	c := labtest.Cluster(t, lab.Options{Config: "autovacuum = off\n"})
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	// The target's default collation is ICU's German (15 and later have
	// LOCALE_PROVIDER), which the twin must sort by too.
	if c.Server().Major >= 15 {
		_, err = admin.Exec(ctx, "CREATE DATABASE shop TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'de-DE' LOCALE 'C'")
	} else {
		_, err = admin.Exec(ctx, "CREATE DATABASE shop")
	}
	admin.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := envelope.Connect(ctx, c.DSN("shop"), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	owner, _ := pgx.Connect(ctx, c.DSN("shop"))
	defer owner.Close(ctx)
	if _, err := owner.Exec(ctx, "CREATE SCHEMA shop;"+setup); err != nil {
		t.Fatal(err)
	}
	// The point column's type is in pg_catalog; a domain is not.
	owner.Exec(ctx, "CREATE DOMAIN positive AS int CHECK (VALUE > 0); CREATE TABLE shop.odd (v positive)")
	var wantRows int64
	var wantSum string
	owner.QueryRow(ctx, checksum).Scan(&wantRows, &wantSum)
	// Counters reach pg_stat_database when a backend flushes its
	// statistics, up to a second after its statements: this session's
	// writes are flushed first, and pgmedic's sessions have ended.
	writes := func() (n int64) {
		owner.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		owner.QueryRow(ctx, "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = 'shop'").Scan(&n)
		return n
	}
	opts := collect.Defaults()
	opts.SampleFor = 0
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		t.Fatal(err)
	}
	before := writes()
	refs := []model.RelRef{{Schema: "shop", Name: "orders"}, {Schema: "shop", Name: "odd"}}
	tw, skipped, err := Build(ctx, sess.Conn, snap, refs, Options{Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close(ctx)
	if why := skipped[refs[1]]; !strings.Contains(why, "positive") {
		t.Errorf("a column of a domain type was not refused by name: %q", why)
	}
	var rows int64
	var sum string
	if err := tw.Conn.QueryRow(ctx, checksum).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	if rows != wantRows || sum != wantSum {
		t.Errorf("the twin's rows differ: %d rows %s, the target's %d rows %s", rows, sum, wantRows, wantSum)
	}
	const order = `SELECT string_agg(x, ' ' ORDER BY x) FROM (VALUES ('b'), ('B'), ('a'), ('ä'), ('Z')) v(x)`
	var wantOrder, gotOrder string
	owner.QueryRow(ctx, order).Scan(&wantOrder)
	tw.Conn.QueryRow(ctx, order).Scan(&gotOrder)
	if gotOrder != wantOrder || tw.Differs != "" {
		t.Errorf("the twin sorts %q where the target sorts %q (differs: %q)", gotOrder, wantOrder, tw.Differs)
	}
	if c.Server().Major >= 15 && wantOrder == "B Z a b ä" {
		t.Errorf("the target sorts by bytes: the collation was not set up (%q)", wantOrder)
	}
	var indexes, constraints int
	tw.Conn.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = 'orders'").Scan(&indexes)
	tw.Conn.QueryRow(ctx, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'shop.orders'::regclass").Scan(&constraints)
	if indexes != 3 || constraints != 3 {
		t.Errorf("the twin has %d indexes (want the key, the unique and the partial one) and %d constraints (want 3)", indexes, constraints)
	}
	if got := tw.Tables; len(got) != 1 || got[0].Rows != 20000 || got[0].Fraction != 1 || got[0].Bytes < 1<<20 {
		t.Errorf("tables copied: %+v", got)
	}
	if w := tw.Where(refs[0]); !strings.Contains(w, "full copy of shop.orders, 20,000 rows") {
		t.Errorf("where: %q", w)
	}
	if after := writes(); after != before {
		t.Errorf("the target's write counters moved from %d to %d", before, after)
	}
	// Over the bound: a sample of each table, and it says so.
	small, _, err := Build(ctx, sess.Conn, snap, refs[:1], Options{MaxBytes: snap.Table(refs[0]).HeapBytes / 4})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close(ctx)
	if tb := small.Tables[0]; tb.Fraction > 0.3 || tb.Rows < 2000 || tb.Rows > 8000 || !small.Sampled() || !strings.Contains(small.Where(refs[0]), "sample of 25%") {
		t.Errorf("sampled twin: %+v, %q", small.Tables, small.Where(refs[0]))
	}
}

// TestLocaleFallback: a target whose libc locale this machine has not
// generated gets the ICU locale of its language, and the twin says so.
func TestLocaleFallback(t *testing.T) {
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	target := dbLocale{encoding: "UTF8", collate: "xx_NOWHERE.UTF-8", ctype: "xx_NOWHERE.UTF-8", provider: "c"}
	used, differs, err := createDatabase(ctx, admin, target, c.Server().Major)
	if err != nil {
		t.Fatal(err)
	}
	want := "c"
	if c.Server().Major >= 15 {
		want = "i"
	}
	if used.provider != want || !strings.Contains(differs, "locale-gen xx_NOWHERE.UTF-8") || !strings.Contains(differs, "libc xx_NOWHERE.UTF-8") {
		t.Errorf("used %+v, differs %q", used, differs)
	}
	if tw := (&Twin{Server: "x", Differs: differs}); !strings.Contains(tw.Summary(), "unlike the target") || !strings.Contains(tw.Where(model.RelRef{Name: "t"}), "sorts unlike") {
		t.Errorf("the difference is not reported: %q / %q", tw.Summary(), tw.Where(model.RelRef{Name: "t"}))
	}
}

func TestICUTag(t *testing.T) {
	for in, want := range map[string]string{"en_US.UTF-8": "en-US", "de_DE@euro": "de-DE", "C": "", "POSIX": "", "C.UTF-8": "", "sv_SE": "sv-SE"} {
		if got := icuTag(in); got != want {
			t.Errorf("icuTag(%q) = %q, want %q", in, got, want)
		}
	}
}
