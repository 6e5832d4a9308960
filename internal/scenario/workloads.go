package scenario

import (
	"context"

	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
)

// Workload is a scenario's workload written in Go.
type Workload func(ctx context.Context, env *Env) error

// workloads registers the Go workloads by scenario name. Only scenarios
// that need a particular client (asyncpg), sessions racing each other, or
// figures measured while the workload runs are here; the others are
// workload.sql or workload.pgbench in their folder.
var workloads = map[string]Workload{
	"asyncpg-introspection":    asyncpgIntrospection,
	"blocked-event-loop":       blockedEventLoop,
	"blocked-event-loop-fixed": blockedEventLoopFixed,
	"client-param-types":       clientParamTypes,
	"client-stall":             clientStall,
	"connection-burst":         connectionBurst,
	"connection-storm":         connectionStorm,
	"pool-saturation":          poolSaturation,
	"pool-roomy":               poolRoomy,
	"lock-chain":               lockChain,
	"migration-lock-queue":     migrationLockQueue,
	"queue-claim-race":         queueClaimRace,
	"queue-churn":              queueChurn,
	"queue-poll":               queuePoll,
	"random-keys":              randomKeys,
}

// signalsReady are the workloads that call Env.Ready once their state is
// in place; check's warm-up counts from there. For the others it counts
// from the workload's start.
var signalsReady = map[string]bool{
	"connection-storm":     true, // after the quiet calls pg_stat_statements must count
	"migration-lock-queue": true, // once the readers queue behind the ALTER
}

// afterCheck are measurements a scenario makes once check is done, with
// the findings to verify from them.
var afterCheck = map[string]func(context.Context, *Env, []model.Finding) error{
	"connection-storm":     connectionStormGoodput,
	"migration-lock-queue": migrationLockQueueMeasure,
}

// needs says what a Go workload needs that is not PostgreSQL, checked
// before the scenario loads anything: a *MissingClient when it is not
// installed (the Node clients are installed here on first use).
var needs = map[string]func(context.Context) error{
	"asyncpg-introspection":    func(context.Context) error { _, err := FindPython("asyncpg", "python3-asyncpg"); return err },
	"client-param-types":       func(context.Context) error { _, err := FindPython("psycopg", "python3-psycopg"); return err },
	"pool-saturation":          needPgBouncer,
	"pool-roomy":               needPgBouncer,
	"connection-storm":         needPgBouncer,
	"blocked-event-loop":       func(ctx context.Context) error { _, _, err := nodeClients(ctx); return err },
	"blocked-event-loop-fixed": func(ctx context.Context) error { _, _, err := nodeClients(ctx); return err },
}

func needPgBouncer(context.Context) error {
	if _, err := lab.FindPgBouncer(); err != nil {
		return &MissingClient{Need: "PgBouncer", Install: "apt-get install pgbouncer", Also: "point PGMEDIC_PGBOUNCER at its binary"}
	}
	return nil
}

// Needs checks what a scenario needs besides PostgreSQL, installing the
// lab's Node clients if it is their first use; a *MissingClient says what
// to install.
func Needs(ctx context.Context, s Scenario) error {
	if need := needs[s.Name]; need != nil {
		return need(ctx)
	}
	return nil
}
