package collect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// showRow is one row of a SHOW command, read by column name: PgBouncer
// adds columns between versions (1.18 has cl_active_cancel_req,
// maxwait_us, ...), and the console answers in text whatever type a
// column is declared with.
type showRow func(name string) string

func (r showRow) num(name string) float64 {
	f, _ := strconv.ParseFloat(r(name), 64)
	return f
}

// show runs a SHOW command on the console and calls fn for each row that
// is not about the console's own database.
func show(ctx context.Context, b envelope.Conn, cmd string, fn func(showRow)) error {
	rows, err := b.Query(ctx, cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	defer rows.Close()
	names := map[string]int{}
	for i, f := range rows.FieldDescriptions() {
		names[f.Name] = i
	}
	for rows.Next() {
		vals := rows.RawValues()
		row := showRow(func(name string) string {
			if i, ok := names[name]; ok && i < len(vals) {
				return string(vals[i])
			}
			return ""
		})
		if row("database") != "pgbouncer" {
			fn(row)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// showPools reads SHOW POOLS.
func showPools(ctx context.Context, b envelope.Conn, at time.Time) (model.PoolSample, error) {
	ps := model.PoolSample{At: at.UTC()}
	err := show(ctx, b, "SHOW POOLS", func(r showRow) {
		ps.Pools = append(ps.Pools, model.Pool{Database: r("database"), User: r("user"), Mode: r("pool_mode"),
			ClActive: int(r.num("cl_active")), ClWaiting: int(r.num("cl_waiting")), SvActive: int(r.num("sv_active")),
			SvIdle: int(r.num("sv_idle")), SvUsed: int(r.num("sv_used")), MaxWaitMS: r.num("maxwait")*1000 + r.num("maxwait_us")/1000})
	})
	return ps, err
}

// showStats reads SHOW STATS: per database, the transactions and queries
// served and the clients' total wait for a server connection
// (total_wait_time, microseconds), so that the window's change can be
// computed.
func showStats(ctx context.Context, b envelope.Conn) (map[string]model.BouncerStat, error) {
	out := map[string]model.BouncerStat{}
	err := show(ctx, b, "SHOW STATS", func(r showRow) {
		out[r("database")] = model.BouncerStat{Database: r("database"), Transactions: int64(r.num("total_xact_count")),
			Queries: int64(r.num("total_query_count")), WaitMS: r.num("total_wait_time") / 1000}
	})
	return out, err
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
func showClients(ctx context.Context, b envelope.Conn) (*model.BouncerClients, error) {
	out := &model.BouncerClients{}
	err := show(ctx, b, "SHOW CLIENTS", func(r showRow) {
		switch state := r("state"); {
		case strings.HasPrefix(state, "waiting"):
			out.Waiting++
			out.LongestWaitMS = max(out.LongestWaitMS, r.num("wait")*1000+r.num("wait_us")/1000)
		case state == "active":
			out.Active++
		default:
			out.Idle++
		}
	})
	return out, err
}

// ShowPools is one tick of PgBouncer's pools (SHOW POOLS).
func ShowPools(ctx context.Context, b envelope.Conn, at time.Time) (model.PoolSample, error) {
	return showPools(ctx, b, at)
}
