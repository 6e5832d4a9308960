CREATE TABLE accounts (id bigint PRIMARY KEY, email text NOT NULL, balance numeric(12,2) NOT NULL);
INSERT INTO accounts SELECT g, 'user' || g || '@example.com', 100 FROM generate_series(1, 100000) g;
VACUUM ANALYZE accounts;
