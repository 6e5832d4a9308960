// Package rules turns a model.Snapshot into findings. Rules are pure
// functions: no I/O, no clock, the same snapshot gives the same findings.
package rules

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Rule is one diagnosis. A rule reads any of the inputs pgmedic has: the
// collected snapshot (Check), one EXPLAIN plan (Plan), what a server log
// counted (Log), a CPU profile (Profile). Every rule is one entry of
// Registry, whatever it reads, and --rules selects from that one table in
// every command.
type Rule struct {
	ID    string
	Title string
	// Needs are the sources (model.Src*) Check reads. When one is
	// missing, Run lists the rule in skipped with the source's reason
	// and fix, so nothing is left out silently.
	Needs []string
	Check func(s *model.Snapshot) ([]model.Finding, []model.Skip)
	// Plan diagnoses one plan; PlanNeedsAnalyze says it reads actual rows
	// or times, so on a plain EXPLAIN it is skipped with a note.
	Plan             func(in PlanInput) []model.Finding
	PlanNeedsAnalyze bool
	// Log judges what a server log counted; Profile a CPU profile of the
	// server's backends.
	Log     func(in LogInput) []model.Finding
	Profile func(p model.Profile) []model.Finding
}

// owners are, for a rule, the rules whose finding about the same
// statement already explains what it would say: a scan the plan shows
// wasting reads is missing-index's, unless the check found why no plain
// index serves it (a LIKE prefix under a linguistic collation, a key
// hidden from partition pruning, a cast on the column) or already
// proposed the index itself. One problem, one finding.
var owners = map[string][]string{
	MissingIndexID: {MissingIndexID, CollationPrefixID, PartitionPruningID, ImplicitCastID},
}

// Owners lists the rules whose finding about a statement stands for a
// finding of rule about the same statement (the rule itself first).
func Owners(rule string) []string {
	if o, ok := owners[rule]; ok {
		return o
	}
	return []string{rule}
}

// Docs is the rule's page.
func (r Rule) Docs() string { return docsPath(r.ID) }

// Registry lists every rule once, in the order they run: adding a rule is
// adding its file (internal/rules/<id>.go, TestEveryRuleHasItsFile), its
// entry here, its page in docs/rules, its row in README.md and the
// scenario or plans that prove it (TestRegistryIsDocumentedAndProved; see
// CONTRIBUTING.md).
var Registry = []Rule{
	{ID: JITOverheadID, Title: "JIT compilation dominating short queries", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcRoleSets},
		Check: jitOverhead, Plan: planJIT, PlanNeedsAnalyze: true},
	{ID: DriverIntrospectionID, Title: "database drivers' catalog queries", Needs: []string{model.SrcStatements, model.SrcStatementsCut},
		Check: driverIntrospection},
	{ID: SlowPlanningID, Title: "planning slower than execution", Plan: slowPlanning},
	{ID: MissingIndexID, Title: "scans that an index would avoid", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcTables, model.SrcTablesCut, model.SrcIndexes, model.SrcColumns},
		Check: missingIndex, Plan: planMissingIndex, PlanNeedsAnalyze: true},
	{ID: QueueClaimRaceID, Title: "job-queue claims without FOR UPDATE SKIP LOCKED", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcLocks},
		Check: queueClaimRace},
	{ID: RandomPrimaryKeyID, Title: "random (uuid v4, hash) primary and unique keys", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcIndexes, model.SrcColumns},
		Check: randomPrimaryKey},
	{ID: TableBloatID, Title: "dead rows and updates that are never HOT", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcIndexes},
		Check: tableBloat, Log: tableBloatLog},
	{ID: StaleStatisticsID, Title: "statistics older than the table's churn", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcStatements, model.SrcStatementsCut},
		Check: staleStatistics, Log: staleStatisticsLog},
	{ID: ImplicitCastID, Title: "casts on the column side of predicates", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcCasts},
		Check: implicitCastStatements, Plan: implicitCast},
	{ID: IdleInTransactionID, Title: "sessions idle inside a transaction, holding locks", Check: idleInTransaction},
	{ID: LockContentionID, Title: "lock waits and the chain behind them", Check: lockContention, Log: lockContentionLog},
	{ID: NotifyLockID, Title: "NOTIFY in write transactions serialising commits", Check: notifyLock},
	{ID: SubtransactionOverflowID, Title: "savepoints past 64 a transaction making snapshots look rows up in pg_subtrans", Needs: []string{model.SrcSubtrans},
		Check: subtransactionOverflow},
	{ID: ClientStallID, Title: "time lost on the client's side of a session", Check: clientStall, Log: clientStallLog},
	{ID: ConnectionPressureID, Title: "more working sessions than cores, connections near the limit, churn", Check: connectionPressure, Log: connectionPressureLog},
	{ID: PoolSaturationID, Title: "PgBouncer pools whose clients queue while every server connection is busy", Check: poolSaturation, Log: poolSaturationLog},
	{ID: SortSpillID, Title: "sorts that spill to disk", Needs: []string{model.SrcStatements, model.SrcStatementsCut},
		Check: sortSpillStatements, Plan: sortSpill, PlanNeedsAnalyze: true},
	{ID: HashBatchesID, Title: "hashes split into batches on disk", Needs: []string{model.SrcStatements, model.SrcStatementsCut},
		Check: hashBatchesStatements, Plan: hashBatches, PlanNeedsAnalyze: true},
	{ID: MisestimateID, Title: "row estimates off by more than 100x", Plan: misestimate, PlanNeedsAnalyze: true},
	{ID: NestedLoopBlowupID, Title: "nested loops that rescan their inner side", Plan: nestedLoopBlowup, PlanNeedsAnalyze: true},
	{ID: LossyBitmapID, Title: "bitmap heap scans that went lossy", Plan: lossyBitmap, PlanNeedsAnalyze: true},
	{ID: LargeOffsetID, Title: "OFFSET that reads and discards rows", Plan: largeOffset, PlanNeedsAnalyze: true},
	{ID: HeapFetchesID, Title: "index-only scans that visit the heap", Plan: heapFetches, PlanNeedsAnalyze: true},
	{ID: UnusedIndexID, Title: "indexes never scanned on tables that are written", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcIndexes},
		Check: unusedIndex},
	{ID: DuplicateIndexID, Title: "indexes another index of the table covers", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcIndexes},
		Check: duplicateIndex},
	{ID: InvalidIndexID, Title: "indexes left invalid by a failed concurrent build", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcIndexes},
		Check: invalidIndex},
	{ID: IndexBloatID, Title: "B-tree indexes far larger than their rows need", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcIndexes, model.SrcColumns},
		Check: indexBloat},
	{ID: XminHorizonID, Title: "what keeps VACUUM from removing dead rows (the xmin horizon)", Needs: []string{model.SrcHorizon, model.SrcTables, model.SrcTablesCut},
		Check: xminHorizon},
	{ID: WraparoundID, Title: "transaction ids, multixacts and their member space closing on the wraparound limits", Needs: []string{model.SrcTables, model.SrcTablesCut, model.SrcDatabases},
		Check: wraparound, Log: wraparoundLog},
	{ID: SequenceExhaustionID, Title: "sequences and key columns near the end of their numbers", Needs: []string{model.SrcSequences},
		Check: sequenceExhaustion},
	{ID: AutovacuumLagID, Title: "autovacuum that does not get to the tables that need it: off, every worker busy, throttled", Needs: []string{model.SrcTables, model.SrcTablesCut},
		Check: autovacuumLag},
	{ID: ReplicationLagID, Title: "standbys behind their primary, slots that keep WAL, replay waiting for queries", Needs: []string{model.SrcReplication},
		Check: replicationLag},
	{ID: CheckpointPressureID, Title: "checkpoints that WAL volume forces", Needs: []string{model.SrcCheckpoint},
		Check: checkpointPressure, Log: checkpointPressureLog},
	{ID: GenericPlanID, Title: "prepared statements whose generic plan is far slower than custom plans for the values they get", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcTables, model.SrcColumns},
		Check: genericPlan},
	{ID: PartitionPruningID, Title: "statements that scan every partition because the predicate hides the partition key", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcTables, model.SrcTablesCut},
		Check: partitionPruning},
	{ID: CollationPrefixID, Title: "LIKE 'abc%' on text whose collation no default B-tree can bound", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcTables, model.SrcTablesCut, model.SrcIndexes, model.SrcColumns},
		Check: collationPrefix},
	{ID: ExtendedStatisticsID, Title: "row estimates multiplied over correlated columns", Needs: []string{model.SrcStatements, model.SrcStatementsCut, model.SrcTables, model.SrcTablesCut, model.SrcColumns},
		Check: extendedStatistics},
	{ID: NPlusOneID, Title: "the same lookup by key run hundreds of times in one transaction (N+1)", Needs: []string{model.SrcStatements, model.SrcStatementsCut},
		Check: nPlusOne},
	{ID: PlannerSettingsID, Title: "planner cost settings this server's reads contradict (random_page_cost)", Needs: []string{model.SrcStatements, model.SrcStatementsCut},
		Check: plannerSettings},
	{ID: CPUHotspotID, Title: "CPU hot spots in the backends' profile", Profile: cpuHotspot},
}

// All lists the rules that read the snapshot, in the order they run.
func All() []Rule {
	var out []Rule
	for _, r := range Registry {
		if r.Check != nil {
			out = append(out, r)
		}
	}
	return out
}

// PlanRules lists the rules that read one plan, in the order they run.
func PlanRules() []Rule {
	var out []Rule
	for _, r := range Registry {
		if r.Plan != nil {
			out = append(out, r)
		}
	}
	return out
}

// Select returns the rules named in ids (every rule when ids is empty),
// whatever input they read; an unknown id is an error that lists the
// known ones.
func Select(ids []string) ([]Rule, error) {
	if len(ids) == 0 {
		return Registry, nil
	}
	byID := map[string]Rule{}
	var known []string
	for _, r := range Registry {
		byID[r.ID] = r
		known = append(known, r.ID)
	}
	var out []Rule
	taken := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" || taken[id] {
			continue
		}
		r, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("unknown rule %q: known rules are %s", id, strings.Join(known, ", "))
		}
		taken[id] = true
		out = append(out, r)
	}
	return out, nil
}

// SnapshotRules counts the rules among rs that read the snapshot: the
// "rules run" of a check.
func SnapshotRules(rs []Rule) int {
	n := 0
	for _, r := range rs {
		if r.Check != nil {
			n++
		}
	}
	return n
}

// RunLog applies the rules named in ids (all when empty) that read a
// server log's counts.
func RunLog(in LogInput, ids []string) ([]model.Finding, error) {
	return runEach(ids, func(r Rule) []model.Finding {
		if r.Log == nil {
			return nil
		}
		return r.Log(in)
	})
}

// RunProfile applies the rules named in ids (all when empty) that read a
// CPU profile.
func RunProfile(p model.Profile, ids []string) ([]model.Finding, error) {
	return runEach(ids, func(r Rule) []model.Finding {
		if r.Profile == nil {
			return nil
		}
		return r.Profile(p)
	})
}

// runEach runs the rules Select gives for ids through run.
func runEach(ids []string, run func(Rule) []model.Finding) ([]model.Finding, error) {
	rs, err := Select(ids)
	if err != nil {
		return nil, err
	}
	var out []model.Finding
	for _, r := range rs {
		out = append(out, run(r)...)
	}
	return out, nil
}

// Run applies rules to a snapshot; findings come out most severe first.
func Run(s *model.Snapshot, rs []Rule) ([]model.Finding, []model.Skip) {
	var findings []model.Finding
	var skipped []model.Skip
	// One skipped entry per missing source, naming every rule it held
	// back (unless a rule said so itself, with its own words).
	held := map[string][]string{}
	var sources []string
	for _, r := range rs {
		if r.Check == nil {
			continue
		}
		f, sk := r.Check(s)
		findings = append(findings, f...)
		skipped = append(skipped, sk...)
		for _, src := range missingNeeds(s, r, sk) {
			if len(held[src]) == 0 {
				sources = append(sources, src)
			}
			held[src] = append(held[src], r.ID)
		}
	}
	for _, src := range sources {
		miss := s.Missing[src]
		reason := "what needs " + src + " did not run: " + miss.Reason
		if src == model.SrcTablesCut || src == model.SrcStatementsCut {
			reason = miss.Reason
		}
		skipped = append(skipped, model.Skip{Rule: strings.Join(held[src], ", "), Reason: reason, Fix: miss.Fix})
	}
	Fingerprint(s, findings)
	Sort(findings)
	return Merge(findings), skipped
}

// Merge makes one finding of each problem: findings that are the same
// (one id: two sessions running one statement) and missing-index findings
// that propose the same index (a plan node's, its statement's, other
// statements the index serves) are one. The first of them, the most
// severe (Sort put it first), stands for all and counts the others in
// its evidence; a CI gate then counts one problem once.
func Merge(fs []model.Finding) []model.Finding {
	key := func(f model.Finding) string {
		if f.Rule == MissingIndexID && f.Experiment != nil && f.Experiment.Proposal != nil {
			p := f.Experiment.Proposal
			return "index\x00" + p.Table.Schema + "." + p.Table.Name + p.Tail()
		}
		return "id\x00" + f.Identity()
	}
	first := map[string]int{}
	extra := map[int]int{}
	out := fs[:0:0]
	for _, f := range fs {
		k := key(f)
		if i, ok := first[k]; ok {
			extra[i]++
			continue
		}
		first[k] = len(out)
		out = append(out, f)
	}
	for i, n := range extra {
		label := "the same problem seen in more places (merged into this finding)"
		if out[i].Rule == MissingIndexID {
			label = "more plan nodes or statements the same index serves (merged into this finding)"
		}
		out[i].Evidence = append(out[i].Evidence, model.Evidence{Label: label, Value: float64(n)})
	}
	return out
}

// Fingerprint names each finding about one of the snapshot's statements
// by the statement's fingerprint (see model.Finding.Identity), so that
// its id survives a database created afresh, where the queryid changes.
func Fingerprint(s *model.Snapshot, findings []model.Finding) {
	for i := range findings {
		o := &findings[i].Object
		if o.Fingerprint != "" || o.QueryID == "" {
			continue
		}
		id, err := strconv.ParseInt(o.QueryID, 10, 64)
		if err != nil {
			continue
		}
		if st := s.Statement(id); st != nil {
			o.Fingerprint = st.Fingerprint
			if o.Fingerprint == "" {
				o.Fingerprint, _ = sqlparse.Fingerprint(st.Query)
			}
		}
	}
}

// missingNeeds lists the sources r needs that could not be collected (or
// were collected in part), unless the rule already said so itself.
func missingNeeds(s *model.Snapshot, r Rule, own []model.Skip) []string {
	var out []string
	for _, src := range r.Needs {
		miss, ok := s.Missing[src]
		if !ok {
			continue
		}
		said := false
		for _, o := range own {
			said = said || strings.Contains(o.Reason, miss.Reason)
		}
		if !said {
			out = append(out, src)
		}
	}
	return out
}

// Sort orders findings by severity, then by impact share.
func Sort(f []model.Finding) {
	sort.SliceStable(f, func(i, j int) bool {
		if f[i].Severity != f[j].Severity {
			return f[i].Severity > f[j].Severity
		}
		return f[i].Impact.Share > f[j].Impact.Share
	})
}

func docsPath(id string) string { return "docs/rules/" + id + ".md" }

// totalExecMS is the database's statement time: the denominator of shares.
func totalExecMS(s *model.Snapshot) float64 {
	var t float64
	for _, st := range s.Statements {
		t += st.TotalExecMS
	}
	return t
}

// effective resolves the value a role gets for a setting in the snapshot's
// database, following PostgreSQL's precedence: ALTER ROLE ... IN DATABASE,
// then ALTER ROLE, then ALTER DATABASE, then the server configuration.
func effective(s *model.Snapshot, role, name string) (value, source string) {
	rank := func(rs model.RoleSetting) int {
		switch {
		case rs.Role == role && role != "" && rs.Database == s.Database:
			return 4
		case rs.Role == role && role != "" && rs.Database == "":
			return 3
		case rs.Role == "" && rs.Database == s.Database:
			return 2
		}
		return 0
	}
	best := 0
	for _, rs := range s.RoleSettings {
		v, ok := rs.Settings[name]
		if !ok {
			continue
		}
		if r := rank(rs); r > best {
			best, value = r, v
			switch r {
			case 4:
				source = fmt.Sprintf("ALTER ROLE %s IN DATABASE %s", rs.Role, rs.Database)
			case 3:
				source = "ALTER ROLE " + rs.Role
			case 2:
				source = "ALTER DATABASE " + rs.Database
			}
		}
	}
	if best > 0 {
		return value, source
	}
	st := s.Settings[name]
	return st.Value, st.Source
}

// roleSettingsFor returns the settings (among names) that ALTER ROLE/DATABASE
// give role in this database, so an experiment can run as the role does.
func roleSettingsFor(s *model.Snapshot, role string, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, src := effective(s, role, n); strings.HasPrefix(src, "ALTER ") {
			out[n] = v
		}
	}
	return out
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", x*100) }

// ratioText says how many times a is b, for titles.
func ratioText(a, b float64) string {
	if b <= 0.01 {
		return "over 100x"
	}
	r := a / b
	if r >= 10 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}

// hiddenStatements is the "could not see" line of a statement rule: the
// statements of other roles pg_stat_statements hides from pgmedic's role
// (without pg_read_all_stats), how much time they took, and what about
// them is therefore unknown (what).
func hiddenStatements(s *model.Snapshot, rule, what string) []model.Skip {
	if s.StatementsHidden == 0 {
		return nil
	}
	return []model.Skip{{Rule: rule,
		Reason: fmt.Sprintf("could not see %d statements of other roles (%.0f ms of execution): %s", s.StatementsHidden, s.StatementsHiddenMS, what),
		Fix:    "GRANT pg_read_all_stats TO " + sqlparse.QuoteIdent(s.User) + ";"}}
}

// timeShare is a statement's share of the database's statement time (0
// when there is none).
func timeShare(st model.Statement, dbTotal float64) float64 {
	if dbTotal <= 0 {
		return 0
	}
	return st.TotalExecMS / dbTotal
}
