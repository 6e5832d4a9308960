INSERT INTO accounts SELECT g, 'user' || g || '@example.com', 100 FROM generate_series(100001, 250000) g;
CREATE TABLE imports AS SELECT g AS id, md5(g::text) AS line FROM generate_series(1, 60000) g;
SELECT balance FROM accounts WHERE id = 4242;
SELECT balance FROM accounts WHERE id = 170000;
SELECT count(*) FROM imports;
