-- A dashboard reads a meter's day.
SELECT date_trunc('hour', taken_at), sum(kwh) FROM meter_samples WHERE meter_id = 42 AND taken_at >= '2026-01-01' AND taken_at < '2026-01-02' GROUP BY 1;
SELECT date_trunc('hour', taken_at), sum(kwh) FROM meter_samples WHERE meter_id = 317 AND taken_at >= '2026-01-01' AND taken_at < '2026-01-02' GROUP BY 1;
