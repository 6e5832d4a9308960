// Package scenario holds the lab's catalogue: each scenario reproduces one
// incident (or a healthy control) in its own database, and says which
// findings pgmedic must and must not produce on it.
//
// A scenario is a folder under catalog/:
//
//	description.md   first line: the summary; then what it reproduces and why
//	setup.sql        schema and data, run as the application role
//	expect.json      the findings it must and must not produce, and the
//	                 statements an engineer would paste into explain
//	workload.sql     statements run in order on one connection
//	                 (first line "-- pgmedic: repeat N" runs them N times)
//	workload.pgbench a pgbench script (first line
//	                 "-- pgmedic: pgbench --client=C --transactions=T")
//
// A workload that needs a particular client or a race between sessions is
// Go code registered under the scenario's name in workloads.go; everything
// else is data, and adding such a scenario touches no Go file.
package scenario

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

//go:embed catalog
var catalog embed.FS

// Scenario is one folder of the catalogue, read.
type Scenario struct {
	Name        string
	Summary     string
	Description string
	// Expect lists findings that must appear (at warning or above).
	Expect []Expect `json:"expect"`
	// MustNot lists findings that must not appear at warning or above;
	// Rule "*" means no rule at all.
	MustNot []Expect `json:"must_not"`
	// Explain lists statements, with their literal values, that pgmedic
	// also diagnoses with explain --query --analyze, as an engineer does
	// with a statement from the application's log.
	Explain []string `json:"explain"`
	// DuringCheck runs the workload while check samples the sessions
	// (stalled clients, lock queues, connection pressure are seen only
	// then); the Go workload runs until its context ends. Sample is how
	// long check samples ("1s" when not given for such a scenario; a
	// scenario checked after its workload is not sampled).
	DuringCheck bool   `json:"during_check,omitempty"`
	Sample      string `json:"sample,omitempty"`
	// WarmUp is how long the workload runs before check starts, counted
	// from its Env.Ready when it signals one (GoWorkload.SignalsReady;
	// "0.5s" when not given), else from its start ("1.5s").
	WarmUp string `json:"warm_up,omitempty"`
	// PgBouncer, when set, puts a lab PgBouncer in front of the cluster
	// for the workload (Env.BouncerDSN) and has check sample its pools.
	PgBouncer *BouncerSpec `json:"pgbouncer,omitempty"`
	// Standby: the scenario needs a streaming standby of the server
	// (Env.StandbyDSN). On a lab cluster without one (lab up without
	// --standby, demo's) it runs on a cluster pair of its own, of the same
	// build, made for it and removed after.
	Standby bool `json:"standby,omitempty"`
	// OwnCluster: the scenario changes what is the whole server's (its
	// autovacuum workers, their settings) and must not meet the other
	// scenarios' databases there: it runs on a cluster of its own, of the
	// same build, made for it and removed after.
	OwnCluster bool `json:"own_cluster,omitempty"`
	// Waits: what the scenario proves is in sessions' states and waits
	// (locks, idle transactions, a pool's queue), not in CPU time or a
	// timed re-run, and its workload mostly sleeps: the demo and the tests
	// run it on a second cluster beside the others (see RunLanes).
	Waits bool `json:"waits,omitempty"`
	// QuietForExperiments: the experiments measure what the workload
	// itself causes on the whole server (snapshots its transactions
	// overflow), so the workload ends once check has sampled it, as it
	// does before a twin's experiments.
	QuietForExperiments bool `json:"quiet_for_experiments,omitempty"`
	// StatementTimeout is pgmedic's statement_timeout for this scenario's
	// check and experiments, when the default (5 s) is shorter than a
	// statement it must re-run takes on a loaded 2-core machine (a
	// statement compiled by JIT, asyncpg's introspection or jit-oltp's
	// report: 1-2 s quiet, past 5 s beside the other lab tests). What it
	// proves, a ratio of JIT's time to the query's, does not depend on it.
	StatementTimeout string `json:"statement_timeout,omitempty"`
	// ServerConfig are postgresql.conf lines ("max_connections = 20") of
	// the scenario's own cluster: a limit the scenario runs into, a log
	// check reads over the connection.
	ServerConfig []string `json:"server_config,omitempty"`
	// ServerFeatures lists what the scenario needs of the server beyond
	// its core: "jit" (a build with LLVM), "hypopg", "pg_stat_wal" (14+) or
	// "pg_resetwal" (a build with the server's tools, not only the server).
	// Where the lab's build lacks one, the scenario is not run, and says
	// so. (A rule's Needs are the sources it reads; a workload's Clients the
	// programs it drives.)
	ServerFeatures []string `json:"server_features,omitempty"`
	// Setup holds the statements of setup.sql.
	Setup []string
	// SQL holds the statements of workload.sql, run Repeat times.
	SQL    []string
	Repeat int
	// Pgbench is the workload.pgbench script and PgbenchArgs the options
	// its first line gives.
	Pgbench     string
	PgbenchArgs []string
	// Go is the registered Go workload, if any.
	Go Workload
	// Rehearse makes the scenario a rehearsal of a change: its workload
	// is captured from the server's log, and `rehearse migration` runs
	// under it (see RehearseSpec). Check does not run.
	Rehearse *RehearseSpec `json:"rehearse,omitempty"`
}

// RehearseSpec is a rehearsal scenario's change. A migration: as a team
// wrote it (rehearse must find it risky, and its safe form must not
// queue the application) and the same change written safely (rehearse
// must pass it). Or an upgrade from major From (the scenario's own
// cluster) to major To: rehearse upgrade must name Cause as the reason a
// shape got slower, or, with no Cause, pass it.
type RehearseSpec struct {
	// Capture is how long the workload runs while the log captures it.
	Capture string `json:"capture"`
	From    int    `json:"from,omitempty"`
	To      int    `json:"to,omitempty"`
	Cause   string `json:"cause,omitempty"`
	// Migration and Safe are files of the scenario's folder.
	Migration string `json:"migration"`
	Safe      string `json:"safe"`
	// MinRatio: the application's p99 during the migration as written
	// must be at least this many times its p99 during the safe form.
	MinRatio float64 `json:"min_ratio"`
	// The files' contents.
	MigrationSQL, SafeSQL []byte `json:"-"`
}

// BouncerSpec is the PgBouncer a scenario runs behind.
type BouncerSpec struct {
	PoolSize int    `json:"pool_size"`
	Mode     string `json:"pool_mode,omitempty"`
}

// Expect matches findings.
type Expect struct {
	Rule string `json:"rule"`
	// Confirmed requires verification status "confirmed".
	Confirmed bool `json:"confirmed,omitempty"`
	// Object, when set, must be a substring of the finding's object name.
	Object string `json:"object,omitempty"`
	// Title, when set, must be a substring of the finding's title (a
	// figure only one source gives, as the refusals a server logged).
	Title string `json:"title,omitempty"`
	// MinRatio, when set, requires before/after of at least this much.
	MinRatio float64 `json:"min_ratio,omitempty"`
	// Measured requires the experiment's two numbers, whichever way they
	// go: the finding counts confirmed (at its severity) or refuted (at
	// info). For a fix whose worth depends on the machine (more memory
	// for a spill whose temporary files sit in the page cache), or whose
	// rank does: a confirmed index is ranked by what it saves of the
	// application's mean time, which the load while the workload ran
	// stretches (with Confirmed, the proof itself is still required).
	Measured bool `json:"measured,omitempty"`
	// ServerFeature, when set ("jit", "hypopg", "pg_stat_wal"), holds the expectation only on a
	// build that has it; elsewhere it is left out, and the result says so.
	ServerFeature string `json:"server_feature,omitempty"`
}

// String names the expectation in a test failure or the demo report.
func (e Expect) String() string {
	s := e.Rule
	if e.Object != "" {
		s += " on " + e.Object
	}
	if e.Title != "" {
		s += fmt.Sprintf(" saying %q", e.Title)
	}
	if e.Measured {
		s += " (measured, either way)"
	}
	if e.Confirmed {
		s += " (confirmed"
		if e.MinRatio > 0 {
			s += fmt.Sprintf(", before >= %gx after", e.MinRatio)
		}
		s += ")"
	}
	return s
}

// matches says whether a finding is the one expected.
func (e Expect) matches(f model.Finding) bool {
	if e.Rule != "*" && f.Rule != e.Rule {
		return false
	}
	if e.Object != "" && !strings.Contains(f.Object.Name, e.Object) {
		return false
	}
	if e.Title != "" && !strings.Contains(f.Title, e.Title) {
		return false
	}
	if e.Measured {
		v := f.Verification
		if (v.Status != model.Confirmed && v.Status != model.Refuted) || v.Before == nil || v.After == nil {
			return false
		}
	}
	if e.Confirmed {
		v := f.Verification
		if v.Status != model.Confirmed || v.Before == nil || v.After == nil {
			return false
		}
		if e.MinRatio > 0 && v.Gain() < e.MinRatio {
			return false
		}
	}
	return true
}

// Evaluate compares findings with a scenario's expectations. Only warning
// and critical findings count: info findings are advice, not diagnoses.
func (s Scenario) Evaluate(findings []model.Finding) (missing, unexpected []string) {
	missing, unexpected = []string{}, []string{}
	for _, e := range s.Expect {
		found := false
		for _, f := range findings {
			if (f.Severity >= model.Warning || e.Measured) && e.matches(f) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, e.String())
		}
	}
	for _, e := range s.MustNot {
		for _, f := range findings {
			if f.Severity >= model.Warning && e.matches(f) {
				unexpected = append(unexpected, f.Rule+": "+f.Title)
			}
		}
	}
	return missing, unexpected
}

// All reads every scenario of the catalogue, sorted by name. The catalogue
// is compiled in, so an error here is a broken folder, which the tests
// catch.
func All() ([]Scenario, error) {
	dirs, err := fs.ReadDir(catalog, "catalog")
	if err != nil {
		return nil, err
	}
	var list []Scenario
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		s, err := load(catalog, path.Join("catalog", d.Name()))
		if err != nil {
			return nil, err
		}
		list = append(list, s)
	}
	for name := range workloads {
		if !contains(list, name) {
			return nil, fmt.Errorf("the Go workload %q has no scenario folder", name)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
}

func contains(list []Scenario, name string) bool {
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

// Majors are the PostgreSQL majors the catalogue's scenarios run on
// besides the lab's own server: an upgrade's two sides. `pgmedic lab
// install scenarios` installs those missing, so that the demo runs all of
// them.
func Majors(list []Scenario) []int {
	var out []int
	for _, s := range list {
		if r := s.Rehearse; r != nil && r.From != 0 {
			for _, m := range []int{r.From, r.To} {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// MissingMajor says a scenario needs a PostgreSQL major the lab has no
// server of, and how to install it.
func MissingMajor(major int) *MissingClient {
	return &MissingClient{Need: fmt.Sprintf("PostgreSQL %d", major), Install: fmt.Sprintf("pgmedic lab install %d", major),
		Also: "`pgmedic lab install scenarios` installs every major the scenarios need"}
}

// Find returns the named scenario.
func Find(name string) (Scenario, error) {
	list, err := All()
	if err != nil {
		return Scenario{}, err
	}
	var names []string
	for _, s := range list {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q: known scenarios are %s", name, strings.Join(names, ", "))
}

// load reads one scenario folder.
func load(fsys fs.FS, dir string) (Scenario, error) {
	s := Scenario{Name: path.Base(dir), Go: workloads[path.Base(dir)].Run}
	fail := func(format string, args ...any) (Scenario, error) {
		return Scenario{}, fmt.Errorf("scenario %s: "+format, append([]any{s.Name}, args...)...)
	}
	desc, err := fs.ReadFile(fsys, path.Join(dir, "description.md"))
	if err != nil {
		return fail("%v", err)
	}
	s.Description = strings.TrimSpace(string(desc))
	s.Summary, _, _ = strings.Cut(s.Description, "\n")
	expect, err := fs.ReadFile(fsys, path.Join(dir, "expect.json"))
	if err != nil {
		return fail("%v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(expect)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fail("expect.json: %v", err)
	}
	if s.Setup, err = statements(fsys, path.Join(dir, "setup.sql")); err != nil {
		return fail("setup.sql: %v", err)
	}
	if len(s.Setup) == 0 {
		return fail("setup.sql holds no statement")
	}
	if b, err := fs.ReadFile(fsys, path.Join(dir, "workload.sql")); err == nil {
		if s.Repeat, err = directive(string(b), "repeat"); err != nil {
			return fail("workload.sql: %v", err)
		}
		// The directive is for pgmedic: the server must not see it, or it
		// would be part of the statement's text in pg_stat_statements.
		if s.SQL, err = sqlparse.Split(withoutDirective(string(b))); err != nil {
			return fail("workload.sql: %v", err)
		}
	}
	if b, err := fs.ReadFile(fsys, path.Join(dir, "workload.pgbench")); err == nil {
		s.Pgbench = string(b)
		if s.PgbenchArgs, err = pgbenchArgs(s.Pgbench); err != nil {
			return fail("workload.pgbench: %v", err)
		}
	}
	for name, v := range map[string]string{"sample": s.Sample, "warm_up": s.WarmUp} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 || d > time.Minute {
			return fail("expect.json: %s %q: want a duration up to 1m", name, v)
		}
	}
	needs := slices.Clone(s.ServerFeatures)
	for _, e := range s.Expect {
		if e.ServerFeature != "" {
			needs = append(needs, e.ServerFeature)
		}
	}
	for _, n := range needs {
		if _, ok := features[n]; !ok {
			return fail("expect.json: needs %q: want one of %s", n, strings.Join(slices.Sorted(maps.Keys(features)), ", "))
		}
	}
	if s.StatementTimeout != "" {
		if d, err := time.ParseDuration(s.StatementTimeout); err != nil || d <= 0 || d > 2*time.Minute {
			return fail("expect.json: statement_timeout %q: want a duration up to 2m", s.StatementTimeout)
		}
	}
	if len(s.ServerConfig) > 0 && !s.OwnCluster {
		return fail("server_config sets the server of a cluster of its own: set own_cluster")
	}
	for _, line := range s.ServerConfig {
		if name, _, ok := strings.Cut(line, "="); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(line, "\n#") {
			return fail("expect.json: server_config %q: want a line name = value", line)
		}
	}
	if r := s.Rehearse; r != nil {
		if d, err := time.ParseDuration(r.Capture); err != nil || d <= 0 || d > time.Minute {
			return fail("expect.json: rehearse.capture %q: want a duration up to 1m", r.Capture)
		}
		switch {
		case r.To != 0:
			if r.From == 0 || r.From >= r.To || r.Migration != "" {
				return fail("expect.json: rehearse an upgrade from a major to a later one (from, to), or a migration, not both")
			}
		default:
			if r.MigrationSQL, err = fs.ReadFile(fsys, path.Join(dir, r.Migration)); err != nil {
				return fail("rehearse.migration: %v", err)
			}
			if r.SafeSQL, err = fs.ReadFile(fsys, path.Join(dir, r.Safe)); err != nil {
				return fail("rehearse.safe: %v", err)
			}
		}
		if !s.OwnCluster || s.Go == nil {
			return fail("a rehearsal captures its Go workload from the server's log: set own_cluster and register the workload")
		}
	}
	if s.PgBouncer != nil && !s.DuringCheck {
		return fail("a PgBouncer is sampled while check runs: set during_check")
	}
	if s.DuringCheck && s.Go == nil {
		return fail("during_check needs a Go workload that runs until check is done")
	}
	if s.Go == nil && s.SQL == nil && s.Pgbench == "" {
		return fail("no workload: add workload.sql or workload.pgbench, or register a Go workload")
	}
	return s, nil
}

func statements(fsys fs.FS, name string) ([]string, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	return sqlparse.Split(string(b))
}

// directive reads "-- pgmedic: repeat N" from a workload's first line; 1
// without it.
func directive(text, word string) (int, error) {
	first, _, _ := strings.Cut(text, "\n")
	rest, ok := strings.CutPrefix(strings.TrimSpace(first), "-- pgmedic: "+word+" ")
	if !ok {
		return 1, nil
	}
	var n int
	if _, err := fmt.Sscanf(rest, "%d", &n); err != nil || n < 1 || n > 100000 {
		return 0, fmt.Errorf("%q: want a count from 1 to 100000", first)
	}
	return n, nil
}

// withoutDirective drops a first line that is a "-- pgmedic:" directive.
func withoutDirective(text string) string {
	first, rest, _ := strings.Cut(text, "\n")
	if strings.HasPrefix(strings.TrimSpace(first), "-- pgmedic:") {
		return rest
	}
	return text
}

// pgbenchArgs reads the options from "-- pgmedic: pgbench ...". Only the
// options that shape the load are accepted: the connection and the script
// are pgmedic's to give.
func pgbenchArgs(script string) ([]string, error) {
	first, _, _ := strings.Cut(script, "\n")
	rest, ok := strings.CutPrefix(strings.TrimSpace(first), "-- pgmedic: pgbench")
	if !ok {
		return nil, fmt.Errorf("the first line must be \"-- pgmedic: pgbench --client=C --transactions=T\"")
	}
	args := strings.Fields(rest)
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--client", "--jobs", "--transactions", "--protocol":
		default:
			return nil, fmt.Errorf("option %s is not one pgmedic passes to pgbench (--client, --jobs, --transactions, --protocol)", a)
		}
	}
	return args, nil
}

// NotRunOn says why the scenario cannot run on the cluster's build ("" when
// it can): what it needs that the build lacks.
func (s Scenario) NotRunOn(c *lab.Cluster) string {
	for _, n := range s.ServerFeatures {
		if why := lacks(c, n); why != "" {
			return why
		}
	}
	return ""
}

// On is the scenario as it runs on the cluster's build: expectations that
// need what the build lacks are left out, each with the reason.
func (s Scenario) On(c *lab.Cluster) (Scenario, []string) {
	var kept []Expect
	var left []string
	for _, e := range s.Expect {
		if why := lacks(c, e.ServerFeature); why != "" {
			left = append(left, e.String()+": "+why)
			continue
		}
		kept = append(kept, e)
	}
	s.Expect = kept
	return s, left
}

// features are what a scenario may need of the lab's build, each with
// the reason a build that lacks it gives.
var features = map[string]func(c *lab.Cluster, srv lab.Server) string{
	"jit": func(c *lab.Cluster, srv lab.Server) string {
		if c.JIT {
			return ""
		}
		return fmt.Sprintf("needs JIT, and this PostgreSQL %s (%s) was built without LLVM; run it on a build with JIT (Debian's postgresql-15)", srv.Version, srv.Source)
	},
	"hypopg": func(c *lab.Cluster, srv lab.Server) string {
		if c.HypoPG {
			return ""
		}
		return fmt.Sprintf("needs HypoPG, which is not installed for this PostgreSQL %s (%s); apt-get install postgresql-%d-hypopg", srv.Version, srv.Source, srv.Major)
	},
	"pg_stat_wal": func(c *lab.Cluster, srv lab.Server) string {
		if pgversion.Of(c.Major * 10000).StatWAL {
			return ""
		}
		return fmt.Sprintf("needs pg_stat_wal, new in PostgreSQL 14; this is %s", srv.Version)
	},
	// The npm builds carry initdb, pg_ctl and postgres only.
	"pg_resetwal": func(c *lab.Cluster, srv lab.Server) string {
		if c.HasTool("pg_resetwal") {
			return ""
		}
		return fmt.Sprintf("needs pg_resetwal to set the control file's counters, and this PostgreSQL %s (%s) carries only the server; run it on a build with the server's tools (Debian's postgresql-15)", srv.Version, srv.Source)
	},
}

func lacks(c *lab.Cluster, need string) string {
	if f := features[need]; f != nil {
		return f(c, c.Server())
	}
	return ""
}

// Isolated says the scenario runs on a cluster of its own when c is the
// lab's (OwnCluster, or a standby c does not have): nothing it does meets
// the scenarios that run on c, so it may run beside another isolated one.
func (s Scenario) Isolated(c *lab.Cluster) bool {
	return s.OwnCluster || s.Standby && c.Standby == nil
}

// LogsThroughCollector says the scenario's own cluster logs through the
// collector (logging_collector = on), so check reads its log over the
// connection as it would a production server's.
func (s *Scenario) LogsThroughCollector() bool {
	return s.OwnCluster && slices.ContainsFunc(s.ServerConfig, func(l string) bool { return strings.ReplaceAll(l, " ", "") == "logging_collector=on" })
}
