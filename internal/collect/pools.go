package collect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
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
		// The console answers in text (simple protocol): read the text,
		// whatever type a column is declared with in this version.
		vals := rows.RawValues()
		str := func(name string) string {
			if i, ok := names[name]; ok && i < len(vals) {
				return string(vals[i])
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

// showStats reads SHOW STATS: per database, the transactions and queries
// served and the clients' total wait for a server connection (total_wait_time,
// microseconds), so that the window's change can be computed.
func showStats(ctx context.Context, b Rowser) (map[string]model.BouncerStat, error) {
	rows, err := b.Query(ctx, "SHOW STATS")
	if err != nil {
		return nil, fmt.Errorf("SHOW STATS: %w", err)
	}
	defer rows.Close()
	names := map[string]int{}
	for i, f := range rows.FieldDescriptions() {
		names[f.Name] = i
	}
	out := map[string]model.BouncerStat{}
	for rows.Next() {
		vals := rows.RawValues()
		num := func(name string) float64 {
			if i, ok := names[name]; ok && i < len(vals) {
				f, _ := strconv.ParseFloat(string(vals[i]), 64)
				return f
			}
			return 0
		}
		i, ok := names["database"]
		if !ok || i >= len(vals) {
			continue
		}
		db := string(vals[i])
		if db == "pgbouncer" {
			continue
		}
		out[db] = model.BouncerStat{Database: db, Transactions: int64(num("total_xact_count")),
			Queries: int64(num("total_query_count")), WaitMS: num("total_wait_time") / 1000}
	}
	return out, rows.Err()
}

// statsDelta is the change of SHOW STATS between two readings.
func statsDelta(before, after map[string]model.BouncerStat) []model.BouncerStat {
	var out []model.BouncerStat
	for db, a := range after {
		b := before[db]
		out = append(out, model.BouncerStat{Database: db, Transactions: a.Transactions - b.Transactions,
			Queries: a.Queries - b.Queries, WaitMS: a.WaitMS - b.WaitMS})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Database < out[j].Database })
	return out
}

// showClients counts SHOW CLIENTS by state (active, waiting, idle) and
// finds the longest current wait (wait and wait_us, seconds and
// microseconds).
func showClients(ctx context.Context, b Rowser) (*model.BouncerClients, error) {
	rows, err := b.Query(ctx, "SHOW CLIENTS")
	if err != nil {
		return nil, fmt.Errorf("SHOW CLIENTS: %w", err)
	}
	defer rows.Close()
	names := map[string]int{}
	for i, f := range rows.FieldDescriptions() {
		names[f.Name] = i
	}
	out := &model.BouncerClients{}
	for rows.Next() {
		vals := rows.RawValues()
		str := func(name string) string {
			if i, ok := names[name]; ok && i < len(vals) {
				return string(vals[i])
			}
			return ""
		}
		num := func(name string) float64 {
			f, _ := strconv.ParseFloat(str(name), 64)
			return f
		}
		if str("database") == "pgbouncer" {
			continue
		}
		switch state := str("state"); {
		case strings.HasPrefix(state, "waiting"):
			out.Waiting++
			out.LongestWaitMS = max(out.LongestWaitMS, num("wait")*1000+num("wait_us")/1000)
		case state == "active":
			out.Active++
		default:
			out.Idle++
		}
	}
	return out, rows.Err()
}
