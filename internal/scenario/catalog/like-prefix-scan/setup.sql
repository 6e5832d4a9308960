-- 200,000 products whose names sort in English (an ICU collation, as a
-- database created with a language's locale has), with a B-tree index
-- on the name in that collation.
CREATE TABLE products (id int PRIMARY KEY, name text COLLATE "en-x-icu" NOT NULL, price numeric(10, 2) NOT NULL, stock int NOT NULL);
INSERT INTO products SELECT g, (ARRAY['Alpine', 'Brook', 'Cedar', 'Delta', 'Ember', 'Falcon', 'Garnet', 'Harbor'])[1 + g % 8] || ' ' || md5(g::text), (g % 900) + 0.99, g % 40 FROM generate_series(1, 200000) g;
CREATE INDEX products_name ON products (name);
ANALYZE products;
