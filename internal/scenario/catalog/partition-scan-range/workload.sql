-- pgmedic: repeat 2
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at >= '2025-03-14' AND taken_at < date '2025-03-14' + 1;
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at >= '2024-07-02' AND taken_at < date '2024-07-02' + 1;
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at >= '2025-11-20' AND taken_at < date '2025-11-20' + 1;
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at >= '2024-02-29' AND taken_at < date '2024-02-29' + 1;
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at >= '2025-06-01' AND taken_at < date '2025-06-01' + 1;
SELECT count(*), avg(kwh), max(kwh) FROM readings WHERE taken_at >= '2024-12-24' AND taken_at < date '2024-12-24' + 1;
