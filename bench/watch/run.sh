#!/usr/bin/env bash
# What pgmedic watch costs while the server works: pgbench (TPC-B, 16
# clients at 400 transactions a second, 60 more connections open and idle) runs
# for SECONDS while watch records at its default tick (1 s) and at a tenth
# of it (100 ms), one after the other; each prints its own overhead line
# (its CPU per second of wall time; the time its queries took a tick),
# and the server's view of watch's queries is read from pg_stat_statements.
# Run from the repository root.
#
#   bash bench/watch/run.sh [SECONDS]        # default 60
set -euo pipefail
secs=${1:-60}
. scripts/lab.sh
port=$(echo "$dsn" | sed -E 's|.*:([0-9]+)/.*|\1|')
psql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
pgbench() { command pgbench -h 127.0.0.1 -p "$port" -U postgres "$@"; }
pgbench -i -q -s 10 postgres >/dev/null 2>&1
# 60 idle connections beside the workload: the sampler reads every session.
for i in $(seq 1 60); do (command psql "$dsn" -X -q -c "SELECT pg_sleep($((secs * 2 + 30)))" >/dev/null 2>&1 &) ; done
for tick in 1s 100ms; do
  psql -c "SELECT pg_stat_statements_reset()" >/dev/null
  pgbench -c 16 -j 2 -R 400 -T "$secs" postgres >"$dir/pgbench-$tick.txt" 2>&1 &
  bench=$!
  "$dir/pgmedic" watch "$dsn" --dir "$dir/watch-$tick" --interval "$tick" --duration "${secs}s" 2>"$dir/watch-$tick.txt" || true
  wait $bench || true
  echo "tick $tick: $(tail -n1 "$dir/watch-$tick.txt" | sed 's/^pgmedic watch: //')"
  echo "  server: $(psql -At -c "SELECT count(*) || ' statements of watch, ' || round(sum(total_exec_time)::numeric, 1) || ' ms of execution' FROM pg_stat_statements WHERE query LIKE '/* pgmedic */%'")"
  echo "  pgbench: $(grep -E '^tps' "$dir/pgbench-$tick.txt" | head -1)"
  echo "  ring: $(du -sk "$dir/watch-$tick/ring" | cut -f1) kB for ${secs} s"
done
pkill -f "pg_sleep($((secs * 2 + 30)))" || true
