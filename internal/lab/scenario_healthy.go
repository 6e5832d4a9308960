package lab

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/jackc/pgx/v5"
)

const (
	healthyAccounts = 50000
	healthyTxns     = 1500
)

// healthy is the control: a well-indexed OLTP schema whose statements are all
// cheap index lookups and small writes. No rule may fire at warning or above
// on it, although JIT is on at its defaults exactly as in jit-oltp.
func healthy() Scenario {
	return Scenario{
		Name:    "healthy",
		Summary: "well-indexed OLTP schema and workload; no rule may fire at warning or above",
		MustNot: []Expect{{Rule: "*"}},
		Setup: func(ctx context.Context, env *Env) error {
			return env.execApp(ctx,
				`CREATE TABLE accounts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text NOT NULL UNIQUE, balance numeric(12,2) NOT NULL DEFAULT 0)`,
				`CREATE TABLE transfers (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, from_id bigint NOT NULL REFERENCES accounts, to_id bigint NOT NULL REFERENCES accounts, amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
				`CREATE INDEX transfers_from_created_idx ON transfers (from_id, created_at DESC)`,
				fmt.Sprintf(`INSERT INTO accounts (email, balance) SELECT 'user' || g || '@example.com', 1000 FROM generate_series(1, %d) g`, healthyAccounts),
				`VACUUM ANALYZE accounts, transfers`,
			)
		},
		Workload: func(ctx context.Context, env *Env) error {
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			rng := rand.New(rand.NewSource(7))
			for i := 0; i < healthyTxns; i++ {
				from, to := 1+rng.Intn(healthyAccounts), 1+rng.Intn(healthyAccounts)
				tx, err := conn.Begin(ctx)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, from, 5); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, to, 5); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO transfers (from_id, to_id, amount) VALUES ($1, $2, $3)`, from, to, 5); err != nil {
					return err
				}
				if err := tx.Commit(ctx); err != nil {
					return err
				}
				var bal float64
				if err := conn.QueryRow(ctx, `SELECT balance::float8 FROM accounts WHERE email = $1`, fmt.Sprintf("user%d@example.com", from)).Scan(&bal); err != nil {
					return err
				}
				rows, err := conn.Query(ctx, `SELECT id, amount, created_at FROM transfers WHERE from_id = $1 ORDER BY created_at DESC LIMIT 10`, from)
				if err != nil {
					return err
				}
				rows.Close()
			}
			return nil
		},
	}
}
