package lab

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const castRows = 600000

// implicitCasts reproduces the PostgreSQL forms of Adform's hidden
// conversions on an indexed 600k-row table: an integer column compared
// with a numeric literal, a numeric column with a float8 parameter, a
// char(n) column with text, and a timestamp column cast to timestamptz.
// Each turns an index lookup into a sequential scan. The control is a
// varchar column compared with text, which is binary-coercible and keeps
// its index.
func implicitCasts() Scenario {
	return Scenario{
		Name:    "implicit-casts",
		Summary: "int vs numeric literal, numeric vs float8 parameter, char(n) vs text, timestamp cast to timestamptz; varchar vs text is the harmless control",
		Expect: []Expect{
			{Rule: "implicit-cast", Object: "column account_id", Confirmed: true, MinRatio: 5},
			{Rule: "implicit-cast", Object: "column amount", Confirmed: true, MinRatio: 5},
			{Rule: "implicit-cast", Object: "column merchant", Confirmed: true, MinRatio: 5},
			{Rule: "implicit-cast", Object: "column booked_at", Confirmed: true, MinRatio: 5},
		},
		MustNot: []Expect{{Rule: "implicit-cast", Object: "column sku"}},
		Setup: func(ctx context.Context, env *Env) error {
			return env.execApp(ctx,
				`CREATE TABLE payments (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account_id int NOT NULL,
				  amount numeric(12,2) NOT NULL, merchant char(12) NOT NULL, sku varchar(24) NOT NULL,
				  booked_at timestamp NOT NULL, note text NOT NULL)`,
				fmt.Sprintf(`INSERT INTO payments (account_id, amount, merchant, sku, booked_at, note)
				  SELECT (g::bigint * 7919) %% 100000, (g %% 50000) / 100.0, 'm-' || lpad((g %% 20000)::text, 6, '0'),
				         'sku-' || (g %% 30000), localtimestamp - (g %% 86400) * interval '1 minute', md5(g::text)
				  FROM generate_series(1, %d) g`, castRows),
				`CREATE INDEX payments_account_idx ON payments (account_id)`,
				`CREATE INDEX payments_amount_idx ON payments (amount)`,
				`CREATE INDEX payments_merchant_idx ON payments (merchant)`,
				`CREATE INDEX payments_sku_idx ON payments (sku)`,
				`CREATE INDEX payments_booked_idx ON payments (booked_at)`,
				`VACUUM ANALYZE payments`,
			)
		},
		Workload: func(ctx context.Context, env *Env) error {
			conn, err := pgx.Connect(ctx, env.AppDSN())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			// The float8 and text parameters carry their type in the SQL,
			// as ORMs write them (CAST(:x AS FLOAT)); pg_stat_statements keeps
			// such casts, so check sees them too.
			stmts := []struct {
				sql  string
				args func(i int) []any
			}{
				{`SELECT count(*) FROM payments WHERE account_id = 4711.0`, func(int) []any { return nil }},
				{`SELECT id, amount FROM payments WHERE amount = $1::float8`, func(i int) []any { return []any{float64(i%500) / 4} }},
				{`SELECT id FROM payments WHERE merchant = $1::text`, func(i int) []any { return []any{fmt.Sprintf("m-%06d", i*37%20000)} }},
				{`SELECT count(*) FROM payments WHERE booked_at::timestamptz > now() - interval '1 hour'`, func(int) []any { return nil }},
				{`SELECT id FROM payments WHERE sku = $1::text`, func(i int) []any { return []any{fmt.Sprintf("sku-%d", i*13%30000)} }},
			}
			for i := 0; i < 12; i++ {
				for _, s := range stmts {
					rows, err := conn.Query(ctx, s.sql, s.args(i)...)
					if err != nil {
						return fmt.Errorf("%s: %w", s.sql, err)
					}
					rows.Close()
					if rows.Err() != nil {
						return rows.Err()
					}
				}
			}
			return nil
		},
		Explain: []string{
			`SELECT count(*) FROM payments WHERE account_id = 4711.0`,
			`SELECT id, amount FROM payments WHERE amount = 12.5::float8`,
			`SELECT id FROM payments WHERE merchant = 'm-000042'::text`,
			`SELECT count(*) FROM payments WHERE booked_at::timestamptz > now() - interval '1 hour'`,
			`SELECT id FROM payments WHERE sku = 'sku-42'::text`,
		},
	}
}
