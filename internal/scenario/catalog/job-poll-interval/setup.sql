CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL, status text NOT NULL,
  payload jsonb NOT NULL, attempts int NOT NULL DEFAULT 0, run_at timestamptz NOT NULL);
INSERT INTO jobs (queue, status, payload, run_at)
SELECT 'default', CASE WHEN g % 100 = 0 THEN 'queued' ELSE 'done' END, jsonb_build_object('n', g),
       now() - interval '10 days' + g * interval '2 seconds'
  FROM generate_series(1, 300000) g;
VACUUM ANALYZE jobs;
