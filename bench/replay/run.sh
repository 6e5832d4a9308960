#!/usr/bin/env bash
# Captures a workload on a lab cluster (pgbench's TPC-B over the extended
# protocol, and a read-mostly "application" script with prepared
# statements, side by side) into a log of about MB megabytes, then:
#   1. replays it with pgmedic at speed 1 and compares its wall time with
#      the capture's, with the lag split into the server's and pgmedic's;
#   2. replays it as fast as possible with pgmedic (--speed 0) and with
#      pgreplay-go (built from its public source; PGREPLAY=path, or
#      /tmp/pgr/pgreplay) at a replay rate of 10,000, on the same server,
#      taking turns for ROUNDS rounds, and prints statements per second of
#      each by its own replay time (pgmedic's report, pgreplay-go's
#      time.elapsed) and as a whole process, the median ratios, the
#      server's CPU a statement for each, and the ceiling: pgbench's own
#      rate on the same statements flat out, beside pgreplay-go's.
# The log uses pgreplay-go's prefix '%m|%u|%d|%c|', which pgmedic reads
# too. Run from the repository root.
#
#   bash bench/replay/run.sh [MB]        # default 100
#   ROUNDS=N: rounds of the as-fast-as-possible comparison (default 5),
#   the tools taking turns; the median ratio is reported.
set -euo pipefail
mb=${1:-100}
rounds=${ROUNDS:-5}
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
# The rates are 40% of what this machine's server does with both running
# flat out (5 s measured first, logging off): a capture taken near the
# server's capacity leaves a replayer nothing to go faster with, and two
# replayers then measure the same server. The measuring run's rows are
# gone with bench, made again from bench_start.
psql -c "ALTER SYSTEM SET log_statement = 'none'" -c "ALTER SYSTEM SET log_min_duration_statement = -1" -c "SELECT pg_reload_conf()" >/dev/null
tps() { grep -o 'tps = [0-9.]*' | head -n1 | grep -o '[0-9.]*$'; }
command pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 4 -j 1 -T 5 -M extended bench 2>/dev/null >"$dir/cap1.txt" &
command pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 4 -j 1 -T 5 -M prepared -f "$dir/app.sql" bench 2>/dev/null >"$dir/cap2.txt"
wait
r1=$(awk -v t="$(tps <"$dir/cap1.txt")" 'BEGIN {printf "%d", t * 0.4}')
r2=$(awk -v t="$(tps <"$dir/cap2.txt")" 'BEGIN {printf "%d", t * 0.4}')
# The ceiling: pgbench's statements a second, flat out, on the same
# statements (TPC-B's 7 a transaction, the application's 3), sent by a
# client in C on one thread. No replayer of these sessions, one statement
# at a time each, goes much faster than that on this server.
ceiling=$(awk -v a="$(tps <"$dir/cap1.txt")" -v b="$(tps <"$dir/cap2.txt")" 'BEGIN {printf "%d", a * 7 + b * 3}')
echo "capacity here: $(tps <"$dir/cap1.txt") and $(tps <"$dir/cap2.txt") transactions/s flat out ($ceiling statements/s, pgbench); capturing at $r1 and $r2"
psql -c "DROP DATABASE bench" -c "CREATE DATABASE bench TEMPLATE bench_start" \
     -c "ALTER SYSTEM SET log_min_duration_statement = 0" -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
from=$(stat -c %s "$log")
command pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 4 -j 1 -T 600 -R "$r1" -M extended bench >/dev/null 2>&1 & p1=$!
command pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c 4 -j 1 -T 600 -R "$r2" -M prepared -f "$dir/app.sql" bench >/dev/null 2>&1 & p2=$!
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
echo "--- as fast as possible: $rounds alternating rounds, each tool timed by its own replay time"
if [ ! -x "$pgreplay" ]; then echo "pgreplay-go not found at $pgreplay: build it from github.com/gocardless/pgreplay-go (go build ./cmd/pgreplay)"; exit 0; fi
: >"$dir/rounds.txt"
# The server's CPU time (its backends', as the postmaster counts its
# children that have exited; each replayer's sessions end with it).
pmpid=$(head -n1 "$(psql -Atc 'SHOW data_directory')/postmaster.pid")
servercpu() { awk '{printf "%.2f", ($16 + $17) / 100}' "/proc/$pmpid/stat"; }
for round in $(seq 1 "$rounds"); do
  # pgmedic replays into a fresh copy of bench_start of its own; its
  # report's wall_s is the replay alone (the log read before).
  reset
  c0=$(servercpu)
  s=$(date +%s.%N)
  "$dir/pgmedic" replay "$dir/capture.log" --prefix '%m|%u|%d|%c|' --dsn "$bdsn" --speed 0 --format json > "$dir/fast.json"
  e=$(date +%s.%N)
  sleep 0.5
  mcpu=$(echo "$(servercpu) - $c0" | bc)
  wall=$(python3 -c "import json; print(json.load(open('$dir/fast.json'))['replay']['wall_s'])")
  mran=$(executed)
  # pgreplay-go connects to the database the log names: bench, put back
  # to the capture's starting state. It has no "as fast as possible"
  # (--replay-rate 10000), and logs its own replay time (time.elapsed,
  # parsing included, which it streams alongside).
  psql -c "DROP DATABASE bench" -c "CREATE DATABASE bench TEMPLATE bench_start"
  reset
  c0=$(servercpu)
  s2=$(date +%s.%N)
  "$pgreplay" run --errlog-input "$dir/capture.log" --host 127.0.0.1 --port "$port" --user postgres --database bench \
    --replay-rate 10000 --metrics-port 0 > "$dir/pgreplay.out" 2>&1 || true
  e2=$(date +%s.%N)
  sleep 0.5
  pcpu=$(echo "$(servercpu) - $c0" | bc)
  ran=$(executed)
  theirs=$(python3 - "$dir/pgreplay.out" <<'PY'
import re, sys
m = re.search(r'event=time\.elapsed total=(\S+)', open(sys.argv[1]).read())
d, total = m.group(1) if m else "", 0.0
for n, u in re.findall(r'([0-9.]+)(h|ms|µs|us|ns|m|s)', d):
    total += float(n) * {'h': 3600, 'm': 60, 's': 1, 'ms': 1e-3, 'µs': 1e-6, 'us': 1e-6, 'ns': 1e-9}[u]
print(total)
PY
)
  errors=$(grep -c "level=error" "$dir/pgreplay.out" || true)
  echo "$round $mran $wall $(echo "$e - $s" | bc) $ran $theirs $(echo "$e2 - $s2" | bc) $errors $mcpu $pcpu" >>"$dir/rounds.txt"
  printf 'round %d: pgmedic %d statements in %.2f s (%.0f/s; %.2f s as a process; the server %.0f µs of CPU a statement); pgreplay-go %d in %.2f s (%.0f/s; %.2f s as a process, %s error lines; the server %.0f µs a statement)\n' \
    "$round" "$mran" "$wall" "$(echo "$mran / $wall" | bc -l)" "$(echo "$e - $s" | bc)" "$(echo "$mcpu * 1000000 / $mran" | bc -l)" \
    "$ran" "$theirs" "$(echo "$ran / $theirs" | bc -l)" "$(echo "$e2 - $s2" | bc)" "$errors" "$(echo "$pcpu * 1000000 / $ran" | bc -l)"
done
python3 - "$dir/rounds.txt" "$ceiling" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
ceiling = float(sys.argv[2])
own = [(r[1] / r[2]) / (r[4] / r[5]) for r in rows]
proc = [(r[1] / r[3]) / (r[4] / r[6]) for r in rows]
print("pgmedic / pgreplay-go statements per second, by each tool's own replay time: median %.2fx (%s)" % (statistics.median(own), ", ".join("%.2f" % x for x in own)))
print("                                                      as whole processes: median %.2fx (%s)" % (statistics.median(proc), ", ".join("%.2f" % x for x in proc)))
theirs = statistics.median(r[4] / r[5] for r in rows)
print("pgbench flat out on the same statements (%.0f/s) / pgreplay-go's median (%.0f/s): %.2fx" % (ceiling, theirs, ceiling / theirs))
PY
