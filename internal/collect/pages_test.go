package collect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
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
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
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
