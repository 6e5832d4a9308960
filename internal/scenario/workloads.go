package scenario

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
)

// Workload is a scenario's workload written in Go.
type Workload func(ctx context.Context, env *Env) error

// GoWorkload is a scenario's row in the table of Go workloads: what the
// workload runs, and what else about it the lab must know.
type GoWorkload struct {
	Run Workload
	// SignalsReady: the workload calls Env.Ready once its state is in
	// place, and check's warm-up counts from there (else from the
	// workload's start).
	SignalsReady bool
	// AfterCheck measures, once check is done, what the scenario's
	// findings are verified from.
	AfterCheck func(context.Context, *Env, []model.Finding) error
	// Clients checks the programs the workload drives that are not PostgreSQL,
	// before the scenario loads anything: a *MissingClient when it is not
	// installed (the Node clients are installed here on first use).
	Clients func(context.Context) error
}

// workloads are the Go workloads by scenario name: the one table a
// scenario's Go workload is added to. Only scenarios that need a
// particular client (asyncpg), sessions racing each other, or figures
// measured while the workload runs are here; the others are workload.sql
// or workload.pgbench in their folder.
var workloads = map[string]GoWorkload{
	"asyncpg-introspection": {Run: asyncpgIntrospection, Clients: needPython("asyncpg", "python3-asyncpg")},
	// Ready once an event was exported twice (events exported, fixed).
	"blocked-event-loop":       {Run: blockedEventLoop, SignalsReady: true, Clients: needNode},
	"blocked-event-loop-fixed": {Run: blockedEventLoopFixed, SignalsReady: true, Clients: needNode},
	"client-param-types":       {Run: clientParamTypes, Clients: needPython("psycopg", "python3-psycopg")},
	"client-stall":             {Run: clientStall},
	"connection-burst":         {Run: connectionBurst},
	// Ready after the quiet calls pg_stat_statements must count.
	"connection-storm": {Run: connectionStorm, SignalsReady: true, AfterCheck: connectionStormGoodput, Clients: needPgBouncer},
	"pool-saturation":  {Run: poolSaturation, Clients: needPgBouncer},
	"pool-roomy":       {Run: poolRoomy, Clients: needPgBouncer},
	"lock-chain":       {Run: lockChain},
	// Ready once the readers queue behind the ALTER.
	"migration-lock-queue": {Run: migrationLockQueue, SignalsReady: true, AfterCheck: migrationLockQueueMeasure},
	// Ready once the writers queue behind a build.
	"index-build-blocks": {Run: indexBuildBlocks, SignalsReady: true},
	"queue-claim-race":   {Run: queueClaimRace},
	// Many writers, each with a NOTIFY in its transaction; its quiet
	// counterpart through an outbox.
	"notify-commits": {Run: notifyCommits},
	// Transaction ids spent until an autovacuum to prevent wraparound
	// runs, then a DDL and reads; ready once the reads queue. Its quiet
	// counterpart freezes the table first.
	"wraparound-ddl-queue": {Run: wraparoundQueue, SignalsReady: true},
	// Ready once two rounds of trial grants are cleaned.
	"tail-truncation":   {Run: tailTruncation, SignalsReady: true},
	"tail-kept":         {Run: tailKept, SignalsReady: true},
	"wraparound-frozen": {Run: wraparoundFrozen, SignalsReady: true},
	"notify-outbox":     {Run: notifyOutbox},
	// A data migration in one transaction with a savepoint per row,
	// beside the web workers and the dashboard (psycopg); ready once it
	// is past 64 and the dashboard's rows are newer than it. Its quiet
	// counterpart commits batches.
	"subtrans-overflow": {Run: subtransOverflow, SignalsReady: true, Clients: needPython("psycopg", "python3-psycopg")},
	"subtrans-batched":  {Run: subtransBatched, SignalsReady: true, Clients: needPython("psycopg", "python3-psycopg")},
	// A backfill's concurrent foreign-key checks on a server whose
	// multixact member space is set (pg_resetwal) 45% used; ready once it
	// fills it. Its quiet counterpart's autovacuum gives the space back.
	"multixact-members":   {Run: multixactMembers, SignalsReady: true},
	"multixact-reclaimed": {Run: multixactReclaimed, SignalsReady: true},
	"queue-churn":         {Run: queueChurn},
	"queue-poll":          {Run: queuePoll},
	"random-keys":         {Run: randomKeys},
	// A prepared transaction, and transaction ids consumed while check
	// samples them.
	"freeze-held-back": {Run: freezeHeldBack, SignalsReady: true},
	// Round trips in a loop, timed by the client, while check samples.
	"n-plus-one":         {Run: exportLines(false)},
	"n-plus-one-batched": {Run: exportLines(true)},
	// A driver's prepared statement, which plain SQL files cannot send.
	"generic-plan-skew": {Run: genericPlanSkew},
	// Changes a server setting for its run and restores it after check.
	"wal-pressure": {Run: walPressure, SignalsReady: true},
	// Inserts while check reads the sequences twice.
	"ids-running-out": {Run: idsRunningOut, SignalsReady: true},
	// A concurrent build that must fail, which SQL files cannot run.
	"unread-indexes": {Run: unreadIndexes},
	// A report on the standby holds replay while the primary writes.
	"replica-report-stalls": {Run: replicaReportStalls, SignalsReady: true},
	// Workers holding a connection each, and newcomers refused; ready once
	// the server has refused a few. The same through a pool.
	"connections-held-idle": {Run: heldSessions(false), SignalsReady: true},
	"connections-pooled":    {Run: heldSessions(true), SignalsReady: true, Clients: needPgBouncer},
	// The application a migration is rehearsed under, captured from the
	// server's log.
	"migration-rehearsal": {Run: shopTraffic},
	// The applications an upgrade is rehearsed under.
	"upgrade-jit":   {Run: orderReports},
	"upgrade-quiet": {Run: shopLookups},
	// Throttles the server's autovacuum for its run, restores it after.
	"vacuum-falls-behind": {Run: vacuumFallsBehind, SignalsReady: true},
	// A prepared transaction outlives its session: ready once VACUUM has
	// run behind it.
	"vacuum-held-back": {Run: vacuumHeldBack, SignalsReady: true},
}

func needPython(module, pkg string) func(context.Context) error {
	return func(context.Context) error { _, err := FindPython(module, pkg); return err }
}

func needNode(ctx context.Context) error { _, _, err := nodeClients(ctx); return err }

func needPgBouncer(context.Context) error {
	if _, err := lab.FindPgBouncer(); err != nil {
		return &MissingClient{Need: "PgBouncer", Install: "apt-get install pgbouncer", Also: "point PGMEDIC_PGBOUNCER at its binary"}
	}
	return nil
}

// CheckClients checks the programs a scenario drives besides PostgreSQL, installing the
// lab's Node clients if it is their first use; a *MissingClient says what
// to install.
func CheckClients(ctx context.Context, s Scenario) error {
	if need := workloads[s.Name].Clients; need != nil {
		return need(ctx)
	}
	return nil
}
