CREATE TABLE events_queue (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind text NOT NULL, payload text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), processed_at timestamptz) WITH (autovacuum_enabled = off);
CREATE INDEX events_queue_pending_idx ON events_queue (created_at) WHERE processed_at IS NULL;
INSERT INTO events_queue (kind, payload, created_at, processed_at)
SELECT 'webhook', repeat('x', 100), now() - interval '2 days' + g * interval '100 ms', now() - interval '1 day'
  FROM generate_series(1, 200000) g;
ANALYZE events_queue;
