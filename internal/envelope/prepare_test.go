package envelope_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
)

// TestPrepareLeavesNoError: statements PostgreSQL cannot prepare as
// written (their parameters' types cannot be inferred, an operator is
// ambiguous, a relation does not exist) are tried, with and without
// fallback types, and fail with the server's message, while the server's
// log gains no ERROR line; one that prepares is prepared, and one whose
// fallback types work says it was guessed.
func TestPrepareLeavesNoError(t *testing.T) {
	c := labtest.Cluster(t, lab.Options{})
	ctx := context.Background()
	sess, err := envelope.Connect(ctx, c.DSN("postgres"), envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	from := labtest.LogSize(c)
	for _, tc := range []struct {
		query    string
		fallback []string
		want     string // "" prepared, "guessed", or a part of the error
	}{
		{"SELECT relname FROM pg_class WHERE oid = $1", nil, ""},
		{"SELECT $1 + $2", nil, "operator is not unique"},
		{"SELECT $1 + $2", []string{"integer", "integer"}, "guessed"},
		{"SELECT $1 + $2", []string{"unknown", "unknown"}, "operator is not unique"},
		{"SELECT * FROM no_such_table WHERE id = $1", []string{"integer"}, "does not exist"},
		{"SELECT '$pgmedic0$' || $1::text", nil, ""},
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
