-- 100,000 order lines of 20,000 orders.
CREATE TABLE order_lines (id int PRIMARY KEY, order_id int NOT NULL, sku text NOT NULL, qty int NOT NULL, price numeric(10, 2) NOT NULL);
INSERT INTO order_lines SELECT g, 1 + g / 5, 'sku-' || (g % 700), 1 + g % 4, (g % 300) + 0.99 FROM generate_series(1, 100000) g;
CREATE INDEX order_lines_order ON order_lines (order_id);
ANALYZE order_lines;
