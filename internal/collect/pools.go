package collect

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Rowser runs a query and returns its rows: a PgBouncer admin console
// connection (which takes only the simple protocol and SHOW commands).
type Rowser interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// showPools reads SHOW POOLS by column name, since PgBouncer adds columns
// between versions (1.18 has cl_active_cancel_req, maxwait_us, ...). The
// admin console's own pool is left out.
func showPools(ctx context.Context, b Rowser, at time.Time) (model.PoolSample, error) {
	ps := model.PoolSample{At: at.UTC()}
	rows, err := b.Query(ctx, "SHOW POOLS")
	if err != nil {
		return ps, fmt.Errorf("SHOW POOLS: %w", err)
	}
	defer rows.Close()
	names := map[string]int{}
	for i, f := range rows.FieldDescriptions() {
		names[f.Name] = i
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return ps, fmt.Errorf("SHOW POOLS: %w", err)
		}
		str := func(name string) string {
			if i, ok := names[name]; ok && i < len(vals) && vals[i] != nil {
				return fmt.Sprint(vals[i])
			}
			return ""
		}
		num := func(name string) float64 {
			f, _ := strconv.ParseFloat(str(name), 64)
			return f
		}
		p := model.Pool{Database: str("database"), User: str("user"), Mode: str("pool_mode"),
			ClActive: int(num("cl_active")), ClWaiting: int(num("cl_waiting")), SvActive: int(num("sv_active")),
			SvIdle: int(num("sv_idle")), SvUsed: int(num("sv_used")), MaxWaitMS: num("maxwait")*1000 + num("maxwait_us")/1000}
		if p.Database == "pgbouncer" {
			continue
		}
		ps.Pools = append(ps.Pools, p)
	}
	return ps, rows.Err()
}
