-- A CI service's build steps: the web workers add them, the dashboard
-- reads the newest, a data migration backfills duration_ms.
CREATE TABLE job_steps (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, job_id int NOT NULL, step int NOT NULL,
  status text NOT NULL, log_bytes int NOT NULL, duration_ms int);
INSERT INTO job_steps (job_id, step, status, log_bytes) SELECT g / 10, g % 10, 'success', (g * 37) % 100000 FROM generate_series(1, 20000) g;
CREATE INDEX job_steps_job ON job_steps (job_id);
VACUUM ANALYZE job_steps;
