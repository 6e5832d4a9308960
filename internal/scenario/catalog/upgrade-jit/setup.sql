CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, created_at timestamptz NOT NULL);
CREATE INDEX orders_customer_id_idx ON orders (customer_id);
CREATE TABLE order_lines (order_id bigint NOT NULL, line int NOT NULL, amount numeric(10,2) NOT NULL) PARTITION BY HASH (order_id);
DO $$ BEGIN FOR i IN 0..31 LOOP
  EXECUTE format('CREATE TABLE order_lines_%s PARTITION OF order_lines FOR VALUES WITH (MODULUS 32, REMAINDER %s)', i, i);
END LOOP; END $$;
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 10) g;
-- 2,000 orders per customer: a customer's report is estimated above
-- jit_inline_above_cost and jit_optimize_above_cost (500,000 each), so
-- the build with LLVM inlines and optimizes it, some 250 ms of compiling
-- for a report that runs in 10 ms.
INSERT INTO orders SELECT g, 1 + g % 10, now() - g * interval '1 minute' FROM generate_series(1, 20000) g;
INSERT INTO order_lines SELECT o, l, (o % 97) + l FROM generate_series(1, 20000) o, generate_series(1, 3) l;
CREATE INDEX order_lines_order_id_idx ON order_lines (order_id);
VACUUM ANALYZE customers, orders, order_lines;
