#!/usr/bin/env bash
# Captures a workload on a lab cluster (pgbench's TPC-B over the extended
# protocol, and a read-mostly "application" script with prepared
# statements, side by side) into a log of about MB megabytes, then:
#   1. replays it with pgmedic at speed 1 and compares its wall time with
#      the capture's, with the lag split into the server's and pgmedic's;
#   2. replays it as fast as possible with pgmedic (--speed 0) and with
#      pgreplay-go (built from its public source; PGREPLAY=path, or
#      /tmp/pgr/pgreplay) at a replay rate of 10,000, on the same server,
#      and prints statements per second of each and the ratio.
# The log uses pgreplay-go's prefix '%m|%u|%d|%c|', which pgmedic reads
# too. Run from the repository root.
#
#   bash bench/replay/run.sh [MB]        # default 100
set -euo pipefail
mb=${1:-100}
pgreplay=${PGREPLAY:-/tmp/pgr/pgreplay}
. scripts/lab.sh
port=$(echo "$dsn" | sed -E 's|.*:([0-9]+)/.*|\1|')
psql -c "CREATE DATABASE bench"
pgbench() { command pgbench -h 127.0.0.1 -p "$port" -U postgres "$@"; }
pgbench -i -q -s 5 bench >/dev/null 2>&1
# The state the capture starts from, kept: both replayers start from it
# (the capture's own inserts would otherwise be there twice).
psql -c "CREATE DATABASE bench_start TEMPLATE bench"
psql -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# executed: statements the server ran since the last reset (the
# replayers' own bookkeeping left out).
executed() { psql -At -c "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query !~* 'pg_stat_activity|pg_stat_statements|CREATE DATABASE|DROP DATABASE|ALTER DATABASE|pg_db_role_setting|pg_roles'"; }
reset() { psql -At -c "SELECT pg_stat_statements_reset()" >/dev/null; }
# pgreplay-go reads statements from log_statement's lines (its README's
# settings), so both are on; pgmedic reads either.
psql -c "ALTER SYSTEM SET log_min_duration_statement = 0" -c "ALTER SYSTEM SET log_statement = 'all'" -c "ALTER SYSTEM SET log_connections = on" \
     -c "ALTER SYSTEM SET log_disconnections = on" -c "ALTER SYSTEM SET log_line_prefix = '%m|%u|%d|%c|'" \
     -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
log="$dir/lab/server.log"
from=$(stat -c %s "$log")
cat > "$dir/app.sql" <<'EOF'
\set aid random(1, 500000)
\set bid random(1, 5)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT sum(abalance) FROM pgbench_accounts WHERE bid = :bid AND aid BETWEEN :aid AND :aid + 50;
SELECT count(*) FROM pgbench_history WHERE aid = :aid;
EOF
echo "capturing until the log holds $mb MB..."
# Started directly (not in a subshell), so that the signal reaches
# pgbench. Each at a fixed rate (-R, transactions per second): a server
# captured at full load cannot be replayed on time by anything that uses
# more CPU than pgbench on the same cores.
command pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 4 -j 1 -T 600 -R 600 -M extended bench >/dev/null 2>&1 & p1=$!
command pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 4 -j 1 -T 600 -R 900 -M prepared -f "$dir/app.sql" bench >/dev/null 2>&1 & p2=$!
while [ $(( $(stat -c %s "$log") - from )) -lt $(( mb * 1048576 )) ]; do sleep 0.5; done
kill -TERM $p1 $p2 2>/dev/null || true
wait $p1 $p2 2>/dev/null || true
sleep 1
tail -c +$((from + 1)) "$log" > "$dir/capture.log"
echo "capture: $(( $(stat -c %s "$dir/capture.log") / 1048576 )) MB, $(wc -l < "$dir/capture.log") lines, $(nproc) cores"
psql -c "ALTER SYSTEM SET log_min_duration_statement = -1" -c "ALTER SYSTEM SET log_statement = 'none'" -c "ALTER SYSTEM SET log_connections = off" \
     -c "ALTER SYSTEM SET log_disconnections = off" -c "SELECT pg_reload_conf()" >/dev/null
bdsn="${dsn%/*}/bench_start?sslmode=disable"
"$dir/pgmedic" replay "$dir/capture.log" --prefix '%m|%u|%d|%c|' --dry-run | sed -n 3,12p
echo "--- pgmedic, speed 1"
"$dir/pgmedic" replay "$dir/capture.log" --prefix '%m|%u|%d|%c|' --dsn "$bdsn" --speed 1 | sed -n '/REPLAY/,/statements by/p'
echo "--- pgmedic, speed 0"
reset
s=$(date +%s.%N)
"$dir/pgmedic" replay "$dir/capture.log" --prefix '%m|%u|%d|%c|' --dsn "$bdsn" --speed 0 --format json > "$dir/fast.json"
e=$(date +%s.%N)
read -r stmts wall < <(python3 -c "import json,sys; r=json.load(open('$dir/fast.json'))['replay']; print(r['statements'], r['wall_s'])")
mran=$(executed)
mine=$(echo "$mran / $wall" | bc -l)
mine_all=$(echo "$mran / ($e - $s)" | bc -l)
printf 'pgmedic: %d statements in %.2f s of replay (%.0f/s); %.2f s with reading the log and copying the database (%.0f/s); the server counted %d\n' "$stmts" "$wall" "$mine" "$(echo "$e - $s" | bc)" "$mine_all" "$mran"
if [ ! -x "$pgreplay" ]; then echo "pgreplay-go not found at $pgreplay: build it from github.com/gocardless/pgreplay-go (go build ./cmd/pgreplay)"; exit 0; fi
echo "--- pgreplay-go, replay rate 10000"
# pgreplay-go connects to the database the log names: bench, put back to
# the capture's starting state.
psql -c "DROP DATABASE bench" -c "CREATE DATABASE bench TEMPLATE bench_start"
reset
s=$(date +%s.%N)
"$pgreplay" run --errlog-input "$dir/capture.log" --host 127.0.0.1 --port "$port" --user postgres --database bench \
  --replay-rate 10000 --metrics-port 0 > "$dir/pgreplay.out" 2>&1 || true
e=$(date +%s.%N)
ran=$(executed)
theirs=$(echo "$ran / ($e - $s)" | bc -l)
printf 'pgreplay-go: %.2f s, the server counted %d statements (%.0f/s, reading included)\n' "$(echo "$e - $s" | bc)" "$ran" "$theirs"
grep -c "level=error" "$dir/pgreplay.out" | sed 's/^/pgreplay-go error lines: /' || true
echo "ratio, reading included (pgmedic / pgreplay-go statements per second): $(echo "$mine_all / $theirs" | bc -l | cut -c1-5)x"
