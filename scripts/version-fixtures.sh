#!/usr/bin/env bash
# Records what one PostgreSQL major version writes, for the tests that hold
# pgmedic's readers to every version from 13 to 18:
#   internal/plan/testdata/versions/pgN/NAME.{txt,json}  EXPLAIN in TEXT and JSON
#   internal/logs/testdata/versions/pgN/                 stderr, csvlog and (15+) jsonlog
# from a lab cluster of that version (pgmedic lab install N fetches one).
# Run from the repository root, for each version:
#
#   for v in 13 14 15 16 17 18; do bash scripts/version-fixtures.sh $v; done
set -euo pipefail
PG=${1:?usage: version-fixtures.sh MAJOR}
export PG
. scripts/lab.sh
plans=internal/plan/testdata/versions/pg$PG
logsout=internal/logs/testdata/versions/pg$PG
mkdir -p "$plans" "$logsout"
logs="$dir/logs"
mkdir -p "$logs" && chmod 777 "$logs"

destinations='stderr,csvlog'
[ "$PG" -ge 15 ] && destinations="$destinations,jsonlog"
log_everything "$destinations" "$logs" 20 -c "ALTER SYSTEM SET autovacuum_naptime = '1s'" -c "ALTER SYSTEM SET autovacuum = off"

psql <<'SQL'
CREATE TABLE customers (id int PRIMARY KEY, region text NOT NULL);
INSERT INTO customers SELECT g, 'r' || (g % 20) FROM generate_series(1, 20000) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,
  amount numeric(12,2) NOT NULL, placed_at timestamp NOT NULL);
INSERT INTO orders SELECT g, 1 + (g * 7919) % 20000, (ARRAY['new','paid','shipped','done'])[1 + g % 4],
  (g % 10000) / 100.0, timestamp '2024-01-01' + g * interval '30 seconds' FROM generate_series(1, 200000) g;
CREATE INDEX orders_placed_at_idx ON orders (placed_at);
CREATE TABLE events (id int, kind text) WITH (autovacuum_enabled = off);
INSERT INTO events SELECT g, 'old' FROM generate_series(1, 1000) g;
ANALYZE;
INSERT INTO events SELECT g, 'new' FROM generate_series(1, 100000) g;
VACUUM ANALYZE customers, orders;
SQL

explain() { explain_fixture "$plans" "$@"; }
A='ANALYZE, BUFFERS, VERBOSE, SETTINGS, WAL'
explain seq-filter "$A" "" "SELECT id, amount FROM orders WHERE customer_id = 4242"
explain index-range "$A" "" "SELECT count(*) FROM orders WHERE placed_at BETWEEN '2024-01-02' AND '2024-01-03'"
explain hash-join "$A" "" "SELECT c.region, sum(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.region"
explain sort-spill "$A" "SET work_mem = '64kB'" "SELECT id FROM orders ORDER BY amount DESC, id LIMIT 10 OFFSET 50000"
explain nested-loop "$A" "SET enable_hashjoin = off; SET enable_mergejoin = off" "SELECT o.id FROM customers c JOIN orders o ON o.id = c.id WHERE c.region = 'r3'"
explain misestimate "$A" "" "SELECT count(*) FROM events WHERE kind = 'new'"
explain implicit-cast "$A" "" "SELECT count(*) FROM orders WHERE customer_id::numeric = 42.0"
explain costs-only "VERBOSE" "" "SELECT * FROM orders WHERE amount > 50 ORDER BY placed_at LIMIT 20"
[ "$PG" -ge 16 ] && explain generic-plan "GENERIC_PLAN" "" "SELECT * FROM orders WHERE customer_id = \$1"
[ "$PG" -ge 17 ] && explain serialize-memory "ANALYZE, BUFFERS, SERIALIZE, MEMORY" "" "SELECT * FROM customers WHERE region = 'r1'"

# Autovacuum is held off while the plans are recorded, so both formats
# see the same statistics.
psql -c "ALTER SYSTEM SET autovacuum = on" -c "SELECT pg_reload_conf()" >/dev/null

# The log: statements with durations, auto_explain plans, errors, a lock
# wait, a burst of connections, temporary files, autovacuum, checkpoints.
for i in $(seq 1 20); do echo "SELECT amount FROM orders WHERE id = $((i * 7));"; done | psql
psql -c "SET max_parallel_workers_per_gather = 0" -c "SELECT count(*) FROM orders WHERE status = 'paid'"
psql -c "PREPARE by_customer(numeric) AS SELECT sum(amount) FROM orders WHERE customer_id = \$1" -c "EXECUTE by_customer(42)"
psql -c "SET work_mem = '64kB'" -c "SELECT id FROM orders ORDER BY amount DESC LIMIT 5"
psql -c "SELECT 1/0" 2>/dev/null || true
psql -c "SELECT * FROM no_such_table" 2>/dev/null || true
psql -c "BEGIN" -c "UPDATE orders SET amount = 1 WHERE id = 1" -c "SELECT pg_sleep(1)" -c "COMMIT" &
sleep 0.3
psql -c "UPDATE orders SET amount = 2 WHERE id = 1"
wait
for i in $(seq 1 10); do psql -c "SELECT 1" >/dev/null; done
psql -c "UPDATE orders SET status = 'done' WHERE id <= 50000"
sleep 3 # autovacuum's naptime
psql -c "CHECKPOINT"
sleep 1.5 # the collector writes what it has
cp "$logs/pg.log" "$logsout/stderr.log"
cp "$logs/pg.csv" "$logsout/csvlog.csv"
[ -f "$logs/pg.json" ] && cp "$logs/pg.json" "$logsout/jsonlog.json"
"$dir/pgmedic" lab status --dir "$dir/lab" | sed -n 2p > "$logsout/VERSION"
wc -l "$plans"/* "$logsout"/*
