-- 400,000 orders of 100,000 customers, with an index on customer_id, and
-- 1,000 customers flagged for review: the data fits in memory.
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, total numeric(10, 2) NOT NULL, note text NOT NULL);
INSERT INTO orders SELECT g, (g::bigint * 7919) % 100000, (g % 500) + 0.5, md5(g::text) FROM generate_series(1, 400000) g;
CREATE INDEX orders_customer ON orders (customer_id);
CREATE TABLE flagged (customer_id int PRIMARY KEY, reason text NOT NULL);
INSERT INTO flagged SELECT g * 37 % 100000, 'chargeback' FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING;
ANALYZE orders, flagged;
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET random_page_cost = 1.1', current_database()); END $$;
