CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, total numeric(12,2) NOT NULL);
INSERT INTO orders SELECT g, g % 3000, g % 97 FROM generate_series(1, 20000) g;
ANALYZE orders;
