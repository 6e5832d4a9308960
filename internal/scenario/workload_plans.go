package scenario

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// dashboardByPlan is generic-plan-skew's statement: a tenant's events
// counted by account plan.
const dashboardByPlan = `SELECT a.plan, count(*), max(e.created_at) FROM events e JOIN accounts a ON a.id = e.account_id WHERE e.tenant_id = $1 GROUP BY a.plan`

// genericPlanSkew runs the dashboard through pgx's statement cache (a
// named prepared statement, as most drivers do), the big tenant every
// other call: after five custom plans PostgreSQL keeps the generic one.
func genericPlanSkew(ctx context.Context, env *Env) error {
	conn, err := pgx.Connect(ctx, env.AppDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rare := []int{77, 500, 3, 1200, 940, 18, 1999, 250, 640, 1033}
	for i := range 20 {
		tenant := 1
		if i%2 == 1 {
			tenant = rare[i/2%len(rare)]
		}
		rows, err := conn.Query(ctx, dashboardByPlan, tenant)
		if err != nil {
			return fmt.Errorf("the dashboard for tenant %d: %w", tenant, err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("the dashboard for tenant %d: %w", tenant, err)
		}
	}
	var generic, custom int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements WHERE statement LIKE '%GROUP BY a.plan%'`).Scan(&generic, &custom); err == nil {
		env.Record("generic plans", float64(generic))
		env.Record("custom plans", float64(custom))
	}
	return nil
}
