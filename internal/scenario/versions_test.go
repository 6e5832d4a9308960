package scenario

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/lab/labtest"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

// representative are the scenarios run on every major version besides
// the one TestScenarios runs them all on: together they send every
// catalog query (healthy), sample sessions and locks (lock-chain,
// migration-lock-queue), and run every experiment that needs no JIT: an
// index on a copy and EXPLAIN ANALYZE (queue-poll), a cast (implicit-casts),
// pgstattuple (bloated-scan), pgstatindex (queue-churn), a fresh ANALYZE on
// a copy (fresh-changes), and the health classes' catalog reads: a failed
// concurrent build (unread-indexes), a prepared transaction VACUUM works
// behind (vacuum-held-back), sequences read twice (ids-running-out), an
// index rebuilt on a copy (sparse-index), checkpoint counters where the
// view moved in 17 (wal-pressure), frozen ages and the transaction-id
// clock (freeze-held-back), autovacuum's workers read twice and a VACUUM
// timed at two throttles (vacuum-falls-behind), a standby made from a copy
// of the data directory and its replay held by a report (replica-report-stalls);
// and the plan classes' re-runs: work_mem raised for a spill
// (report-spills), a prepared statement's generic and custom plans
// (generic-plan-skew), a partition key's range beside its cast
// (partition-scan-all, pg_partition_tree), an operator class and an ICU
// collation read from the catalog (like-prefix-scan), and CREATE
// STATISTICS on a copy (correlated-filter), a loop of lookups sampled
// and timed from pgmedic's side (n-plus-one), and a planner setting tried
// on the top statements (page-cost-cached); and a server of its own whose
// max_connections idle sessions fill, its refusals read from its log over
// the connection, in each major's wording (connections-held-idle).
var representative = []string{"healthy", "lock-chain", "migration-lock-queue", "queue-poll", "implicit-casts", "bloated-scan", "queue-churn", "fresh-changes",
	"unread-indexes", "vacuum-held-back", "ids-running-out", "sparse-index", "wal-pressure", "freeze-held-back", "vacuum-falls-behind", "replica-report-stalls",
	"report-spills", "generic-plan-skew", "partition-scan-all", "like-prefix-scan", "correlated-filter", "n-plus-one", "page-cost-cached",
	"connections-held-idle"}

// provedOnTwin are the representative scenarios checked with a twin on
// every major, and the rule each must have confirmed there: their
// experiments read what changes between versions (VACUUM's counts, which
// 13 and 14 pass through a collector process; a page read's cost).
var provedOnTwin = map[string]string{"vacuum-held-back": "xmin-horizon", "vacuum-falls-behind": "autovacuum-lag"}

// TestEveryVersion runs the representative scenarios on a lab cluster of
// each PostgreSQL major version from 13 to 18 (`pgmedic lab install N`
// fetches those Debian does not have). The majors run side by side, two
// at a time: each has its own cluster, and every expectation is judged on what the experiments
// measured, not on how fast the machine was.
func TestEveryVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of every major version")
	}
	// The three lab tests of this package each run on clusters of their
	// own and spend most of their time waiting (sampling windows, sleeping
	// clients): side by side they take the time of the longest.
	t.Parallel()
	full, _ := lab.FindServer("", 0)
	ctx := context.Background()
	opts := versionOpts()
	// Two majors at once, whatever go test's -parallel (the cores), beside
	// the package's other lab tests: a major's scenarios mostly wait on
	// their sampling windows and clients, but three at once, with the
	// rest, loaded 2 cores enough to squeeze ratios of plan times (a
	// planner setting measured 1.2x for its usual 3.4x) and to push
	// asyncpg's JIT-compiled introspection past the 5 s statement_timeout
	// (measured again with the incident scenarios: 42 s of JIT time).
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, major := range lab.Majors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(fmt.Sprintf("pg%d", major), func(t *testing.T) { everyVersionOn(t, ctx, major, full, opts) })
		}()
	}
}

// everyVersionOn runs the representative scenarios on a cluster of one
// major.
func everyVersionOn(t *testing.T, ctx context.Context, major int, full lab.Server, opts diagnose.Options) {
	if major == full.Major {
		t.Skip("TestScenarios runs every scenario on this server")
	}
	if _, err := lab.FindServer("", major); err != nil {
		testkit.Missing(t, fmt.Sprintf("PostgreSQL %d server binaries (pgmedic lab install %d)", major, major), err)
	}
	c, err := lab.Create(ctx, lab.Options{Major: major})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy(context.Background()) })
	if c.Major != major || !strings.Contains(c.Version, fmt.Sprintf(" %d.", major)) {
		t.Fatalf("asked for PostgreSQL %d, got %s", major, c.Version)
	}
	if !c.HasTool("pg_resetwal") {
		t.Run("multixact member space read", func(t *testing.T) { membersReadOn(t, ctx, c) })
	}
	var list []Scenario
	for _, name := range representative {
		s, err := Find(name)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, s)
	}
	attempt := func(t *testing.T, i int) (problems []string) {
		s := list[i]
		if cpuBound[s.Name] {
			labtest.CPUHeavy(t)
		}
		o := opts
		o.Log = t.Logf
		rule, proved := provedOnTwin[s.Name]
		o.Twin = proved
		res, err := Run(ctx, c, s, "test", o, model.Info)
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", s.Name, err)}
		}
		if proved && !confirmed(res, rule) {
			problems = append(problems, fmt.Sprintf("%s on PostgreSQL %d: %s not confirmed on the twin: %+v", s.Name, major, rule, res.Report.Findings))
		}
		if res.Skipped != "" {
			t.Logf("%s on PostgreSQL %d: skipped: %s", s.Name, major, res.Skipped)
			return problems
		}
		return append(problems, problemsOn(res, major)...)
	}
	var retries again
	// Those with clusters of their own beside the others; the
	// scenarios that wait stay in the first lane, because the
	// majors already run side by side.
	RunLanes(ctx, list, c, nil, func(i int, c *lab.Cluster) bool {
		t.Run(list[i].Name, func(t *testing.T) { retries.judge(t, i, attempt(t, i)) })
		return true
	})
	retries.run(t, attempt)
}

// TestNeeds: on a build without JIT the scenarios that are about JIT are
// skipped with the reason, an expectation about JIT is left out of one that
// is not, and on a build with JIT nothing is.
func TestNeeds(t *testing.T) {
	npm := &lab.Cluster{Version: "postgres (PostgreSQL) 17.10", Major: 17, Source: "pgmedic lab install"}
	debian := &lab.Cluster{Version: "postgres (PostgreSQL) 15.20", Major: 15, Source: "Debian", JIT: true, HypoPG: true}
	for name, skipped := range map[string]bool{"jit-oltp": true, "connection-storm": true, "asyncpg-introspection": false, "healthy": false} {
		s, err := Find(name)
		if err != nil {
			t.Fatal(err)
		}
		why := s.NotRunOn(npm)
		if (why != "") != skipped || (skipped && !strings.Contains(why, "needs JIT") || skipped && !strings.Contains(why, "17.10")) {
			t.Errorf("%s on a build without JIT: %q", name, why)
		}
		if why := s.NotRunOn(debian); why != "" {
			t.Errorf("%s on Debian's build: %q", name, why)
		}
		on, left := s.On(npm)
		if name == "asyncpg-introspection" && (len(left) != 1 || len(on.Expect) != 1 || on.Expect[0].Rule != "driver-introspection") {
			t.Errorf("asyncpg-introspection without JIT: expects %v, left out %v", on.Expect, left)
		}
		if _, left := s.On(debian); len(left) != 0 {
			t.Errorf("%s on Debian's build left out %v", name, left)
		}
	}
}

// confirmed says whether the run confirmed a finding of rule.
func confirmed(res *Result, rule string) bool {
	for _, f := range res.Report.Findings {
		if f.Rule == rule && f.Verification.Status == model.Confirmed {
			return true
		}
	}
	return false
}

// reportOf is the scenario's whole check report as text, for a failure:
// a finding that did not appear says why only there (the sessions
// sampled fewer times than asked, a rule skipped, a threshold not met by
// the evidence other findings show).
func reportOf(res *Result) string {
	if res.Report == nil {
		return ""
	}
	var b strings.Builder
	if err := report.Render(&b, res.Report, "text"); err != nil {
		return "\n(the report could not be rendered: " + err.Error() + ")"
	}
	return "\nthe report:\n" + b.String()
}

// verdictsOf says how the findings of the rules an expectation missed
// were verified: a missing "confirmed" is a refutation, a skip or an
// experiment that could not run, and each means something else.
func verdictsOf(res *Result) string {
	var b strings.Builder
	for _, m := range res.Missing {
		rule, _, _ := strings.Cut(m, " ")
		for _, f := range res.Report.Findings {
			if f.Rule != rule {
				continue
			}
			v := f.Verification
			fmt.Fprintf(&b, "\n\t%s (%s): %s", f.Rule, f.Object.Name, v.Status)
			if v.Before != nil && v.After != nil {
				fmt.Fprintf(&b, ", %v -> %v %s", v.Before.Value, v.After.Value, v.After.Unit)
			}
			if v.Reason != "" {
				fmt.Fprintf(&b, "; %s", v.Reason)
			}
		}
	}
	return b.String()
}

// incidents are the incident library's scenarios with clusters of their
// own. Each runs on every major, beside TestEveryVersion rather than in
// its lanes: it needs only the major's build, not its shared cluster, and
// the majors' lanes are the package's longest path. multixact-members is
// not among them: it sets the member space with pg_resetwal, which the
// npm builds of the other majors lack, and what its finding reads is
// checked on each of them by membersReadOn instead.
var incidents = []string{"notify-commits", "wraparound-ddl-queue", "tail-truncation", "subtrans-overflow"}

// TestIncidentsOnEveryMajor runs the incident scenarios on a cluster of
// their own of each major (TestScenarios runs them on the default one),
// one major after another.
func TestIncidentsOnEveryMajor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters of every major version")
	}
	t.Parallel()
	full, _ := lab.FindServer("", 0)
	ctx := context.Background()
	for _, major := range lab.Majors {
		t.Run(fmt.Sprintf("pg%d", major), func(t *testing.T) {
			if major == full.Major {
				t.Skip("TestScenarios runs them on this server")
			}
			srv, err := lab.FindServer("", major)
			if err != nil {
				testkit.Missing(t, fmt.Sprintf("PostgreSQL %d server binaries (pgmedic lab install %d)", major, major), err)
			}
			build := &lab.Cluster{BinDir: srv.BinDir, Major: major}
			for _, name := range incidents {
				t.Run(name, func(t *testing.T) {
					s, err := Find(name)
					if err != nil {
						t.Fatal(err)
					}
					if cpuBound[name] {
						labtest.CPUHeavy(t)
					}
					o := versionOpts()
					o.Log = t.Logf
					res, err := Run(ctx, build, s, "test", o, model.Info)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					passedOn(t, res, major)
				})
			}
		})
	}
}

// versionOpts are check's options for the scenarios run on every major.
func versionOpts() diagnose.Options {
	return diagnose.Options{Runs: 5, StatementTimeout: 5 * time.Second, CopyTimeout: 2 * time.Minute,
		MaxCopyBytes: 1 << 30, MaxTables: 200000, MaxStatements: 10000}
}

// passedOn fails the test when a scenario run on major missed what it
// must produce, produced what it must not, or confirmed a finding without
// two measured numbers.
func passedOn(t *testing.T, res *Result, major int) {
	t.Helper()
	for _, p := range problemsOn(res, major) {
		t.Error(p)
	}
}

// problemsOn is what passedOn fails for.
func problemsOn(res *Result, major int) (problems []string) {
	if !res.Passed() {
		problems = append(problems, fmt.Sprintf("%s on PostgreSQL %d: missing %v, unexpected %v%s%s", res.Scenario, major, res.Missing, res.Unexpected, verdictsOf(res), reportOf(res)))
	}
	for _, f := range res.Report.Findings {
		if v := f.Verification; v.Status == model.Confirmed && (v.Before == nil || v.After == nil) {
			problems = append(problems, fmt.Sprintf("%s: %s confirmed without two measured numbers", res.Scenario, f.Rule))
		}
	}
	return problems
}
