-- 400,000 events, autovacuum off for the table, 96% of them deleted: 16,000
-- live rows among 384,000 dead ones in a heap sized for all of them.
CREATE TABLE events (id int PRIMARY KEY, category int NOT NULL, payload text NOT NULL) WITH (autovacuum_enabled = off);
INSERT INTO events SELECT g, g % 1000, repeat('x', 80) FROM generate_series(1, 400000) g;
DELETE FROM events WHERE id % 25 <> 0;
ANALYZE events;
