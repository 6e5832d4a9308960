package profile

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Select is how the backends to profile are chosen.
type Select struct {
	PIDs      []int  // these processes (any process)
	Busiest   int    // the K client backends using the most CPU now
	QueryLike string // client backends whose current query contains this
}

// Backends picks the processes to profile. The busiest are measured from
// /proc (CPU time over 300 ms), which also proves the server runs on this
// machine: perf can only sample local processes.
func Backends(ctx context.Context, c envelope.Conn, sel Select) ([]int, error) {
	if len(sel.PIDs) > 0 {
		for _, pid := range sel.PIDs {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				return nil, fmt.Errorf("no process %d on this machine (perf samples local processes only)", pid)
			}
		}
		return sel.PIDs, nil
	}
	if c == nil {
		return nil, fmt.Errorf("give --pid, or a DSN with --busiest or --query-like")
	}
	q := envelope.Tag + `SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		AND application_name IS DISTINCT FROM '` + envelope.AppName + `'`
	var args []any
	if sel.QueryLike != "" {
		q += ` AND state = 'active' AND strpos(lower(query), lower($1)) > 0`
		args = append(args, sel.QueryLike)
	}
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	if len(pids) == 0 {
		if sel.QueryLike != "" {
			return nil, fmt.Errorf("no active backend is running a query containing %q", sel.QueryLike)
		}
		return nil, fmt.Errorf("no client backend is connected")
	}
	local := false
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			local = true
		}
	}
	if !local {
		return nil, fmt.Errorf("the server's backends are not processes of this machine: run pgmedic profile on the database server (perf samples local processes only)")
	}
	if sel.QueryLike != "" {
		return pids, nil
	}
	k := max(sel.Busiest, 1)
	before := cpuTimes(pids)
	time.Sleep(300 * time.Millisecond)
	after := cpuTimes(pids)
	sort.SliceStable(pids, func(i, j int) bool { return after[pids[i]]-before[pids[i]] > after[pids[j]]-before[pids[j]] })
	var busy []int
	for _, pid := range pids {
		if len(busy) < k && after[pid]-before[pid] > 0 {
			busy = append(busy, pid)
		}
	}
	if len(busy) == 0 {
		return nil, fmt.Errorf("no client backend used CPU in 300 ms: nothing to profile")
	}
	return busy, nil
}

// cpuTimes reads each process's CPU time so far, in milliseconds.
func cpuTimes(pids []int) map[int]float64 {
	out := map[int]float64{}
	for _, pid := range pids {
		if ms, ok := ProcCPU(pid); ok {
			out[pid] = ms
		}
	}
	return out
}

// activity is pg_stat_activity sampled while perf records, to name the
// statement each backend was running at each sample.
type activity struct {
	mu    sync.Mutex
	ticks []tick
	// raw is each statement's text as pg_stat_activity showed it, with
	// its values, by queryid: what a re-run executes. It never reaches a
	// report.
	raw map[string]string
}

type tick struct {
	at    float64
	stmts map[int]Statement
}

// watch samples the backends' statements every interval until ctx ends,
// stamping each observation on cpu's clock (the samples' clock).
func (a *activity) watch(ctx context.Context, cpu CPU, c envelope.Conn, pids []int, interval time.Duration) {
	norm := map[string]Statement{}
	// Without pg_stat_activity.query_id (before 14) a statement is known
	// by its text's fingerprint.
	var num int
	c.QueryRow(ctx, envelope.Tag+"SELECT current_setting('server_version_num')::int").Scan(&num)
	qidExpr := "coalesce(query_id, 0)"
	if !pgversion.Of(num).QueryIDInActivity {
		qidExpr = "0::bigint"
	}
	for {
		at := cpu.Now()
		rows, err := c.Query(ctx, envelope.Tag+`SELECT pid, `+qidExpr+`, query FROM pg_stat_activity WHERE state = 'active' AND pid = ANY($1)`, pids)
		if err == nil {
			m := map[int]Statement{}
			for rows.Next() {
				var pid int
				var qid int64
				var q string
				if rows.Scan(&pid, &qid, &q) == nil {
					st, ok := norm[q]
					if !ok {
						// The text pg_stat_activity shows holds the values;
						// the report shows the statement without them.
						fp, text := sqlparse.Fingerprint(q)
						st = Statement{QueryID: strconv.FormatInt(qid, 10), Query: text}
						if qid == 0 {
							st.QueryID = "fingerprint " + fp
						}
						norm[q] = st
					}
					m[pid] = st
					a.mu.Lock()
					a.raw[st.QueryID] = q
					a.mu.Unlock()
				}
			}
			rows.Close()
			a.mu.Lock()
			a.ticks = append(a.ticks, tick{at: at, stmts: m})
			a.mu.Unlock()
		}
		if cpu.Sleep(ctx, interval); ctx.Err() != nil {
			return
		}
	}
}

// at is the statement pid was running at time t (the latest observation
// no later than half an interval after t).
func (a *activity) at(pid int, t, interval float64) (Statement, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := sort.Search(len(a.ticks), func(i int) bool { return a.ticks[i].at > t+interval/2 })
	if i == 0 {
		return Statement{}, false
	}
	s, ok := a.ticks[i-1].stmts[pid]
	if ok && t-a.ticks[i-1].at > 2*interval {
		return Statement{}, false // too old to say
	}
	return s, ok
}

// Result is a profile run: the profile, what reading perf's output saw,
// and the statements' own texts by queryid (for re-running them; never
// reported).
type Result struct {
	Profile model.Profile
	Stats   ScriptStats
	Raw     map[string]string
}

// Run profiles the processes for d: cpu records them while, given a
// connection, pg_stat_activity is sampled every 50 ms to attribute each
// sample to the statement its backend was running.
func Run(ctx context.Context, cpu CPU, c envelope.Conn, pids []int, d time.Duration, freq int) (Result, error) {
	act := &activity{raw: map[string]string{}}
	const interval = 50 * time.Millisecond
	var during func(context.Context)
	b := NewBuilder(targetOf(pids))
	if c != nil {
		during = func(ctx context.Context) { act.watch(ctx, cpu, c, pids, interval) }
		b.Attribute = func(s Sample) (Statement, bool) { return act.at(s.PID, s.Time, interval.Seconds()) }
	}
	rec, err := cpu.Record(ctx, pids, d, freq, during, b.Add)
	if err != nil {
		return Result{Stats: rec.Stats}, err
	}
	return Result{Profile: b.Profile(rec.Seconds), Stats: rec.Stats, Raw: act.raw}, nil
}

func targetOf(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return "pid " + strings.Join(s, ", ")
}
