#!/usr/bin/env bash
# Writes internal/logs/testdata/lab/: the same workload's server log in the
# three formats PostgreSQL 15 writes (stderr with the lab's log_line_prefix,
# csvlog, jsonlog), from a lab cluster with statement durations,
# connections, lock waits, temporary files, checkpoints and auto_explain
# (text and JSON plans) logged; and, where rsyslogd is installed, the same
# log sent to syslog and written by rsyslog's traditional file format (it
# listens on /dev/log while the script runs, so run it where no other
# syslog daemon does). Run from the repository root, as root for syslog.
set -euo pipefail
. scripts/lab.sh
out=internal/logs/testdata/lab
logs="$dir/logs"
mkdir -p "$logs" && chmod 777 "$logs"

destinations='stderr,csvlog,jsonlog'
if command -v rsyslogd >/dev/null && [ "$(id -u)" = 0 ] && [ ! -e /dev/log ]; then
  cat > "$dir/rsyslog.conf" <<CONF
module(load="imuxsock" SysSock.Name="/dev/log")
global(workDirectory="$dir")
local0.* action(type="omfile" file="$logs/pg.syslog" template="RSYSLOG_TraditionalFileFormat")
CONF
  rsyslogd -f "$dir/rsyslog.conf" -i "$dir/rsyslogd.pid"
  trap 'kill "$(cat "$dir/rsyslogd.pid")" 2>/dev/null; rm -f /dev/log; "$dir/pgmedic" lab down --dir "$dir/lab" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
  sleep 0.5
  destinations="$destinations,syslog"
fi
log_everything "$destinations" "$logs" 10

psql <<'SQL'
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2) NOT NULL);
INSERT INTO accounts SELECT g, 'owner ' || g, 100 FROM generate_series(1, 300000) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, total numeric(12,2) NOT NULL);
INSERT INTO orders SELECT g, g % 5000, g % 97 FROM generate_series(1, 200000) g;
CREATE INDEX orders_customer_idx ON orders (customer_id);
ANALYZE;
SQL
# Statements with durations, some slow enough for auto_explain.
for i in $(seq 1 20); do echo "SELECT balance FROM accounts WHERE id = $((i * 7));"; done | psql
for i in 1 2 3; do echo "SELECT count(*) FROM accounts WHERE owner LIKE 'owner 1%';"; done | psql
# An implicit cast only the executed plan shows: a numeric parameter
# against an integer column.
psql -c "PREPARE by_customer(numeric) AS SELECT sum(total) FROM orders WHERE customer_id = \$1" -c "EXECUTE by_customer(42)" -c "EXECUTE by_customer(43)"
# JIT on a short statement (text plan this time).
psql -c "SET jit_above_cost = 0" -c "SET jit_inline_above_cost = 0" -c "SET jit_optimize_above_cost = 0" \
     -c "SET auto_explain.log_format = 'text'" -c "SELECT sum(balance) FROM accounts WHERE id < 200000"
# Statistics left behind: rows loaded after ANALYZE into a table
# autovacuum skips, then a scan the planner estimates from the old figures.
psql <<'SQL'
CREATE TABLE events (id int, kind text) WITH (autovacuum_enabled = off);
INSERT INTO events SELECT g, 'old' FROM generate_series(1, 1000) g;
ANALYZE events;
INSERT INTO events SELECT g, 'new' FROM generate_series(1, 300000) g;
SQL
psql -c "SET max_parallel_workers_per_gather = 0" -c "SELECT count(*) FROM events WHERE kind = 'new'"
# A sort that spills.
psql -c "SET work_mem = '64kB'" -c "SELECT owner FROM accounts ORDER BY owner DESC LIMIT 5"
# A statement longer than syslog's 900-byte pieces.
psql -c "SELECT count(*) FROM accounts WHERE id IN ($(seq -s ', ' 1000 1400))"
# Errors.
psql -c "SELECT 1/0" 2>/dev/null || true
psql -c "INSERT INTO accounts VALUES (1, 'dup', 0)" 2>/dev/null || true
psql -c "SELECT * FROM no_such_table" 2>/dev/null || true
# A lock wait: one session holds a row, another waits past deadlock_timeout.
psql -c "BEGIN" -c "UPDATE accounts SET balance = 1 WHERE id = 1" -c "SELECT pg_sleep(1)" -c "COMMIT" &
sleep 0.3
psql -c "UPDATE accounts SET balance = 2 WHERE id = 1"
wait
# A burst of connections.
for i in $(seq 1 25); do psql -c "SELECT 1" >/dev/null; done
psql -c "CHECKPOINT"
sleep 1.5 # the collector writes what it has

mkdir -p "$out"
cp "$logs/pg.log" "$out/stderr.log"
cp "$logs/pg.csv" "$out/csvlog.csv"
cp "$logs/pg.json" "$out/jsonlog.json"
gzip -9 -c "$out/stderr.log" > "$out/stderr.log.gz"
[ -f "$logs/pg.syslog" ] && cp "$logs/pg.syslog" "$out/syslog.log"

# maintenance.log: autovacuum held back by an old snapshot, and
# checkpoints forced by WAL volume (max_wal_size at its minimum).
psql -c "ALTER SYSTEM SET log_destination = 'stderr'" \
     -c "ALTER SYSTEM SET log_filename = 'maintenance.log'" \
     -c "ALTER SYSTEM SET log_min_duration_statement = -1" \
     -c "ALTER SYSTEM SET autovacuum_naptime = '1s'" \
     -c "ALTER SYSTEM SET max_wal_size = '32MB'" \
     -c "ALTER SYSTEM SET min_wal_size = '32MB'" \
     -c "ALTER SYSTEM SET checkpoint_warning = '5min'" \
     -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
psql <<'SQL'
CREATE TABLE jobs (id int PRIMARY KEY, attempts int NOT NULL DEFAULT 0, payload text);
INSERT INTO jobs SELECT g, 0, repeat('x', 40) FROM generate_series(1, 100000) g;
SQL
# A reporting transaction keeps its snapshot for 8 seconds: what the
# updates leave behind cannot be removed while it is open.
psql -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM jobs" -c "SELECT pg_sleep(8)" -c "COMMIT" >/dev/null &
sleep 0.5
for i in 1 2 3; do psql -c "UPDATE jobs SET attempts = attempts + 1"; sleep 1.5; done
for i in 1 2 3; do psql -c "UPDATE accounts SET balance = balance + 1"; done
wait
sleep 4 # autovacuum runs again once the snapshot is gone
cp "$logs/maintenance.log" "$out/maintenance.log"
wc -l "$out"/*
