CREATE TABLE accounts (id bigint PRIMARY KEY, balance numeric(12,2) NOT NULL);
INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 1000) g;
VACUUM ANALYZE accounts;
