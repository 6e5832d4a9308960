package replay

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestAllowWritesToNamesTheServer: --allow-writes-to names a server,
// database and role, not a string: the replay's DSN spelled as key=value
// and allowed as a URL (localhost for 127.0.0.1) is the same; the same
// server with another database, or another role, is refused with a
// message that says which; a DSN that does not parse is an error.
func TestAllowWritesToNamesTheServer(t *testing.T) {
	cfg, err := pgconn.ParseConfig("host=127.0.0.1 port=6543 dbname=shop user=app sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{dsn: "host=127.0.0.1 port=6543 dbname=shop user=app sslmode=disable", cfg: cfg, start: "x"}
	ctx := context.Background()
	if err := s.Guard(ctx, []string{"postgres://app:secret@localhost:6543/shop"}, ""); err != nil {
		t.Errorf("the same server as a URL: %v", err)
	}
	for dsn, want := range map[string]string{
		"postgres://app@localhost:6543/shop_copy": "database shop_copy on that server",
		"postgres://admin@127.0.0.1:6543/shop":    "role admin on that server",
		"postgres://app@127.0.0.1:7000/shop":      "is not a pgmedic twin or lab cluster",
		"postgres://app@[::1":                     "--allow-writes-to",
	} {
		if err := s.Guard(ctx, []string{dsn}, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", dsn, err, want)
		}
	}
}
