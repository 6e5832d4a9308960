CREATE TABLE customers (id bigint PRIMARY KEY, name text COLLATE "en-x-icu" NOT NULL, city text NOT NULL);
INSERT INTO customers SELECT g, initcap(substr(md5(g::text), 1, 6) || ' ' || substr(md5((g * 7)::text), 1, 9)), 'city ' || g % 300 FROM generate_series(1, 120000) g;
ANALYZE customers;
