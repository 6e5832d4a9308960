package replay

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgmedic/pgmedic/internal/capture"
)

// TestCompareCounterbalances: the sides' runs go A B, B A, A B, B A, so
// that neither side always takes what the first run of a pair pays. (The
// workload is empty: what is replayed does not matter to the order.)
func TestCompareCounterbalances(t *testing.T) {
	var order []string
	side := func(name string) Side {
		return Side{Name: name, Fresh: true, Open: func(ctx context.Context, run int) (*Target, error) {
			order = append(order, name)
			return &Target{Close: func() {}, Connect: func(context.Context, *capture.Session) (*pgconn.PgConn, error) { return nil, errors.New("no server") }}, nil
		}}
	}
	if _, err := Compare(context.Background(), &capture.Workload{}, side("A"), side("B"), 4, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "A B B A A B B A" {
		t.Errorf("runs went %s, want A B B A A B B A", got)
	}
}
