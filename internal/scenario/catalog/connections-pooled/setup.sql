CREATE TABLE orders (id bigint PRIMARY KEY, status text NOT NULL, total numeric(12,2) NOT NULL);
INSERT INTO orders SELECT g, (ARRAY['new','paid','shipped'])[1 + g % 3], g % 500 FROM generate_series(1, 2000) g;
VACUUM ANALYZE orders;
