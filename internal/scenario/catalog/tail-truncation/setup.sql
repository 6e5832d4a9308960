CREATE TABLE access_grants (id bigserial PRIMARY KEY, account_id int NOT NULL, stack_id int NOT NULL, role text NOT NULL, claims text NOT NULL, expires_at timestamptz NOT NULL);
INSERT INTO access_grants (account_id, stack_id, role, claims, expires_at) SELECT g % 2000, g % 30000, 'reader', repeat(md5(g::text), 12), now() + interval '1 year' FROM generate_series(1, 20000) g;
ALTER TABLE access_grants SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_cost_delay = 0, autovacuum_vacuum_insert_threshold = 1000000000, autovacuum_analyze_threshold = 1000000000);
CREATE INDEX access_grants_expires_at ON access_grants (expires_at);
VACUUM (ANALYZE) access_grants;
