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
	"queue-claim-race":         queueClaimRace,
	"queue-churn":              queueChurn,
	"queue-poll":               queuePoll,
	"random-keys":              randomKeys,
}

// afterCheck are measurements a scenario makes once check is done, with
// the findings to verify from them.
var afterCheck = map[string]func(context.Context, *Env, []model.Finding) error{
	"connection-storm": connectionStormGoodput,
}

// needs says what a Go workload needs that is not PostgreSQL, checked
// before the scenario loads anything.
var needs = map[string]func() error{
	"asyncpg-introspection":    func() error { _, err := FindPython("asyncpg", "python3-asyncpg"); return err },
	"client-param-types":       func() error { _, err := FindPython("psycopg", "python3-psycopg"); return err },
	"pool-saturation":          func() error { _, err := lab.FindPgBouncer(); return err },
	"pool-roomy":               func() error { _, err := lab.FindPgBouncer(); return err },
	"connection-storm":         func() error { _, err := lab.FindPgBouncer(); return err },
	"blocked-event-loop":       func() error { _, _, err := findNodeClients(); return err },
	"blocked-event-loop-fixed": func() error { _, _, err := findNodeClients(); return err },
}
