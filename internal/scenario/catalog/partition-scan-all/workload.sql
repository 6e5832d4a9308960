-- pgmedic: repeat 2
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at::date = '2025-03-14';
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at::date = '2024-07-02';
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at::date = '2025-11-20';
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at::date = '2024-02-29';
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at::date = '2025-06-01';
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at::date = '2024-12-24';
