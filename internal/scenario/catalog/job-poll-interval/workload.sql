-- pgmedic: repeat 20
SELECT id, payload FROM jobs WHERE status = 'queued' AND run_at < now() - interval '5 minutes' ORDER BY run_at LIMIT 20;
