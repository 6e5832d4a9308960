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
#
# JOBS=N instead puts the twin's build beside the tools a DBA would use
# for the same copy: both write into the same scratch database on a second
# lab cluster of this machine, one after the other, from the same tables.
#   - check --twin-dsn SCRATCH --max-connections N --twin-max-size (above
#     the set): the twin's own build time, as its report says;
#   - pg_dump -j N -Fd -Z 0 (no compression: its fastest) of the same
#     tables, then pg_restore -j N into the emptied scratch database.
#   JOBS=2 bash bench/twin/run.sh 1000000 4     # four tables
#   JOBS=2 bash bench/twin/run.sh 4000000 1     # one large table
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
if [ -n "${JOBS:-}" ]; then
  "$dir/pgmedic" lab up --dir "$dir/lab2" >"$dir/up2.txt"
  trap '"$dir/pgmedic" lab down --dir "$dir/lab2" >/dev/null 2>&1 || true; "$dir/pgmedic" lab down --dir "$dir/lab" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
  dsn2=$(tail -n1 "$dir/up2.txt")
  scratch=${dsn2%/postgres*}/scratch?sslmode=disable
  fresh() { command psql "$dsn2" -X -q -c "DROP DATABASE IF EXISTS scratch" -c "CREATE DATABASE scratch"; }
  bytes=$(psql -At -c "SELECT (sum(pg_total_relation_size(oid)) / 1048576)::int8 + 1024 FROM pg_class WHERE relname ~ '^events[0-9]+$' AND relkind = 'r'")
  echo "machine: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $JOBS jobs each"
  for round in 1 2; do
    fresh
    "$dir/pgmedic" check "$dsn" --sample 0 --twin-dsn "$scratch" --max-connections "$JOBS" --twin-max-size "$bytes" --rules missing-index --copy-timeout 60m >"$dir/par.txt" 2>&1 || true
    twin=$(grep -o 'twin on .* in [0-9.]* s' "$dir/par.txt" | grep -o 'in [0-9.]* s$' | grep -o '[0-9.]*' || true)
    if [ -z "$twin" ]; then echo "check built no twin:"; tail -n 20 "$dir/par.txt"; exit 1; fi
    fresh
    s=$(date +%s.%N)
    rm -rf "$dir/dump"
    pg_dump -d "$dsn" -j "$JOBS" -Fd -Z 0 -f "$dir/dump" $(for t in $(seq 1 "$tables"); do echo "-t events$t"; done)
    d=$(date +%s.%N)
    pg_restore -j "$JOBS" -d "$scratch" "$dir/dump"
    e=$(date +%s.%N)
    dump=$(echo "$d - $s" | bc); restore=$(echo "$e - $d" | bc); peer=$(echo "$e - $s" | bc)
    printf 'round %d: twin %s s (copy, keys, indexes, ANALYZE); pg_dump -j %d %.1f s + pg_restore -j %d %.1f s = %.1f s (no ANALYZE); pg_dump|restore / twin = %.2fx\n' \
      "$round" "$twin" "$JOBS" "$dump" "$JOBS" "$restore" "$peer" "$(echo "$peer / $twin" | bc -l)"
  done
  grep -E "sessions read|twin on" "$dir/par.txt" | cut -c1-300
  exit 0
fi
for max in "${bounds[@]}"; do
  s=$(date +%s.%N)
  "$dir/pgmedic" check "$dsn" --sample 0 --twin --twin-max-size "$max" --rules missing-index --copy-timeout 60m >"$dir/twin$max.txt" 2>&1 || true
  echo "--twin-max-size $max: check took $(echo "$(date +%s.%N) - $s" | bc) s"
  grep -E "verified|twin on|copied" "$dir/twin$max.txt" | cut -c1-400
done
