package scenario

import (
	"context"
	_ "embed"
	"fmt"
)

//go:embed clients/asyncpg_connect.py
var asyncpgClient []byte

// asyncpgConnections is how many fresh connections the client opens. The
// introspection query's estimated cost grows with the catalogue; at about
// 20 tables x 100 columns it passes the 500000 inline and optimisation
// thresholds on PostgreSQL 15, and setup.sql creates 40 to leave a margin.
const asyncpgConnections = 6

// asyncpgIntrospection runs the Python client, which opens the
// connections and reports how long each first query took.
func asyncpgIntrospection(ctx context.Context, env *Env) error {
	var res struct {
		Connections  int       `json:"connections"`
		FirstQueryMS []float64 `json:"first_query_ms"`
		Version      string    `json:"asyncpg"`
	}
	if err := runPython(ctx, "asyncpg", "python3-asyncpg", "asyncpg_connect.py", asyncpgClient, &res, env.AppDSN(), fmt.Sprint(asyncpgConnections)); err != nil {
		return err
	}
	env.Log("asyncpg %s: first query per new connection took %v ms", res.Version, res.FirstQueryMS)
	return nil
}

//go:embed clients/psycopg_types.py
var psycopgClient []byte

// psycopgCalls is how many times the client runs each lookup.
const psycopgCalls = 20

// clientParamTypes runs the psycopg 3 client, which binds Decimal and
// float parameters against ledger's integer and numeric columns and the
// right types against ledger_ok's, and records its mean times.
func clientParamTypes(ctx context.Context, env *Env) error {
	var res struct {
		Version string             `json:"psycopg"`
		MeanMS  map[string]float64 `json:"mean_ms"`
	}
	if err := runPython(ctx, "psycopg", "python3-psycopg", "psycopg_types.py", psycopgClient, &res, env.AppDSN(), fmt.Sprint(psycopgCalls)); err != nil {
		return err
	}
	env.Record("psycopg "+res.Version+": mean ms per lookup, wrong types (ledger)", res.MeanMS["ledger"])
	env.Record("psycopg "+res.Version+": mean ms per lookup, right types (ledger_ok)", res.MeanMS["ledger_ok"])
	return nil
}
