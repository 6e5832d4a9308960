package lab

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// jitOLTPQuery is an ordinary OLTP read: a customer's orders with each
// order's total. The correlated subquery reaches into order_lines, hash
// partitioned 64 ways on order_id; the partition can only be chosen at run
// time (the key comes from the outer row), so the planner charges every
// partition for every estimated outer row. The estimate passes the 500000
// inline/optimise thresholds while the query touches one partition per order
// and runs in milliseconds: JIT compiles hundreds of functions for it, on
// every call, at PostgreSQL's default settings.
const jitOLTPQuery = `SELECT o.id, o.created_at,
       (SELECT sum(l.amount) FROM order_lines l WHERE l.order_id = o.id) AS total
  FROM orders o
 WHERE o.customer_id = $1`

const (
	jitCustomers  = 300
	jitOrders     = 200000 // ~667 per customer: generic plans pass 500000 too
	jitPartitions = 64
	jitCalls      = 16
	jitWorkers    = 2
)

func jitOLTP() Scenario {
	return Scenario{
		Name:    "jit-oltp",
		Summary: "short OLTP query over a 64-way partitioned table whose plan cost passes the JIT thresholds (UK coronavirus dashboard)",
		Expect:  []Expect{{Rule: "jit-overhead", Object: "FROM orders o", Confirmed: true, MinRatio: 10}},
		MustNot: []Expect{{Rule: "driver-introspection"}},
		Setup: func(ctx context.Context, env *Env) error {
			return env.execApp(ctx,
				`CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)`,
				`CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, created_at timestamptz NOT NULL)`,
				`CREATE INDEX orders_customer_id_idx ON orders (customer_id)`,
				`CREATE TABLE order_lines (order_id bigint NOT NULL, line int NOT NULL, amount numeric(10,2) NOT NULL) PARTITION BY HASH (order_id)`,
				fmt.Sprintf(`DO $$ BEGIN FOR i IN 0..%d LOOP
				   EXECUTE format('CREATE TABLE order_lines_%%s PARTITION OF order_lines FOR VALUES WITH (MODULUS %d, REMAINDER %%s)', i, i);
				 END LOOP; END $$`, jitPartitions-1, jitPartitions),
				fmt.Sprintf(`INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, %d) g`, jitCustomers),
				fmt.Sprintf(`INSERT INTO orders SELECT g, 1 + g %% %d, now() - g * interval '1 minute' FROM generate_series(1, %d) g`, jitCustomers, jitOrders),
				fmt.Sprintf(`INSERT INTO order_lines SELECT o, l, (o %% 97) + l FROM generate_series(1, %d) o, generate_series(1, 3) l`, jitOrders),
				`CREATE INDEX order_lines_order_id_idx ON order_lines (order_id)`,
				`VACUUM ANALYZE customers, orders, order_lines`,
			)
		},
		Workload: func(ctx context.Context, env *Env) error {
			// Several workers, each with its own connection, as an API
			// server's pool would run the query.
			g, ctx := errgroup.WithContext(ctx)
			for w := 0; w < jitWorkers; w++ {
				seed := int64(w + 1)
				g.Go(func() error {
					conn, err := pgx.Connect(ctx, env.AppDSN())
					if err != nil {
						return err
					}
					defer conn.Close(context.Background())
					rng := rand.New(rand.NewSource(seed))
					for i := 0; i < jitCalls/jitWorkers; i++ {
						rows, err := conn.Query(ctx, jitOLTPQuery, 1+rng.Intn(jitCustomers))
						if err != nil {
							return err
						}
						rows.Close()
						if err := rows.Err(); err != nil {
							return err
						}
					}
					return nil
				})
			}
			return g.Wait()
		},
	}
}
