package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestVerifyIndexesOnTarget checks the index proof on a database that is
// not a lab scenario: without HypoPG the proposal is not-run with the
// install hint; --verify-indexes refuses tables over the size limit, and
// otherwise measures on a temporary copy and leaves nothing behind.
func TestVerifyIndexesOnTarget(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	_, db := freshDatabase(t, "vi_target")
	for _, q := range []string{
		"CREATE EXTENSION pg_stat_statements",
		"CREATE SCHEMA work",
		"CREATE TABLE work.outbox (msg_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, topic text NOT NULL, due timestamptz NOT NULL, sent_at timestamptz)",
		"INSERT INTO work.outbox (topic, due, sent_at) SELECT 't' || (g % 50), now() - g * interval '1 s', CASE WHEN g % 100 <> 0 THEN now() END FROM generate_series(1, 80000) g",
		"VACUUM ANALYZE work.outbox",
		"SELECT pg_stat_statements_reset()",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := 0; i < 20; i++ {
		rows, err := db.Query(ctx, "SELECT msg_id FROM work.outbox WHERE topic = $1 AND sent_at IS NULL ORDER BY due LIMIT 10", "t0")
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	verification := func(args ...string) model.Verification {
		t.Helper()
		code, out, errOut := run(t, append([]string{"check", cluster.DSN("vi_target"), "--format", "json", "--rules", "missing-index", "--min-severity", "info"}, args...)...)
		if code != 1 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var rep struct{ Findings []model.Finding }
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0].Fix.SQL, `ON work.outbox (topic, due) WHERE sent_at IS NULL`) {
			t.Fatalf("want the partial composite index, got %s", out)
		}
		return rep.Findings[0].Verification
	}
	if v := verification(); v.Status != model.NotRun || !strings.Contains(v.Reason, "CREATE EXTENSION hypopg") || !strings.Contains(v.Reason, "--verify-indexes") {
		t.Errorf("without HypoPG: %+v", v)
	}
	if v := verification("--verify-indexes", "--verify-max-size", "1"); v.Status != model.NotRun || !strings.Contains(v.Reason, "over the copy limit") {
		t.Errorf("over the size limit: %+v", v)
	}
	v := verification("--verify-indexes")
	if v.Status != model.Confirmed || v.Before == nil || v.After == nil || !strings.Contains(v.Method, "temporary copy") {
		t.Errorf("--verify-indexes: %+v", v)
	}
	var leftovers, indexes int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname LIKE 'pgmedic%'").Scan(&leftovers); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE schemaname = 'work'").Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if leftovers != 0 || indexes != 1 {
		t.Errorf("after verification: %d pgmedic relations, %d indexes on work.outbox (want 0 and 1)", leftovers, indexes)
	}
	if cluster.HypoPG {
		if _, err := db.Exec(ctx, "CREATE EXTENSION hypopg"); err != nil {
			t.Fatal(err)
		}
		if v := verification(); v.Status != model.Estimated || v.Before == nil || v.After == nil || v.After.Value >= v.Before.Value {
			t.Errorf("with HypoPG: %+v", v)
		}
	}
}
