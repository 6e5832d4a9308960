#!/usr/bin/env bash
# Regenerates internal/plan/testdata/shapes: real PostgreSQL plans, each in
# TEXT and JSON, covering the node and detail-line shapes of explain.c that
# the rule fixtures do not: ModifyTable with several result relations
# (partitions, a foreign partition), MERGE, ON CONFLICT, run-time partition
# pruning, Memoize, Incremental Sort, parallel workers with VERBOSE,
# TABLESAMPLE, function scans, window functions, set operations, recursive
# CTEs, hashed SubPlans, triggers, WAL, KNN index scans, row locks and
# postgres_fdw's Remote SQL. Run from the repository root:
#
#   bash scripts/shape-fixtures.sh
set -euo pipefail
out=internal/plan/testdata/shapes
source "$(dirname "$0")/lab.sh"
port=$(sed -E 's#.*:([0-9]+)/.*#\1#' <<<"$dsn")
rm -rf "$out"
mkdir -p "$out"

psql <<SQL
CREATE EXTENSION postgres_fdw;
CREATE SERVER loopback FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER loopback;
CREATE TABLE ta (id int, v int) PARTITION BY RANGE (id);
CREATE TABLE ta1 PARTITION OF ta FOR VALUES FROM (0) TO (1000);
CREATE TABLE ta2 PARTITION OF ta FOR VALUES FROM (1000) TO (2000);
CREATE TABLE ta3_remote (id int, v int);
CREATE FOREIGN TABLE ta3 PARTITION OF ta FOR VALUES FROM (2000) TO (3000) SERVER loopback OPTIONS (table_name 'ta3_remote');
INSERT INTO ta SELECT g, g FROM generate_series(0, 2999) g;
CREATE TABLE items (id int PRIMARY KEY, grp int NOT NULL, name text NOT NULL, p point);
INSERT INTO items SELECT g, g % 50, 'n' || g, point(g % 100, g / 100) FROM generate_series(1, 100000) g;
CREATE INDEX items_grp ON items (grp);
CREATE INDEX items_p ON items USING gist (p);
CREATE TABLE lines (id int PRIMARY KEY, item_id int NOT NULL REFERENCES items, qty int NOT NULL);
INSERT INTO lines SELECT g, 1 + (g * 37) % 100000, g % 9 FROM generate_series(1, 200000) g;
CREATE TABLE small (k int PRIMARY KEY, label text);
INSERT INTO small SELECT g, 'l' || g FROM generate_series(1, 100) g;
VACUUM ANALYZE;
SQL

# shape NAME OPTIONS SETUP QUERY [rollback]: NAME.txt and NAME.json.
shape() {
  local name=$1 opts=$2 setup=$3 query=$4 wrap=${5:-}
  for fmt in text json; do
    local ext=txt
    [ "$fmt" = json ] && ext=json
    if [ -n "$wrap" ]; then
      # The rolled-back run leaves dead rows behind: clear them so the
      # other format's run plans on the same statistics.
      psql -c "VACUUM ANALYZE"
      psql -A -t -c "BEGIN" -c "SET max_parallel_workers_per_gather = 0; $setup" -c "EXPLAIN ($opts, FORMAT $fmt) $query" -c "ROLLBACK" >"$out/$name.$ext"
    else
      psql -A -t -c "SET max_parallel_workers_per_gather = 0; $setup" -c "EXPLAIN ($opts, FORMAT $fmt) $query" >"$out/$name.$ext"
    fi
  done
}
A='ANALYZE, BUFFERS, VERBOSE'
shape update-partitions "$A" "" "UPDATE ta SET v = v + 1 WHERE v % 7 = 0" rollback
shape update-partitions-plain "VERBOSE, COSTS OFF" "" "UPDATE ta SET v = v + 1 WHERE v > 5"
shape delete-partitions "ANALYZE" "" "DELETE FROM ta WHERE id < 10 OR id > 2990" rollback
shape merge "$A, WAL" "" "MERGE INTO small s USING (SELECT g AS k FROM generate_series(90, 110) g) n ON s.k = n.k
  WHEN MATCHED THEN UPDATE SET label = 'm' WHEN NOT MATCHED THEN INSERT VALUES (n.k, 'new')" rollback
shape on-conflict "$A" "" "INSERT INTO small SELECT g, 'x' FROM generate_series(95, 105) g ON CONFLICT (k) DO UPDATE SET label = excluded.label" rollback
shape pruning "ANALYZE, VERBOSE" "SET plan_cache_mode = force_generic_plan; PREPARE pr(int) AS SELECT * FROM ta WHERE id = \$1" "EXECUTE pr(5)"
shape memoize "$A" "SET enable_hashjoin = off; SET enable_mergejoin = off" "SELECT count(*) FROM lines l JOIN small s ON s.k = l.qty"
shape incremental-sort "$A" "" "SELECT * FROM items ORDER BY id, name LIMIT 100"
shape parallel-workers "$A" "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0" "SELECT * FROM lines WHERE qty = 3 ORDER BY item_id"
shape tablesample "$A" "" "SELECT count(*) FROM items TABLESAMPLE BERNOULLI (10) REPEATABLE (1)"
shape function-scans "$A" "" "SELECT * FROM generate_series(1, 10) g, unnest(ARRAY[1,2]) u, xmltable('/r/x' PASSING xmlparse(document '<r><x>1</x></r>') COLUMNS x int PATH '.') t"
shape window-setop "$A" "" "SELECT grp, rank() OVER (PARTITION BY grp ORDER BY id) FROM items WHERE id < 200 EXCEPT SELECT k, 1 FROM small"
shape recursive-cte "$A" "" "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 50) SELECT sum(n) FROM r"
shape subplans-hashed "$A" "" "SELECT count(*) FROM items i WHERE i.grp NOT IN (SELECT qty FROM lines WHERE id < 100) AND i.id > (SELECT max(k) FROM small)"
shape triggers "ANALYZE, WAL" "" "INSERT INTO lines SELECT 300000 + g, g, 1 FROM generate_series(1, 500) g" rollback
shape knn-locks "$A" "" "SELECT id FROM items ORDER BY p <-> point(5, 5) LIMIT 3 FOR UPDATE" rollback
shape tid-values-misc "$A" "" "SELECT * FROM items WHERE ctid = '(0,1)' UNION ALL SELECT * FROM (VALUES (1, 2, 'v', NULL::point)) v(a, b, c, d) WHERE a = 1 AND now() > '2000-01-01'"
shape fdw-remote "$A" "" "SELECT * FROM ta3 WHERE v > 2990"
shape fdw-update "VERBOSE" "" "UPDATE ta3 SET v = 0 WHERE id = 2500"
shape settings-jit "ANALYZE, SETTINGS" "SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0; SET work_mem = '1MB'" "SELECT grp, count(*) FROM items GROUP BY grp"
shape bitmap-and-or "$A" "SET enable_seqscan = off" "SELECT count(*) FROM items WHERE (grp = 1 OR grp = 2) AND id < 50000"
shape semi-anti-joins "$A" "" "SELECT count(*) FROM small s WHERE EXISTS (SELECT 1 FROM lines l WHERE l.qty = s.k) AND NOT EXISTS (SELECT 1 FROM items i WHERE i.id = s.k * 1000)"
ls "$out" | wc -l
