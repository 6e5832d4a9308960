CREATE TABLE invoice_lines (id bigint PRIMARY KEY, kind text NOT NULL, amount numeric(12,2) NOT NULL);
INSERT INTO invoice_lines SELECT g, CASE WHEN g % 3 = 0 THEN 'discounted' ELSE 'full' END, (g % 1000) + 0.99 FROM generate_series(1, 300000) g;
ANALYZE invoice_lines;
