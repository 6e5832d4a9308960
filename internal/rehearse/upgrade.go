package rehearse

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Setting is one server setting as pg_settings shows it: Reset is the
// server's value for the role and database, before the session's own
// SETs (pgmedic's session sets jit = off).
type Setting struct {
	Boot, Reset, Value, Source, Category, Context, Type string
}

// Configured says the server sets it (its configuration, the role's or
// the database's settings): its value is not the binary's default.
func (s Setting) Configured() bool { return s.Reset != s.Boot }

// Server is what an upgrade changes about a server: its settings and
// whether it can compile with JIT (a build without LLVM cannot, whatever
// jit says).
type Server struct {
	Version  string
	Settings map[string]Setting
	JIT      bool
}

// ReadServer reads a server's settings over conn.
func ReadServer(ctx context.Context, conn *pgconn.PgConn) (*Server, error) {
	// pg_jit_available() answers for the session's jit; it is asked with
	// jit on (SET LOCAL, in a transaction rolled back).
	res, err := conn.Exec(ctx, `BEGIN; SET LOCAL jit = on; `+envelope.Tag+`SELECT name, coalesce(boot_val, ''), coalesce(reset_val, ''), setting, source, category, context, vartype, current_setting('server_version'),
		(SELECT pg_jit_available())::text FROM pg_settings; ROLLBACK`).ReadAll()
	if err != nil || len(res) < 3 {
		return nil, fmt.Errorf("reading pg_settings: %s", envelope.Message(err))
	}
	s := &Server{Settings: map[string]Setting{}}
	for _, r := range res[2].Rows {
		s.Settings[string(r[0])] = Setting{Boot: string(r[1]), Reset: string(r[2]), Value: string(r[3]), Source: string(r[4]), Category: string(r[5]), Context: string(r[6]), Type: string(r[7])}
		s.Version, s.JIT = string(r[8]), string(r[9]) == "true"
	}
	return s, nil
}

// SettingChange is what the upgrade changes about one setting.
type SettingChange struct {
	Name string `json:"name"`
	// Kind: "default changed" (the source leaves it at its default, and
	// the new major's differs), "removed" (the source sets it and the new
	// major has no such setting), "new planner feature" (a planner
	// method the old major did not have, on by default), "jit
	// available" (the new build compiles with JIT and jit is on).
	Kind string `json:"kind"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
	// Toggle is the session setting that puts the old behaviour back on
	// the new major ("" when there is none).
	Toggle string `json:"toggle,omitempty"`
}

// planRelevant says whether a setting can change how fast a
// statement runs: the planner's and the executor's.
func planRelevant(name string, s Setting) bool {
	return strings.HasPrefix(s.Category, "Query Tuning") || strings.HasPrefix(name, "jit") ||
		slices.Contains([]string{"work_mem", "hash_mem_multiplier", "max_parallel_workers_per_gather", "effective_io_concurrency", "default_statistics_target", "plan_cache_mode"}, name)
}

// Changes compares the source's major (a, with the source's own
// settings in src) with the target's (b): what the upgrade changes for
// this server.
func Changes(src, a, b *Server) []SettingChange {
	var out []SettingChange
	settable := func(s Setting) bool { return s.Context == "user" || s.Context == "superuser" }
	for _, name := range sortedNames(b.Settings) {
		sb := b.Settings[name]
		sa, inA := a.Settings[name]
		ss, inSrc := src.Settings[name]
		switch {
		case !inA && sb.Type == "bool" && strings.HasPrefix(name, "enable_") && sb.Boot == "on":
			out = append(out, SettingChange{Name: name, Kind: "new planner feature", New: "on", Toggle: fmt.Sprintf("SET %s = off", name)})
		case inA && sa.Boot != sb.Boot && planRelevant(name, sb) && (!inSrc || !ss.Configured()):
			c := SettingChange{Name: name, Kind: "default changed", Old: sa.Boot, New: sb.Boot}
			if settable(sb) {
				c.Toggle = fmt.Sprintf("SET %s = %s", name, sqlparse.QuoteLiteral(sa.Boot))
			}
			out = append(out, c)
		}
	}
	for _, name := range sortedNames(src.Settings) {
		// A read-only setting (context internal: lc_collate, lc_ctype
		// before 16, the build's block size) was never set by anyone:
		// one the new major no longer lists is not removed from the
		// server's configuration.
		if ss := src.Settings[name]; ss.Configured() && ss.Source != "override" && ss.Context != "internal" {
			if _, ok := b.Settings[name]; !ok && !strings.Contains(name, ".") {
				out = append(out, SettingChange{Name: name, Kind: "removed", Old: ss.Value})
			}
		}
	}
	if !a.JIT && b.JIT && b.Settings["jit"].Reset == "on" {
		out = append(out, SettingChange{Name: "jit", Kind: "jit available", Old: "no JIT in this build", New: "JIT compiles statements above jit_above_cost (" + b.Settings["jit_above_cost"].Reset + ")", Toggle: "SET jit = off"})
	}
	return out
}

func sortedNames(m map[string]Setting) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Cause is a slower statement shape's cause, measured: the shape's
// captured statements timed on the new major as it is and with one
// toggle, and on the old major.
type Cause struct {
	Setting string `json:"setting"`
	Toggle  string `json:"toggle"`
	// OldMS, NewMS and FixedMS are the median time of the sample on the
	// old major, on the new, and on the new with the toggle.
	OldMS   float64 `json:"old_ms"`
	NewMS   float64 `json:"new_ms"`
	FixedMS float64 `json:"fixed_ms"`
	// Explains: the slowdown was measured here too (the new major at
	// least 1.2x the old), and the toggle takes back at least half of it
	// and makes it at least 1.2x faster. Reproduced says the slowdown
	// was measured: a toggle that speeds up a statement the new major
	// does not run slower explains no slowdown.
	Explains   bool `json:"explains"`
	Reproduced bool `json:"reproduced"`
	// Rounds is how many times each variant ran: more than the first
	// five when those did not reproduce the slowdown.
	Rounds int `json:"rounds,omitempty"`
}

// Samples are up to n of a shape's captured statements, spread over the
// capture.
func Samples(w *capture.Workload, shape int32, n int) []capture.Statement {
	var all []capture.Statement
	for _, s := range w.Sessions {
		for _, st := range s.Statements {
			if st.Shape == shape && !st.Failed && st.Kind != capture.CopyOut {
				all = append(all, st)
			}
		}
	}
	if len(all) <= n {
		return all
	}
	out := make([]capture.Statement, 0, n)
	for i := range n {
		out = append(out, all[i*len(all)/n])
	}
	return out
}

// timeSample runs the sample once, each statement in a transaction that
// is rolled back (a write leaves nothing), after toggle, and returns
// the total ms of the statements alone.
func timeSample(ctx context.Context, conn *pgconn.PgConn, sample []capture.Statement, toggle string) (float64, error) {
	total := 0.0
	for _, st := range sample {
		pre := "BEGIN"
		if toggle != "" {
			pre += "; " + strings.Replace(toggle, "SET ", "SET LOCAL ", 1)
		}
		if _, err := conn.Exec(ctx, pre).ReadAll(); err != nil {
			return 0, fmt.Errorf("%s: %s", toggle, envelope.Message(err))
		}
		start := time.Now()
		var err error
		if st.Kind == capture.Extended {
			_, err = conn.ExecParams(ctx, st.SQL, st.Values(), nil, nil, nil).Close()
		} else {
			_, err = conn.Exec(ctx, st.SQL).ReadAll()
		}
		total += float64(time.Since(start).Microseconds()) / 1000
		conn.Exec(ctx, "ROLLBACK").ReadAll()
		if err != nil {
			return 0, fmt.Errorf("running the shape's statement: %s", envelope.Message(err))
		}
	}
	return total, nil
}

// rounds is how many times each variant of a cause's measurement runs;
// the median of five is robust to two slow rounds.
const rounds = 5

// FindCause times a slower shape's sample on the old major (oldConn) and
// on the new (newConn), as it is and with each toggle, and returns the
// toggle that takes back most of the slowdown, or a cause that explains
// nothing when none helps. Each round runs every variant once, in turn
// (starting one further on each round), so that a moment when the machine
// is busy falls on all of them; the medians over the rounds are compared.
func FindCause(ctx context.Context, oldConn, newConn *pgconn.PgConn, sample []capture.Statement, changes []SettingChange) (*Cause, error) {
	// The likeliest causes first (JIT, then planner methods new in the
	// major, then defaults); at most four are timed.
	ordered := slices.Clone(changes)
	rank := map[string]int{"jit available": 0, "new planner feature": 1, "default changed": 2}
	slices.SortStableFunc(ordered, func(a, b SettingChange) int { return rank[a.Kind] - rank[b.Kind] })
	var toggles []SettingChange
	for _, c := range ordered {
		if c.Toggle != "" && len(toggles) < 4 && togglesPlan(ctx, newConn, sample, c) {
			toggles = append(toggles, c)
		}
	}
	// One warm-up each: the first run reads the pages into the cache; a
	// toggle the server refuses is dropped here.
	timeSample(ctx, oldConn, sample, "")
	timeSample(ctx, newConn, sample, "")
	var usable []SettingChange
	for _, c := range toggles {
		if _, err := timeSample(ctx, newConn, sample, c.Toggle); err == nil {
			usable = append(usable, c)
		}
	}
	times := make([][]float64, 2+len(usable))
	round := func(r int) error {
		// Each round starts one variant further on, so none always runs
		// first (right after another variant's JIT compile or a busy
		// moment's end).
		for k := range times {
			i := (k + r) % len(times)
			conn, toggle := newConn, ""
			switch {
			case i == 0:
				conn = oldConn
			case i >= 2:
				toggle = usable[i-2].Toggle
			}
			ms, err := timeSample(ctx, conn, sample, toggle)
			if err != nil {
				return err
			}
			times[i] = append(times[i], ms)
		}
		return nil
	}
	var best *Cause
	// The replay saw the shape slower; when the rounds do not (a busy
	// moment fell on the old major's runs), more rounds are run, up to
	// maxRounds in all, and the medians over all of them decide.
	for r := 0; r < maxRounds; r++ {
		if err := round(r); err != nil {
			return nil, err
		}
		if r+1 < rounds {
			continue
		}
		best = causeOf(times, usable)
		if best.Reproduced && (best.Explains || len(usable) == 0) {
			break
		}
	}
	best.Rounds = len(times[0])
	return best, nil
}

// maxRounds bounds the rounds FindCause runs when the first ones do not
// reproduce the slowdown.
const maxRounds = 3 * rounds

// causeOf is the toggle whose median over the rounds is the lowest, and
// whether it explains the slowdown.
func causeOf(times [][]float64, usable []SettingChange) *Cause {
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		sort.Float64s(s)
		return model.Percentile(s, 0.5)
	}
	oldMS, newMS := median(times[0]), median(times[1])
	best := &Cause{OldMS: oldMS, NewMS: newMS}
	for i, c := range usable {
		if fixed := median(times[2+i]); best.Toggle == "" || fixed < best.FixedMS {
			best.Setting, best.Toggle, best.FixedMS = c.Name, c.Toggle, fixed
		}
	}
	best.Reproduced, best.Explains = explains(oldMS, newMS, best.FixedMS, best.Toggle != "")
	return best
}

// explains judges a toggle's times: the slowdown must show here too (the
// new major at least 1.2x the old), and the toggle take back at least
// half of it and make the statement at least 1.2x faster. A toggle that
// speeds up a statement the new major does not run slower (2.585 ms on
// the old, 0.457 on the new, 0.218 with it) explains no slowdown.
func explains(oldMS, newMS, fixedMS float64, toggled bool) (reproduced, explained bool) {
	reproduced = newMS >= 1.2*oldMS
	return reproduced, reproduced && toggled && newMS-fixedMS >= 0.5*(newMS-oldMS) && newMS >= 1.2*fixedMS
}

// PlanShape is a statement's plan as its node types, depth first
// ("Hash Join(Seq Scan,Hash(Index Scan))"): two majors that plan it
// alike give the same string.
func PlanShape(ctx context.Context, conn *pgconn.PgConn, st capture.Statement) (string, error) {
	p, err := explainPlan(ctx, conn, st)
	if err != nil {
		return "", err
	}
	return p.Plan.String(), nil
}

// explained is what EXPLAIN (FORMAT JSON) says of a statement's plan:
// its nodes, and whether it would be compiled by JIT.
type explained struct {
	Plan planNode        `json:"Plan"`
	JIT  json.RawMessage `json:"JIT"`
}

func explainPlan(ctx context.Context, conn *pgconn.PgConn, st capture.Statement) (*explained, error) {
	sql := "EXPLAIN (FORMAT JSON) " + st.SQL
	var res []*pgconn.Result
	var err error
	if st.Kind == capture.Extended {
		r := conn.ExecParams(ctx, sql, st.Values(), nil, nil, nil).Read()
		res, err = []*pgconn.Result{r}, r.Err
	} else {
		res, err = conn.Exec(ctx, sql).ReadAll()
	}
	if err != nil || len(res) == 0 || len(res[0].Rows) == 0 {
		return nil, fmt.Errorf("EXPLAIN: %s", envelope.Message(err))
	}
	var doc []explained
	if err := json.Unmarshal(res[0].Rows[0][0], &doc); err != nil || len(doc) == 0 {
		return nil, fmt.Errorf("reading EXPLAIN's JSON: %v", err)
	}
	return &doc[0], nil
}

// togglesPlan says whether a setting can be what changed the sample's
// time, read from its plans on the new major alone: a planner feature
// the plan of none of its statements changes with (SET ... = off in a
// rolled-back transaction), or JIT where none of them would be compiled,
// did not slow them down, whatever a timing under load says (a primary
// key's lookup holds no aggregate for enable_presorted_aggregate to
// change). Other settings (a default that changes how a plan runs, not
// which) are left to the timing.
func togglesPlan(ctx context.Context, conn *pgconn.PgConn, sample []capture.Statement, c SettingChange) bool {
	if c.Kind != "new planner feature" && c.Kind != "jit available" {
		return true
	}
	for _, st := range sample[:min(len(sample), 3)] {
		as, err := explainPlan(ctx, conn, st)
		if err != nil {
			continue // not a statement with a plan (BEGIN, SET)
		}
		if c.Kind == "jit available" {
			if len(as.JIT) > 0 {
				return true
			}
			continue
		}
		if _, err := conn.Exec(ctx, "BEGIN; "+strings.Replace(c.Toggle, "SET ", "SET LOCAL ", 1)).ReadAll(); err != nil {
			return true // the timing decides
		}
		off, err := explainPlan(ctx, conn, st)
		conn.Exec(ctx, "ROLLBACK").ReadAll()
		if err != nil || off.Plan.String() != as.Plan.String() {
			return true
		}
	}
	return false
}

type planNode struct {
	Type  string     `json:"Node Type"`
	Plans []planNode `json:"Plans"`
}

func (n planNode) String() string {
	if len(n.Plans) == 0 {
		return n.Type
	}
	var kids []string
	for _, k := range n.Plans {
		kids = append(kids, k.String())
	}
	return n.Type + "(" + strings.Join(kids, ",") + ")"
}

// UpgradeShape is one statement shape across an upgrade: replay's
// comparison of it, its plan on each major, and, when it got slower, the
// cause measured.
type UpgradeShape struct {
	Query      string              `json:"query"`
	Change     *replay.ShapeChange `json:"change"`
	PlanOld    string              `json:"plan_old,omitempty"`
	PlanNew    string              `json:"plan_new,omitempty"`
	Cause      *Cause              `json:"cause,omitempty"`
	CauseError string              `json:"cause_error,omitempty"`
}

// Slower says the shape got slower by at least minRatio, at the lower
// end of its interval: an upgrade is judged on what matters, not on a
// few percent two builds differ by.
func (s *UpgradeShape) Slower(minRatio float64) bool {
	return s.Change != nil && s.Change.Verdict == replay.Slower && s.Change.Ratio.Low >= minRatio
}

// PlanChanged says the two majors plan the shape differently.
func (s *UpgradeShape) PlanChanged() bool {
	return s.PlanOld != "" && s.PlanNew != "" && s.PlanOld != s.PlanNew
}
