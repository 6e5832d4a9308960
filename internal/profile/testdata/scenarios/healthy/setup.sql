CREATE TABLE readings (id bigint PRIMARY KEY, sensor int NOT NULL, taken_at timestamp NOT NULL, value double precision NOT NULL);
INSERT INTO readings SELECT g, g % 100, timestamp '2024-01-01' + g * interval '10 seconds', random() FROM generate_series(1, 400000) g;
ANALYZE readings;
