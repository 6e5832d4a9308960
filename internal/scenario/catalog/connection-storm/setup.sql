CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, created_at timestamptz NOT NULL);
CREATE INDEX orders_customer_id_idx ON orders (customer_id);
CREATE TABLE order_lines (order_id bigint NOT NULL, line int NOT NULL, amount numeric(10,2) NOT NULL) PARTITION BY HASH (order_id);
DO $$ BEGIN FOR i IN 0..63 LOOP
  EXECUTE format('CREATE TABLE order_lines_%s PARTITION OF order_lines FOR VALUES WITH (MODULUS 64, REMAINDER %s)', i, i);
END LOOP; END $$;
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 300) g;
-- about 667 orders per customer, so generic plans pass the thresholds too
INSERT INTO orders SELECT g, 1 + g % 300, now() - g * interval '1 minute' FROM generate_series(1, 200000) g;
INSERT INTO order_lines SELECT o, l, (o % 97) + l FROM generate_series(1, 200000) o, generate_series(1, 3) l;
CREATE INDEX order_lines_order_id_idx ON order_lines (order_id);
