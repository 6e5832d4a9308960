#!/usr/bin/env bash
# Regenerates internal/plan/testdata/pg15: real EXPLAIN output from a lab
# cluster, each query in TEXT and JSON, one plan with the problem a rule
# looks for ("<rule>.bad") and one healthy plan of the same query
# ("<rule>.good"). Run from the repository root; takes about two minutes.
#
#   bash scripts/plan-fixtures.sh
set -euo pipefail
out=internal/plan/testdata/pg15
source "$(dirname "$0")/lab.sh"
mkdir -p "$out"

psql <<'SQL'
DROP TABLE IF EXISTS orders, customers, readings, events, pages CASCADE;
CREATE TABLE customers (id int PRIMARY KEY, region text NOT NULL, tier int NOT NULL);
INSERT INTO customers SELECT g, 'r' || (g % 20), g % 5 FROM generate_series(1, 50000) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,
  amount numeric(12,2) NOT NULL, placed_at timestamp NOT NULL, note text NOT NULL);
INSERT INTO orders SELECT g, 1 + (g::bigint * 7919) % 50000, (ARRAY['new','paid','shipped','done'])[1 + g % 4],
  (g % 10000) / 100.0, timestamp '2024-01-01' + g * interval '30 seconds', md5(g::text)
  FROM generate_series(1, 400000) g;
CREATE INDEX orders_placed_at_idx ON orders (placed_at);
CREATE INDEX orders_amount_idx ON orders (amount);
-- correlated columns: city decides country, the planner multiplies.
CREATE TABLE readings (id int, city int, country int, region int, sensor char(8), v float8);
INSERT INTO readings SELECT g, g % 1000, (g % 1000) / 10, (g % 1000) / 100, lpad((g % 5000)::text, 8, '0'), random() FROM generate_series(1, 300000) g;
CREATE INDEX readings_sensor_idx ON readings (sensor);
CREATE TABLE pages (id int PRIMARY KEY, body text);
INSERT INTO pages SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g;
VACUUM ANALYZE;
SQL

# explain NAME OPTIONS SETUP QUERY: writes NAME.txt and NAME.json.
explain() {
  local name=$1 opts=$2 setup=$3 query=$4
  for fmt in text json; do
    local ext=txt
    [ "$fmt" = json ] && ext=json
    # One warm-up run so that buffers and times do not depend on which
    # format ran first.
    psql -A -t -c "SET max_parallel_workers_per_gather = 0; $setup" -c "EXPLAIN (ANALYZE, FORMAT $fmt) $query" >/dev/null
    psql -A -t -c "SET max_parallel_workers_per_gather = 0; $setup" -c "EXPLAIN ($opts, FORMAT $fmt) $query" >"$out/$name.$ext"
  done
}

A='ANALYZE, BUFFERS'
explain missing-index.bad "$A, VERBOSE" "" "SELECT id, amount FROM orders WHERE customer_id = 4242"
psql -c "CREATE INDEX orders_customer_idx ON orders (customer_id); ANALYZE orders"
explain missing-index.good "$A, VERBOSE" "" "SELECT id, amount FROM orders WHERE customer_id = 4242"

explain implicit-cast.bad "$A, VERBOSE" "" "SELECT count(*) FROM orders WHERE customer_id = 4242.0"
explain implicit-cast.good "$A, VERBOSE" "" "SELECT count(*) FROM orders WHERE customer_id = 4242"
explain implicit-cast-char.bad "$A, VERBOSE" "" "SELECT count(*) FROM readings WHERE sensor = '00000042'::text"
explain implicit-cast-char.good "$A, VERBOSE" "" "SELECT count(*) FROM readings WHERE sensor = '00000042'"
explain implicit-cast-float.bad "$A, VERBOSE" "" "SELECT count(*) FROM orders WHERE amount = 12.5::float8"
explain implicit-cast-timestamp.bad "$A, VERBOSE" "" "SELECT count(*) FROM orders WHERE placed_at::timestamptz > timestamptz '2024-04-18 00:00+00'"
explain implicit-cast-timestamp.good "$A, VERBOSE" "" "SELECT count(*) FROM orders WHERE placed_at > timestamp '2024-04-18 00:00'"

explain sort-spill.bad "$A, SETTINGS" "SET work_mem = '1MB'" "SELECT * FROM orders ORDER BY note"
explain sort-spill.good "$A, SETTINGS" "SET work_mem = '256MB'" "SELECT * FROM orders ORDER BY note"

explain hash-batches.bad "$A, SETTINGS" "SET work_mem = '256kB'" "SELECT c.region, sum(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.region"
explain hash-batches.good "$A, SETTINGS" "SET work_mem = '64MB'" "SELECT c.region, sum(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.region"

explain misestimate.bad "$A" "" "SELECT r.id, c.tier FROM readings r JOIN customers c ON c.id = r.id WHERE r.city = 42 AND r.country = 4 AND r.region = 0"
psql -c "CREATE STATISTICS readings_city_country (dependencies) ON city, country, region FROM readings; ANALYZE readings"
explain misestimate.good "$A" "" "SELECT r.id, c.tier FROM readings r JOIN customers c ON c.id = r.id WHERE r.city = 42 AND r.country = 4 AND r.region = 0"

explain nested-loop-blowup.bad "$A, SETTINGS" "SET jit = off; SET enable_hashjoin = off; SET enable_mergejoin = off" "SELECT count(*) FROM customers c JOIN readings r ON r.city = c.tier WHERE c.id < 150"
explain nested-loop-blowup.good "$A" "" "SELECT count(*) FROM customers c JOIN readings r ON r.city = c.tier WHERE c.id < 150"

explain lossy-bitmap.bad "$A, SETTINGS" "SET work_mem = '64kB'; SET enable_seqscan = off; SET enable_indexscan = off" "SELECT count(*) FROM orders WHERE placed_at BETWEEN '2024-01-10' AND '2024-03-20'"
explain lossy-bitmap.good "$A, SETTINGS" "SET work_mem = '64MB'; SET enable_seqscan = off; SET enable_indexscan = off" "SELECT count(*) FROM orders WHERE placed_at BETWEEN '2024-01-10' AND '2024-03-20'"

explain large-offset.bad "$A" "" "SELECT id, placed_at FROM orders ORDER BY placed_at OFFSET 200000 LIMIT 20"
explain large-offset.good "$A" "" "SELECT id, placed_at FROM orders WHERE placed_at > '2024-03-11 10:40' ORDER BY placed_at LIMIT 20"

psql -c "UPDATE pages SET body = body WHERE id % 2 = 0"
explain heap-fetches.bad "$A" "SET enable_seqscan = off; SET enable_bitmapscan = off" "SELECT count(id) FROM pages WHERE id BETWEEN 1 AND 150000"
psql -c "VACUUM pages"
explain heap-fetches.good "$A" "SET enable_seqscan = off; SET enable_bitmapscan = off" "SELECT count(id) FROM pages WHERE id BETWEEN 1 AND 150000"

joins="FROM customers c1"
for i in $(seq 2 16); do joins="$joins JOIN customers c$i ON c$i.id = c$((i - 1)).tier"; done
explain slow-planning.bad "$A" "SET join_collapse_limit = 16; SET from_collapse_limit = 16; SET geqo_threshold = 20" "SELECT count(*) $joins WHERE c1.id = 7"
explain slow-planning.good "$A" "" "SELECT count(*) FROM customers c1 JOIN customers c2 ON c2.id = c1.tier WHERE c1.id = 7"

explain jit-overhead.bad "$A, SETTINGS" "SET jit = on; SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0" "SELECT status, count(*), sum(amount), avg(amount) FROM orders WHERE id < 200 GROUP BY status"
explain jit-overhead.good "$A, SETTINGS" "SET jit = off" "SELECT status, count(*), sum(amount), avg(amount) FROM orders WHERE id < 200 GROUP BY status"

# Shapes the rules do not target but the parsers must read.
explain parallel "$A, VERBOSE" "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0" "SELECT status, count(*) FROM orders GROUP BY status"
explain subplans "$A, VERBOSE" "" "WITH big AS MATERIALIZED (SELECT customer_id, sum(amount) s FROM orders GROUP BY customer_id) SELECT c.id, (SELECT max(s) FROM big) FROM customers c WHERE c.id IN (SELECT customer_id FROM big WHERE s > (SELECT avg(s) FROM big)) ORDER BY c.id LIMIT 5"
explain wal "ANALYZE, BUFFERS, WAL" "" "UPDATE pages SET body = body WHERE id < 50"
explain costs-only "VERBOSE" "" "SELECT c.region, count(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status = 'paid' GROUP BY 1"
explain timing-off "ANALYZE, TIMING OFF" "" "SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id"

# psql's aligned output, header, footer and "+" marks included.
command psql "$dsn" -X -q -c "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM customers WHERE tier = 3" >"$out/psql-aligned.json.txt"
command psql "$dsn" -X -q -c "EXPLAIN ANALYZE SELECT count(*) FROM customers WHERE tier = 3" >"$out/psql-aligned.txt"
echo "fixtures written to $out"
