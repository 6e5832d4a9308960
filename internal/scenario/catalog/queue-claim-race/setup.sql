CREATE TABLE tasks (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload text NOT NULL, claimed_by int, claimed_at timestamptz);
CREATE INDEX tasks_unclaimed_idx ON tasks (id) WHERE claimed_at IS NULL;
INSERT INTO tasks (payload) SELECT 'job ' || g FROM generate_series(1, 20000) g;
VACUUM ANALYZE tasks;
CREATE TABLE tasks_safe (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload text NOT NULL, claimed_by int, claimed_at timestamptz);
CREATE INDEX tasks_safe_unclaimed_idx ON tasks_safe (id) WHERE claimed_at IS NULL;
INSERT INTO tasks_safe (payload) SELECT 'job ' || g FROM generate_series(1, 20000) g;
VACUUM ANALYZE tasks_safe;
