#!/usr/bin/env bash
# Measures how much of what check --twin finds it proves, on workloads
# that are not the lab's: each is a small application in another domain
# (a library, telemetry, a warehouse, ticketing, a wiki, payments, a
# ledger report, a migration; for the health classes a settlement
# service, a CRM, a chat and a bank), written for this script, with one problem
# planted the way such an application plants it, driven by pgbench
# (extended protocol, several clients) while check samples it. For every
# finding at warning or above it prints the rule and the verification,
# then the share confirmed or refuted by two measured numbers, leaving
# out findings whose fix is in client code (client-stall).
#
#   bash bench/proof/run.sh [SECONDS_OF_SAMPLING]     # default 5
#   ONLY="library wiki" KEEP=/tmp/proof bash bench/proof/run.sh
#                       # some workloads only; keep their reports in KEEP
#
# Run from the repository root; the lab cluster is removed at the end.
set -euo pipefail
sample=${1:-5}
cd "$(dirname "$0")/../.."
source scripts/lab.sh
base=${dsn%/postgres*}
pgbench_bin=$(command -v pgbench)
results="$dir/results.jsonl"
: >"$results"

# workload NAME SETUP_SQL PGBENCH_SCRIPT CLIENTS [HOLD_SQL [BLOCKED_SQL]]:
# a database NAME set up with SETUP_SQL, pgbench running PGBENCH_SCRIPT
# with CLIENTS clients in the background while check --twin samples it;
# HOLD_SQL, when given, runs first in a session that stays open (an idle
# transaction, a long read), and BLOCKED_SQL after it in another (a
# migration that queues behind the read).
workload() {
  local name=$1 setup=$2 script=$3 clients=$4 hold=${5:-} blocked=${6:-}
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  psql -c "CREATE DATABASE $name" >/dev/null
  local db="$base/$name?sslmode=disable"
  printf 'CREATE EXTENSION pg_stat_statements;\n%s;\n' "$setup" | command psql "$db" -X -q -v ON_ERROR_STOP=1 >/dev/null
  printf '%s\n' "$script" >"$dir/$name.sql"
  local holder=""
  if [ -n "$hold" ]; then
    (printf '%s\n' "$hold"; sleep $((sample + 40))) | command psql "$db" -X -q >/dev/null 2>&1 &
    holder=$!
    sleep 1
  fi
  local blocker=""
  if [ -n "$blocked" ]; then
    command psql "$db" -X -q -c "$blocked" >/dev/null 2>&1 &
    blocker=$!
    sleep 1
  fi
  command psql "$db" -X -q -c "SELECT pg_stat_statements_reset()" >/dev/null
  "$pgbench_bin" -n -M prepared -c "$clients" -T $((sample + 30)) -f "$dir/$name.sql" "$db" >"$dir/$name.pgbench" 2>&1 &
  local bench=$!
  sleep 8
  "$dir/pgmedic" check "$db" --twin --sample "${sample}s" --format json >"$dir/$name.json" 2>"$dir/$name.err" || true
  kill "$bench" 2>/dev/null || true
  wait "$bench" 2>/dev/null || true
  command psql "$dsn" -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$name' AND pid <> pg_backend_pid()" >/dev/null
  for p in $holder $blocker; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  command psql "$dsn" -X -q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$name' AND pid <> pg_backend_pid()" >/dev/null
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$dir/$name.json" "$dir/$name.err" "$dir/$name.pgbench" "$KEEP/"; fi
  python3 - "$name" "$dir/$name.json" >>"$results" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    rep = json.load(open(path))
except Exception as e:
    print(json.dumps({"workload": name, "error": str(e)}))
    sys.exit()
for f in rep.get("findings") or []:
    if f["severity"] not in ("warning", "critical"):
        continue
    v = f.get("verification") or {}
    print(json.dumps({"workload": name, "rule": f["rule"], "status": v.get("status"),
                      "before": (v.get("before") or {}).get("value"), "after": (v.get("after") or {}).get("value"),
                      "reason": (v.get("reason") or "")[:160]}))
PY
}

workload library "CREATE TABLE loans (id bigserial PRIMARY KEY, member_id int NOT NULL, book_id int NOT NULL, due_on date NOT NULL, returned_at timestamptz);
INSERT INTO loans (member_id, book_id, due_on, returned_at) SELECT g % 9000, g % 40000, date '2026-01-01' + (g % 300), CASE WHEN g % 10 > 0 THEN now() END FROM generate_series(1, 400000) g;
VACUUM ANALYZE loans" \
'\set d random(0, 299)
SELECT count(*) FROM loans WHERE due_on = date '"'"'2026-01-01'"'"' + :d::int AND returned_at IS NULL;' 4

workload telemetry "CREATE TABLE readings (id bigserial PRIMARY KEY, device_id int NOT NULL, at timestamptz NOT NULL, value float8 NOT NULL);
INSERT INTO readings (device_id, at, value) SELECT g % 5000, now() - g * interval '1 s', random() FROM generate_series(1, 400000) g;
CREATE INDEX ON readings (device_id); VACUUM ANALYZE readings" \
'\set dev random(1, 4999)
SELECT avg(value) FROM readings WHERE device_id = :dev::numeric;' 4

workload warehouse "CREATE TABLE stock (id bigserial PRIMARY KEY, sku text NOT NULL, bin text NOT NULL, qty int NOT NULL) WITH (autovacuum_enabled = off);
CREATE INDEX ON stock (bin);
INSERT INTO stock (sku, bin, qty) SELECT 'sku' || g, 'A' || (g % 50), g % 7 FROM generate_series(1, 2000) g;
ANALYZE stock;
INSERT INTO stock (sku, bin, qty) SELECT 'sku' || g, 'Z1', 1 FROM generate_series(1, 300000) g" \
'SELECT sum(s1.qty) FROM stock s1 JOIN stock s2 USING (sku) WHERE s1.bin = '"'"'Z1'"'"' AND s2.qty > 0;' 2

workload tickets "CREATE TABLE seats (id bigserial PRIMARY KEY, section text NOT NULL, held_by int, held_at timestamptz);
INSERT INTO seats (section) SELECT 'S' || (g % 20) FROM generate_series(1, 200000) g;
VACUUM ANALYZE seats" \
'\set c random(1, 1000000)
UPDATE seats SET held_by = :c, held_at = now() WHERE id = (SELECT id FROM seats WHERE held_by IS NULL ORDER BY id LIMIT 1) RETURNING id;' 6

workload wiki "CREATE TABLE pages (id bigserial PRIMARY KEY, title text NOT NULL, body text NOT NULL, views int NOT NULL DEFAULT 0);
CREATE INDEX ON pages (views);
INSERT INTO pages (title, body) SELECT 'page ' || g, repeat(md5(g::text), 4) FROM generate_series(1, 50000) g;
VACUUM ANALYZE pages" \
'\set p random(1, 50000)
UPDATE pages SET views = views + 1 WHERE id = :p;' 4

workload payments "CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric NOT NULL);
INSERT INTO accounts SELECT g, 'owner' || g, 1000 FROM generate_series(1, 10000) g;
VACUUM ANALYZE accounts" \
'\set a random(1, 3)
UPDATE accounts SET balance = balance - 1 WHERE id = :a;' 4 \
"BEGIN; UPDATE accounts SET balance = balance + 100 WHERE id IN (1, 2, 3);"

workload ledger "CREATE TABLE entries (id bigserial PRIMARY KEY, account int NOT NULL, amount numeric NOT NULL, booked date NOT NULL);
INSERT INTO entries (account, amount, booked) SELECT g % 300, g % 1000, date '2026-01-01' + (g % 200) FROM generate_series(1, 300000) g;
CREATE INDEX ON entries (account); VACUUM ANALYZE entries;
ALTER DATABASE ledger SET jit_above_cost = 10; ALTER DATABASE ledger SET jit_inline_above_cost = 10; ALTER DATABASE ledger SET jit_optimize_above_cost = 10" \
'\set a random(0, 299)
SELECT account, sum(amount), max(booked) FROM entries WHERE account = :a GROUP BY account;' 4

workload migration "CREATE TABLE orders (id bigserial PRIMARY KEY, customer int NOT NULL, total numeric NOT NULL);
INSERT INTO orders (customer, total) SELECT g % 1000, g FROM generate_series(1, 100000) g;
VACUUM ANALYZE orders" \
'\set o random(1, 100000)
SELECT total FROM orders WHERE id = :o;' 3 \
"BEGIN; SELECT count(*) FROM orders;" "ALTER TABLE orders ADD COLUMN note text"

# The health classes: a settlement service whose two-phase coordinator
# left a transaction prepared; a CRM whose identity key nears its integer
# limit and whose table carries an index nothing reads; a chat whose
# retention purge left its indexes sparse; and, last (it changes a server
# setting), a bank's TPC-B-like load on a small max_wal_size.
workload settlement "CREATE TABLE transfers (id bigserial PRIMARY KEY, src int NOT NULL, dst int NOT NULL, cents bigint NOT NULL, state text NOT NULL);
INSERT INTO transfers (src, dst, cents, state) SELECT g % 500, (g * 7) % 500, g % 10000, 'done' FROM generate_series(1, 100000) g;
VACUUM ANALYZE transfers;
BEGIN; UPDATE transfers SET state = 'held' WHERE id = 77; PREPARE TRANSACTION 'xfer-77-node-b'" \
'\set t random(1, 100000)
UPDATE transfers SET state = '"'"'done'"'"' WHERE id = :t;' 4

workload crm "CREATE TABLE contacts (contact_no int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account int NOT NULL, email text NOT NULL, phone text, notes text);
ALTER TABLE contacts ALTER COLUMN contact_no RESTART WITH 1980000000;
CREATE INDEX contacts_phone ON contacts (phone);
INSERT INTO contacts (account, email, phone, notes) SELECT g % 2000, 'c' || g || '@example.org', '555-' || g, repeat('x', 60) FROM generate_series(1, 20000) g;
VACUUM ANALYZE contacts" \
'\set a random(1, 2000)
INSERT INTO contacts (account, email, phone, notes) VALUES (:a, '"'"'n'"'"' || :a || '"'"'@example.org'"'"', '"'"'555-0'"'"' || :a, '"'"'new'"'"');' 4

workload chat "CREATE TABLE messages (id bigserial PRIMARY KEY, room text NOT NULL, sent_at timestamptz NOT NULL, body text NOT NULL);
CREATE INDEX messages_room_sent ON messages (room, sent_at);
INSERT INTO messages (room, sent_at, body) SELECT 'room-' || (g % 800), timestamptz '2026-06-01' + g * interval '3 seconds', repeat('hi ', 20) FROM generate_series(1, 300000) g;
DELETE FROM messages WHERE id % 5 <> 0;
SELECT pg_sleep(0.6);
VACUUM ANALYZE messages" \
'\set r random(0, 799)
SELECT id, body FROM messages WHERE room = '"'"'room-'"'"' || :r AND sent_at > timestamptz '"'"'2026-06-05'"'"' ORDER BY sent_at LIMIT 20;' 4

workload bank "ALTER SYSTEM SET max_wal_size = '64MB';
SELECT pg_reload_conf();
CREATE TABLE branches (bid int PRIMARY KEY, bbalance int NOT NULL);
CREATE TABLE accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
INSERT INTO branches SELECT g, 0 FROM generate_series(1, 20) g;
INSERT INTO accounts SELECT g, 1 + g % 20, 0, '' FROM generate_series(1, 1000000) g;
VACUUM ANALYZE accounts, branches;
SELECT pg_stat_reset_shared(CASE WHEN current_setting('server_version_num')::int >= 170000 THEN 'checkpointer' ELSE 'bgwriter' END);
SELECT pg_stat_reset_shared('wal')" \
'\set aid random(1, 1000000)
\set delta random(-5000, 5000)
UPDATE accounts SET abalance = abalance + :delta WHERE aid = :aid;
UPDATE branches SET bbalance = bbalance + :delta WHERE bid = 1 + :aid % 20;' 4

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
proved = total = 0
for r in rows:
    if "error" in r:
        print(f"{r['workload']:10} no report: {r['error']}")
        continue
    print(f"{r['workload']:10} {r['rule']:22} {r['status']:10} {r['before']!s:>9} -> {r['after']!s:<9} {r['reason']}")
    if r["rule"] == "client-stall":
        continue
    total += 1
    proved += r["status"] in ("confirmed", "refuted")
print(f"\nproved (confirmed or refuted by two measured numbers): {proved} of {total} findings outside client code ({100 * proved / max(total, 1):.0f}%)")
PY
