CREATE TABLE manta_objects (id bigint PRIMARY KEY, owner int NOT NULL, name text NOT NULL, size bigint NOT NULL, etag text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO manta_objects (id, owner, name, size, etag) SELECT g, g % 500, 'stor/' || (g % 500) || '/object-' || g, g * 37 % 1000000, md5(g::text) FROM generate_series(1, 50000) g;
CREATE FUNCTION manta_audit() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER manta_objects_audit BEFORE UPDATE ON manta_objects FOR EACH ROW EXECUTE FUNCTION manta_audit();
ALTER TABLE manta_objects SET (autovacuum_freeze_max_age = 100000, autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1, autovacuum_vacuum_threshold = 1000000000, autovacuum_vacuum_insert_threshold = 1000000000, autovacuum_analyze_threshold = 1000000000);
VACUUM (ANALYZE) manta_objects;
