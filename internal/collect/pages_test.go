package collect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
)

// TestCatalogPages reads a database in pages of two tables: every table,
// index, column and sequence is read once, across page boundaries, as in
// a database of a million relations read 20,000 tables at a time.
func TestCatalogPages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a lab cluster")
	}
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	conn := labtest.Admin(t, c)
	const n = 7
	for i := 0; i < n; i++ {
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE t%d (id serial PRIMARY KEY, a int, b text); CREATE INDEX t%d_a ON t%d (a)", i, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	defer func(p int) { catalogPage = p }(catalogPage)
	catalogPage = 2
	sess, err := envelope.Connect(ctx, c.DSN("postgres"), envelope.Options{StatementTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	opts := Defaults()
	opts.SampleFor, opts.PlanTop = 0, 0
	s, err := SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		t.Fatal(err)
	}
	count := func(names []string) map[string]int {
		m := map[string]int{}
		for _, x := range names {
			m[x]++
		}
		return m
	}
	var tables, indexes, seqs []string
	for _, tb := range s.Tables {
		tables = append(tables, tb.Name)
	}
	for _, ix := range s.Indexes {
		indexes = append(indexes, ix.Name)
	}
	for _, sq := range s.Sequences {
		seqs = append(seqs, sq.Name)
	}
	for i := 0; i < n; i++ {
		for what, got := range map[string]map[string]int{
			fmt.Sprintf("t%d", i): count(tables), fmt.Sprintf("t%d_pkey", i): count(indexes), fmt.Sprintf("t%d_a", i): count(indexes), fmt.Sprintf("t%d_id_seq", i): count(seqs),
		} {
			if got[what] != 1 {
				t.Errorf("%s read %d times", what, got[what])
			}
		}
	}
	if len(s.Tables) != n || len(s.Indexes) != 2*n || len(s.Sequences) != n || len(s.Columns) != 3*n {
		t.Errorf("read %d tables, %d indexes, %d sequences, %d columns; want %d, %d, %d, %d", len(s.Tables), len(s.Indexes), len(s.Sequences), len(s.Columns), n, 2*n, n, 3*n)
	}
}

// TestColumnStatisticsBothWays: a superuser reads the column statistics
// from pg_statistic, any other role from pg_stats; both give the same
// figures for every column (null fraction, distinct values, width,
// correlation, the most common values' frequencies).
func TestColumnStatisticsBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a lab cluster")
	}
	ctx := context.Background()
	conn := labtest.Admin(t, labtest.Cluster(t, lab.Options{}))
	if _, err := conn.Exec(ctx, `CREATE TABLE shop (id int PRIMARY KEY, kind int, note text, at timestamptz DEFAULT now());
		INSERT INTO shop SELECT g, g % 7, CASE WHEN g % 3 = 0 THEN NULL ELSE md5(g::text) END, now() - g * interval '1 min' FROM generate_series(1, 5000) g;
		CREATE TABLE plain (a int); ANALYZE shop`); err != nil {
		t.Fatal(err)
	}
	var oids []uint32
	var names []string
	if err := conn.QueryRow(ctx, "SELECT array_agg(oid ORDER BY oid), array_agg(relname::text ORDER BY oid) FROM pg_class WHERE relname IN ('shop', 'plain')").Scan(&oids, &names); err != nil {
		t.Fatal(err)
	}
	read := func(super bool) []string {
		s := &model.Snapshot{}
		for i, oid := range oids {
			s.Tables = append(s.Tables, model.Table{OID: oid, Schema: "public", Name: names[i]})
		}
		if err := columnsOf(ctx, conn, s, columnsSQL(super), oids, keptByOID(s), interner{}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, col := range s.Columns {
			out = append(out, fmt.Sprintf("%s.%s stats=%v null=%.3f nd=%.3f corr=%.3f w=%d mcv=%.3f/%.3f def=%q", col.Table, col.Name, col.HasStats,
				col.NullFrac, col.NDistinct, col.Correlation, col.AvgWidth, col.MostCommonFreqSum, col.MostCommonFreqMax, col.Default))
		}
		sort.Strings(out)
		return out
	}
	viaView, direct := read(false), read(true)
	if strings.Join(viaView, "\n") != strings.Join(direct, "\n") || len(direct) != 5 {
		t.Errorf("pg_stats:\n%s\npg_statistic:\n%s", strings.Join(viaView, "\n"), strings.Join(direct, "\n"))
	}
}

// TestSizesWithoutOpening: a table's size is taken from relpages only
// where nothing has written it since relpages was set, as the statistics
// count; every other table and unique index is measured. Each case's size
// must be the one pg_relation_size gives.
func TestSizesWithoutOpening(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a lab cluster")
	}
	ctx := context.Background()
	c := labtest.Cluster(t, lab.Options{})
	conn := labtest.Admin(t, c)
	if _, err := conn.Exec(ctx, `
		CREATE TABLE untouched (id int PRIMARY KEY, v text);
		CREATE TABLE loaded (id int PRIMARY KEY, v text);
		INSERT INTO loaded SELECT g, md5(g::text) FROM generate_series(1, 5000) g;
		CREATE TABLE settled (id int PRIMARY KEY, v text);
		INSERT INTO settled SELECT g, md5(g::text) FROM generate_series(1, 5000) g;
		CREATE TABLE grown (id int PRIMARY KEY, v text);
		INSERT INTO grown SELECT g, md5(g::text) FROM generate_series(1, 100) g;
		CREATE TABLE aborted (id int PRIMARY KEY, v text);
		INSERT INTO aborted SELECT g, md5(g::text) FROM generate_series(1, 100) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE settled, grown, aborted`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO grown SELECT g, md5(g::text) FROM generate_series(101, 5000) g`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO aborted SELECT g, md5(g::text) FROM generate_series(101, 5000) g`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The statistics are flushed by the session that wrote (from 15).
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	s := &model.Snapshot{Missing: map[string]model.Skip{}}
	if err := tables(ctx, conn, s, 100); err != nil {
		t.Fatal(err)
	}
	kept := keptByOID(s)
	if err := columns(ctx, conn, s, kept); err != nil {
		t.Fatal(err)
	}
	if err := indexes(ctx, conn, s, kept); err != nil {
		t.Fatal(err)
	}
	for _, tb := range s.Tables {
		var heap int64
		if err := conn.QueryRow(ctx, "SELECT pg_relation_size($1::oid)", tb.OID).Scan(&heap); err != nil {
			t.Fatal(err)
		}
		if tb.HeapBytes != heap {
			t.Errorf("%s: %d bytes read, pg_relation_size says %d", tb.Name, tb.HeapBytes, heap)
		}
		if tb.Name != "untouched" && heap == 0 {
			t.Errorf("%s: the case is empty, so it proves nothing", tb.Name)
		}
		for _, ix := range s.TableIndexes(&tb) {
			var size int64
			if err := conn.QueryRow(ctx, "SELECT pg_relation_size($1::regclass)", ix.Name).Scan(&size); err != nil {
				t.Fatal(err)
			}
			if ix.Bytes != size {
				t.Errorf("%s: %d bytes read, pg_relation_size says %d", ix.Name, ix.Bytes, size)
			}
		}
	}
	if len(s.Tables) != 5 || len(s.Indexes) != 5 {
		t.Errorf("read %d tables and %d indexes, want 5 and 5", len(s.Tables), len(s.Indexes))
	}
}
