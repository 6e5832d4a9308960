-- Job queues and event tables (Que, good_job, Sidekiq-style pollers).
UPDATE jobs SET status = 'running', locked_at = now(), locked_by = 'worker-1', attempts = attempts + 1 WHERE id = (SELECT id FROM jobs WHERE queue = 'default' AND status = 'queued' AND run_at <= now() ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, payload;
SELECT id, payload FROM jobs WHERE status = 'queued' AND run_at < now() - interval '5 minutes' ORDER BY run_at LIMIT 20;
DELETE FROM jobs WHERE status = 'done' AND locked_at < now() - interval '7 days';
UPDATE jobs SET status = 'queued', locked_at = NULL, locked_by = NULL WHERE status = 'running' AND locked_at < now() - interval '1 hour';
SELECT queue, count(*) FROM jobs WHERE status = 'queued' GROUP BY queue;
INSERT INTO jobs (queue, status, payload, run_at) VALUES ('mail', 'queued', '{"to": "x"}', now() + interval '10 minutes');
SELECT date_trunc('hour', created_at) AS hour, count(*), sum(amount) FROM events WHERE created_at > now() - interval '24 hours' AND kind = 'purchase' GROUP BY 1 ORDER BY 1;
SELECT id FROM events WHERE created_at >= timestamp with time zone '2024-05-01 00:00:00+00' AND created_at < timestamptz '2024-05-02 00:00:00+00';
SELECT count(*) FROM events WHERE duration > interval '2 seconds' AND created_at::date = date '2024-05-01';
SELECT kind, percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM duration)) FROM events WHERE tenant = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' GROUP BY kind;
SELECT id FROM events WHERE created_at::time > time '22:00' OR created_at::time < time '06:00';
SELECT id FROM events WHERE created_at > timestamp '2024-05-01 00:00:00' AT TIME ZONE 'Europe/Amsterdam';
