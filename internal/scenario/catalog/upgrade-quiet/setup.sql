CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 3000) g;
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, total numeric(12,2) NOT NULL, placed timestamptz NOT NULL DEFAULT now());
INSERT INTO orders SELECT g, 1 + g % 3000, g % 97, now() - g * interval '1 minute' FROM generate_series(1, 30000) g;
ANALYZE;
