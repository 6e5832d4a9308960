-- 20,000 tickets of about 1,300 bytes each (26 MB), in no order of
-- opened_at; 150,000 order lines over 120,000 orders.
CREATE TABLE tickets (id int PRIMARY KEY, queue int NOT NULL, opened_at timestamptz NOT NULL, subject text NOT NULL, body text NOT NULL);
INSERT INTO tickets SELECT g, g % 50, timestamptz '2026-01-01' + ((g * 7919) % 100000) * interval '1 minute', 'subject ' || md5(g::text), repeat(md5((g * 3)::text), 40) FROM generate_series(1, 20000) g;
CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, placed_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, 'customer ' || md5(g::text) || md5((g + 1)::text), timestamptz '2026-01-01' + g * interval '1 minute' FROM generate_series(1, 120000) g;
CREATE TABLE order_lines (id int PRIMARY KEY, order_id int NOT NULL, sku text NOT NULL, amount numeric(10, 2) NOT NULL);
INSERT INTO order_lines SELECT g, (g * 7) % 120000 + 1, 'sku-' || (g % 900), (g % 500) + 0.99 FROM generate_series(1, 150000) g;
ANALYZE tickets, orders, order_lines;
