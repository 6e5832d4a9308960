#!/usr/bin/env bash
# Builds a twin of a set of large tables with check --twin, at each bound
# given (MB; the default bound of 1024 copies a sample of each table, a
# bound above the set copies it whole), and prints the time, rows and bytes
# each took. Each of TABLES tables holds ROWS rows (14M rows is about 2 GB
# of heap) and has one statement that scans it for want of an index, so
# check's missing-index experiments need every table on the twin. Run from
# the repository root; the lab cluster and the twins are removed at the end.
#
#   bash bench/twin/run.sh [ROWS] [TABLES] [BOUND_MB...]
#   bash bench/twin/run.sh 14000000 1 1024 4096    # 2 GB, as measured first
#   bash bench/twin/run.sh 14000000 5 1024 12288   # a 10 GB set
set -euo pipefail
rows=${1:-14000000}
tables=${2:-1}
shift $(( $# < 2 ? $# : 2 ))
bounds=("$@")
[ ${#bounds[@]} -eq 0 ] && bounds=(1024 4096)
. scripts/lab.sh
psql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
start=$(date +%s)
for t in $(seq 1 "$tables"); do
  psql -c "CREATE TABLE events$t (id bigint PRIMARY KEY, account int NOT NULL, kind text NOT NULL, payload text NOT NULL, at timestamptz NOT NULL)" \
    -c "INSERT INTO events$t SELECT g, g % 50000, 'k' || (g % 20), repeat(md5(g::text), 3), now() - g * interval '1 s' FROM generate_series(1, $rows) g" \
    -c "VACUUM ANALYZE events$t"
done
echo "loaded $tables tables in $(( $(date +%s) - start )) s: $(psql -At -c "SELECT pg_size_pretty(sum(pg_relation_size(oid))) || ' heap, ' || pg_size_pretty(sum(pg_total_relation_size(oid))) || ' with indexes' FROM pg_class WHERE relname ~ '^events[0-9]+$' AND relkind = 'r'")"
psql -c "SELECT pg_stat_statements_reset()" >/dev/null
for t in $(seq 1 "$tables"); do
  for i in $(seq 1 10); do psql -At -c "SELECT count(*) FROM events$t WHERE account = $((i * 7)) AND kind = 'k3'" >/dev/null; done
done
for max in "${bounds[@]}"; do
  s=$(date +%s.%N)
  "$dir/pgmedic" check "$dsn" --sample 0 --twin --twin-max-size "$max" --rules missing-index --copy-timeout 60m >"$dir/twin$max.txt" 2>&1 || true
  echo "--twin-max-size $max: check took $(echo "$(date +%s.%N) - $s" | bc) s"
  grep -E "verified|twin on|copied" "$dir/twin$max.txt" | cut -c1-400
done
