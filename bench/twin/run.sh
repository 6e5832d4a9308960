#!/usr/bin/env bash
# Builds a twin of one large table with check --twin, at the default bound
# (a sample) and with a bound above the table (a full copy), and prints
# the time, rows and bytes each took. ROWS sets the table's size (14M rows
# is about 2 GB of heap). Run from the repository root; the lab cluster
# and the twins are removed at the end.
#
#   bash bench/twin/run.sh [ROWS]
set -euo pipefail
rows=${1:-14000000}
. scripts/lab.sh
psql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "CREATE TABLE events (id bigint PRIMARY KEY, account int NOT NULL, kind text NOT NULL, payload text NOT NULL, at timestamptz NOT NULL)"
start=$(date +%s)
psql -c "INSERT INTO events SELECT g, g % 50000, 'k' || (g % 20), repeat(md5(g::text), 3), now() - g * interval '1 s' FROM generate_series(1, $rows) g" -c "VACUUM ANALYZE events"
echo "loaded in $(( $(date +%s) - start )) s: $(psql -At -c "SELECT pg_size_pretty(pg_relation_size('events')) || ' heap, ' || pg_size_pretty(pg_total_relation_size('events')) || ' with indexes'")"
psql -c "SELECT pg_stat_statements_reset()" >/dev/null
for i in $(seq 1 10); do psql -At -c "SELECT count(*) FROM events WHERE account = $((i * 7)) AND kind = 'k3'" >/dev/null; done
for max in 1024 4096; do
  s=$(date +%s.%N)
  "$dir/pgmedic" check "$dsn" --sample 0 --twin --twin-max-size "$max" --rules missing-index --copy-timeout 30m >"$dir/twin$max.txt" 2>&1 || true
  echo "--twin-max-size $max: check took $(echo "$(date +%s.%N) - $s" | bc) s"
  grep -E "verified|twin on" "$dir/twin$max.txt" | cut -c1-300
done
