-- A metrics store. Raw samples arrive every few seconds per meter; a
-- nightly downsampling job keeps one sample in ten once they are a day
-- old and deletes the rest. VACUUM removes the deleted keys from the
-- B-tree but frees only pages left entirely empty, and here every page
-- keeps a tenth of its keys: the index stays the size it had.
CREATE TABLE meter_samples (meter_id int NOT NULL, taken_at timestamptz NOT NULL, kwh numeric(10,3) NOT NULL,
  PRIMARY KEY (meter_id, taken_at));
INSERT INTO meter_samples SELECT 1 + g % 500, timestamptz '2026-01-01' + (g / 500) * interval '10 seconds', (g % 97) / 10.0
  FROM generate_series(0, 399999) g;
-- The downsampling job: every sample but one in ten goes.
DELETE FROM meter_samples WHERE extract(epoch FROM taken_at)::bigint % 100 <> 0;
-- The job's next step runs a moment later. (On 13 and 14 a backend sends
-- its row counts to the statistics collector at most every 500 ms: a
-- VACUUM in the same instant would report before the DELETE's counts
-- arrive, and they would then count as dead rows again.)
SELECT pg_sleep(0.6);
VACUUM meter_samples;
