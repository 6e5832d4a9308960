package diagnose

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestSpillOfTheGenericPlan: fleet 1 owns 90% of the trips, and a
// prepared statement groups a fleet's trips by model. After its first
// custom plans PostgreSQL keeps the generic one, which joins and sorts all
// of fleet 1's trips past work_mem; a custom plan for the same fleet does
// not spill. sort-spill names the generic plan as the spill's cause, at
// info, and generic-plan carries the finding.
func TestSpillOfTheGenericPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a lab cluster")
	}
	if _, err := lab.FindBinDir(""); err != nil {
		testkit.Missing(t, "PostgreSQL 15 server binaries", err)
	}
	ctx := context.Background()
	c, err := lab.Create(ctx, lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE fleet"); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	app, err := pgx.Connect(ctx, c.DSN("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE vehicles (id int PRIMARY KEY, model text NOT NULL)",
		"INSERT INTO vehicles SELECT g, 'model-' || (g % 7) FROM generate_series(1, 30000) g",
		"CREATE TABLE trips (id bigint PRIMARY KEY, fleet_id int NOT NULL, vehicle_id int NOT NULL, speed real NOT NULL)",
		"INSERT INTO trips SELECT g, CASE WHEN g % 10 = 0 THEN 2 + (g / 10) % 3000 ELSE 1 END, 1 + (g * 7919) % 30000, (g % 120)::real FROM generate_series(1, 120000) g",
		"CREATE EXTENSION pg_stat_statements", "CREATE INDEX ON trips (fleet_id)", "ANALYZE vehicles, trips", "SELECT pg_stat_statements_reset()",
	} {
		if _, err := app.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// pgx prepares the statement once and executes it by name, as most
	// drivers do: rare fleets first, then mostly the big one.
	rare := []int{5, 77, 301, 1200, 2999}
	for i := range 30 {
		fleet := 1
		if i < 6 || i%3 == 0 {
			fleet = rare[i%5]
		}
		rows, err := app.Query(ctx, "SELECT v.model, count(*), avg(t.speed) FROM trips t JOIN vehicles v ON v.id = t.vehicle_id WHERE t.fleet_id = $1 GROUP BY v.model", fleet)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	var generic int
	if err := app.QueryRow(ctx, "SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements WHERE statement LIKE '%GROUP BY v.model%'").Scan(&generic); err != nil || generic == 0 {
		t.Skipf("PostgreSQL kept custom plans here (%d generic, %v): nothing to judge", generic, err)
	}
	rep, err := Check(ctx, c.DSN("fleet"), "test", Options{Lab: true, Runs: 5, StatementTimeout: 10 * time.Second, CopyTimeout: time.Minute,
		MaxCopyBytes: 1 << 30, MaxTables: 1000, MaxStatements: 1000}, model.Info)
	if err != nil {
		t.Fatal(err)
	}
	var spill *model.Finding
	for i, f := range rep.Findings {
		if f.Rule == "sort-spill" && strings.Contains(f.Object.Name, "FROM trips t JOIN vehicles v") {
			spill = &rep.Findings[i]
		}
	}
	if spill == nil {
		t.Skip("the statement did not spill here: nothing to judge")
	}
	if spill.Severity != model.Info || !strings.Contains(spill.Verification.Reason, "generic plan's") {
		t.Errorf("the generic plan's spill: %v %q, want info naming the generic plan", spill.Severity, spill.Verification.Reason)
	}
}
