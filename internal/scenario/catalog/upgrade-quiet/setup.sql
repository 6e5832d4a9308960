CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, total numeric(12,2) NOT NULL, placed timestamptz NOT NULL DEFAULT now());
INSERT INTO orders SELECT g, 1 + g % 500, g % 97, now() - g * interval '1 minute' FROM generate_series(1, 5000) g;
ANALYZE;
