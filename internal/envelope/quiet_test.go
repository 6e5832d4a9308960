package envelope_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
)

// TestQuietLeavesNoError: statements PostgreSQL cannot prepare as
// written (their parameters' types cannot be inferred, an operator is
// ambiguous, a relation does not exist) are tried, with and without
// fallback types, and fail with the server's message, while the server's
// log gains no ERROR line; one that prepares is prepared, and one whose
// fallback types work says it was guessed. The same for EXPLAIN, with or
// without ANALYZE, whatever makes it fail but a cancel.
//
// A superuser's session silences its own log (log_min_messages = panic)
// and keeps out of pg_stat_statements; this one puts the log back to the
// server's level first, so that only the trapping keeps the errors out.
func TestQuietLeavesNoError(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{})
	ctx := context.Background()
	sess, err := envelope.Connect(ctx, c.DSN("postgres"), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if !sess.LogQuiet || !sess.StatsUntracked {
		t.Errorf("a superuser's session: log quiet %v, statements untracked %v", sess.LogQuiet, sess.StatsUntracked)
	}
	if _, err := sess.Conn.Exec(ctx, "RESET log_min_messages"); err != nil {
		t.Fatal(err)
	}
	from := labtest.LogSize(c)
	for _, tc := range []struct {
		query    string
		fallback [][]string
		want     string // "" prepared, "guessed", or a part of the error
	}{
		{"SELECT relname FROM pg_class WHERE oid = $1", nil, ""},
		{"SELECT $1 + $2", nil, "operator is not unique"},
		{"SELECT $1 + $2", [][]string{{"integer", "integer"}}, "guessed"},
		{"SELECT $1 + $2", [][]string{{"unknown", "unknown"}}, "operator is not unique"},
		{"SELECT * FROM no_such_table WHERE id = $1", [][]string{{"integer"}}, "does not exist"},
		{"SELECT '$pgmedic0$' || $1::text", nil, ""},
		// round(numeric, numeric) does not exist: the second list works;
		// when none does, the error is the untyped attempt's.
		{"SELECT round(1.5, $1 + $2)", [][]string{{"numeric", "numeric"}, {"integer", "integer"}, {"text", "text"}}, "guessed"},
		{"SELECT round(1.5, $1 + $2)", [][]string{{"numeric", "numeric"}, {"date", "date"}}, "operator is not unique"},
	} {
		guessed, err := envelope.PrepareGuessing(ctx, sess.Conn, "pgmedic_test", tc.query, tc.fallback)
		switch {
		case tc.want == "" && (err != nil || guessed), tc.want == "guessed" && (err != nil || !guessed):
			t.Errorf("%s: guessed %v, %v; want %q", tc.query, guessed, err, tc.want)
		case tc.want != "" && tc.want != "guessed" && (err == nil || !strings.Contains(envelope.Message(err), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.query, err, tc.want)
		}
		if err == nil {
			if _, err := sess.Conn.Exec(ctx, envelope.Tag+"DEALLOCATE pgmedic_test"); err != nil {
				t.Fatalf("%s: prepared, but not as pgmedic_test: %v", tc.query, err)
			}
		}
	}
	// EXPLAIN checks the privileges its statement needs and ANALYZE runs
	// it: a role that may not read a table, a function that fails, a
	// function that does not exist.
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"CREATE TABLE quiet_secret (id int)", "CREATE ROLE quiet_reader LOGIN"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := envelope.Connect(ctx, c.UserDSN("quiet_reader", "postgres"), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for _, tc := range []struct {
		conn             envelope.Conn
		options, target  string
		want, detailHint string // want: "" planned, or a part of the error
	}{
		{sess.Conn, "VERBOSE", "SELECT * FROM quiet_secret WHERE id = 1", "", ""},
		{reader.Conn, "VERBOSE", "SELECT * FROM quiet_secret WHERE id = 1", "permission denied for table quiet_secret", ""},
		{reader.Conn, "", "SELECT pg_stat_statements_reset()", "does not exist", "No function matches"},
		{sess.Conn, "ANALYZE", "SELECT 1 / (id - id) FROM (VALUES (1)) v(id)", "division by zero", ""},
		{sess.Conn, "ANALYZE", "SELECT '$pgmedic0$ $outer$' AS quotes", "", ""},
	} {
		ex, err := envelope.Explain(ctx, tc.conn, tc.options, tc.target)
		switch {
		case tc.want == "" && (err != nil || ex == nil || ex.Plan.NodeType == ""):
			t.Errorf("%s: %v, want a plan", tc.target, err)
		case tc.want != "" && (err == nil || !strings.Contains(envelope.Message(err), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.target, err, tc.want)
		case tc.detailHint != "":
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Detail+pgErr.Hint, tc.detailHint) {
				t.Errorf("%s: %#v, want its detail or hint to say %q", tc.target, err, tc.detailHint)
			}
		}
	}
	// A statement_timeout is trapped too and leaves no ERROR; the caller
	// still tells it apart (SQLSTATE 57014), and the session is usable
	// after it.
	if _, err := sess.Conn.Exec(ctx, "SET statement_timeout = '100ms'"); err != nil {
		t.Fatal(err)
	}
	_, err = envelope.Explain(ctx, sess.Conn, "ANALYZE", "SELECT pg_sleep(5)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("EXPLAIN ANALYZE past statement_timeout: %v, want SQLSTATE 57014", err)
	}
	if _, err := envelope.Explain(ctx, sess.Conn, "", "SELECT 1"); err != nil {
		t.Errorf("the session after a cancelled EXPLAIN: %v", err)
	}
	if _, err := sess.Conn.Exec(ctx, "RESET statement_timeout"); err != nil {
		t.Fatal(err)
	}
	// A line the server logs after these: once it is there, every line
	// before it is too.
	if _, err := sess.Conn.Exec(ctx, envelope.Tag+"DO $$BEGIN RAISE LOG 'pgmedic prepare test end'; END$$"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(c.Dir + "/server.log")
		log := string(b[min(int(from), len(b)):])
		if strings.Contains(log, "ERROR") {
			t.Fatalf("the server logged an error:\n%s", log)
		}
		if strings.Contains(log, "prepare test end") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never logged the test's last line")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
