package migration

import (
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	cases := []struct {
		sql             string
		what, lock      string
		reads, writes   bool
		rewrites, scans bool
		risky           bool
		lighter         string
	}{
		{"CREATE INDEX ON orders (customer_id)", "CREATE INDEX", Share, false, true, false, true, true, "CONCURRENTLY"},
		{"CREATE INDEX CONCURRENTLY ix ON orders (customer_id)", "CREATE INDEX CONCURRENTLY", ShareUpdateExclusive, false, false, false, false, false, ""},
		{"ALTER TABLE orders ADD COLUMN note text", "ALTER TABLE ADD COLUMN", AccessExclusive, true, true, false, false, true, ""},
		{"ALTER TABLE orders ADD COLUMN created timestamptz DEFAULT now()", "ALTER TABLE ADD COLUMN", AccessExclusive, true, true, false, false, true, ""},
		{"ALTER TABLE orders ADD COLUMN token uuid DEFAULT gen_random_uuid()", "ALTER TABLE ADD COLUMN", AccessExclusive, true, true, true, false, true, "backfill"},
		{"ALTER TABLE orders ALTER COLUMN total TYPE numeric(14,2)", "ALTER TABLE ALTER COLUMN TYPE", AccessExclusive, true, true, true, false, true, "new column"},
		{"ALTER TABLE orders ALTER COLUMN total SET NOT NULL", "ALTER TABLE SET NOT NULL", AccessExclusive, true, true, false, true, true, `CHECK (total IS NOT NULL)`},
		{"ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES customers (id)", "ALTER TABLE ADD FOREIGN KEY", ShareRowExclusive, false, true, false, true, true, "NOT VALID"},
		{"ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES customers (id) NOT VALID", "ALTER TABLE ADD FOREIGN KEY", ShareRowExclusive, false, true, false, false, true, ""},
		{"ALTER TABLE orders VALIDATE CONSTRAINT fk", "ALTER TABLE VALIDATE CONSTRAINT", ShareUpdateExclusive, false, false, false, true, true, ""},
		{"ALTER TABLE orders SET (fillfactor = 70)", "ALTER TABLE SET STORAGE PARAMETERS", ShareUpdateExclusive, false, false, false, false, false, ""},
		{"UPDATE orders SET status = 'x'", "UPDATE", RowExclusive, false, true, false, true, true, "batches"},
		{"VACUUM FULL orders", "VACUUM FULL", AccessExclusive, true, true, true, false, true, "pg_repack"},
		{"DROP TRIGGER IF EXISTS orders_audit ON app.orders", "DROP TRIGGER", AccessExclusive, true, true, false, false, true, ""},
		{"CREATE TABLE t (id int)", "CREATE", "", false, false, false, false, false, ""},
		{"DO $$ BEGIN ALTER TABLE t ADD COLUMN c int; END $$", "DO", "", false, false, false, false, false, ""},
	}
	for _, c := range cases {
		m, err := Read("m.sql", []byte(c.sql+";"))
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		s := m.Statements[0]
		if s.What != c.what || s.Lock != c.lock || s.BlocksReads != c.reads || s.BlocksWrites != c.writes ||
			(s.Rewrites != "") != c.rewrites || (s.Scans != "") != c.scans || s.Risky != c.risky {
			t.Errorf("%s:\n got %q %q reads=%v writes=%v rewrites=%q scans=%q risky=%v", c.sql, s.What, s.Lock, s.BlocksReads, s.BlocksWrites, s.Rewrites, s.Scans, s.Risky)
		}
		if got := strings.Join(s.Lighter, " "); (c.lighter == "") != (got == "") || !strings.Contains(got, c.lighter) {
			t.Errorf("%s: lighter %q, want one saying %q", c.sql, got, c.lighter)
		}
	}
}

func TestReadLinesAndErrors(t *testing.T) {
	m, err := Read("m.sql", []byte("-- add a note\nBEGIN;\nALTER TABLE orders ADD COLUMN note text;\n\nCREATE INDEX ix ON orders\n  (note);\nCOMMIT;\n"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, s := range m.Statements {
		lines = append(lines, s.Line)
	}
	if got := lines; len(got) != 4 || got[0] != 2 || got[1] != 3 || got[2] != 5 || got[3] != 7 {
		t.Errorf("lines %v, want [2 3 5 7]", got)
	}
	if d, _ := Read("d.sql", []byte("DO $$ BEGIN PERFORM 1; END $$; CREATE TABLE x (a int);")); !d.Statements[0].Unread || d.Statements[1].Unread {
		t.Errorf("a DO block is read as unread, CREATE TABLE as harmless: %+v %+v", d.Statements[0], d.Statements[1])
	}
	if !m.Statements[0].Transaction || m.Statements[0].What != "BEGIN" {
		t.Errorf("BEGIN read as %+v", m.Statements[0])
	}
	for _, bad := range []string{"", "  -- nothing\n", "ALTER TABLE orders ADD COLUMN;", "CREATE INDEX ON orders (x"} {
		if _, err := Read("m.sql", []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "m.sql") {
			t.Errorf("%q: error %v, want one naming the file", bad, err)
		}
	}
}

func TestSafer(t *testing.T) {
	cases := []struct {
		sql     string
		rewrote bool
		want    []string // each step's SQL, with + for retried and * for batches
	}{
		{"CREATE INDEX ix ON orders (customer_id)", false, []string{"CREATE INDEX CONCURRENTLY ix ON orders USING btree (customer_id)"}},
		{"ALTER TABLE orders ADD COLUMN note text", false, []string{"+ALTER TABLE orders ADD COLUMN note text"}},
		{"ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES customers (id)", false,
			[]string{"+ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (c) REFERENCES customers (id) NOT VALID", "ALTER TABLE orders VALIDATE CONSTRAINT fk"}},
		{"ALTER TABLE orders ALTER COLUMN total SET NOT NULL", false, []string{
			"+ALTER TABLE orders ADD CONSTRAINT orders_total_not_null CHECK (total IS NOT NULL) NOT VALID",
			"ALTER TABLE orders VALIDATE CONSTRAINT orders_total_not_null",
			"+ALTER TABLE orders ALTER COLUMN total SET NOT NULL",
			"+ALTER TABLE orders DROP CONSTRAINT orders_total_not_null"}},
		{"ALTER TABLE orders ADD COLUMN token uuid DEFAULT gen_random_uuid()", true, []string{
			"+ALTER TABLE orders ADD COLUMN token uuid",
			"+ALTER TABLE orders ALTER COLUMN token SET DEFAULT gen_random_uuid()",
			"*UPDATE orders SET token = DEFAULT WHERE ctid = ANY (ARRAY(SELECT ctid FROM orders WHERE token IS NULL LIMIT 5000))"}},
		{"ALTER TABLE orders ADD COLUMN a int, ADD PRIMARY KEY (id)", false, []string{
			"+ALTER TABLE orders ADD COLUMN a int",
			"CREATE UNIQUE INDEX CONCURRENTLY orders_pkey ON orders (id)",
			"+ALTER TABLE orders ADD CONSTRAINT orders_pkey PRIMARY KEY USING INDEX orders_pkey"}},
		{"UPDATE orders SET a = 1", false, []string{"UPDATE orders SET a = 1"}},
	}
	for _, c := range cases {
		m, err := Read("m.sql", []byte(c.sql))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range Safer(m.Statements[0], c.rewrote) {
			p := ""
			if s.Retry {
				p = "+"
			}
			if s.Batches {
				p = "*"
			}
			got = append(got, p+s.SQL)
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got  %q\n want %q", c.sql, got, c.want)
		}
	}
}

func TestConflicts(t *testing.T) {
	for _, m := range Modes {
		for _, n := range Modes {
			if Conflicts(m, n) != Conflicts(n, m) {
				t.Errorf("%s and %s: the matrix is not symmetric", m, n)
			}
		}
	}
	if !Conflicts(Share, RowExclusive) || Conflicts(Share, AccessShare) || Conflicts(ShareUpdateExclusive, RowExclusive) {
		t.Error("CREATE INDEX's ShareLock must wait for writers and not readers; ShareUpdateExclusive for neither")
	}
}

// FuzzRead: any bytes give statements or an error naming the file, never
// a panic.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"ALTER TABLE t ADD COLUMN c int DEFAULT random();", "BEGIN; CREATE INDEX ON t (a); COMMIT;", "ALTER TABLE t ADD UNIQUE (a), ALTER COLUMN b SET NOT NULL", "$$", "UPDATE t SET a = 1 WHERE b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Read("f.sql", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.sql") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, s := range m.Statements {
			Safer(s, true)
			if s.Line < 1 {
				t.Fatalf("statement %d at line %d", s.N, s.Line)
			}
		}
	})
}
