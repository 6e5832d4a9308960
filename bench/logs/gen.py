#!/usr/bin/env python3
"""Write a realistic PostgreSQL stderr log (log_line_prefix '%m [%p] %q%u@%d ')
of about MB megabytes: statement durations with varied literals and
multi-line SQL, connections, errors, lock waits, checkpoints with their
completion lines, autovacuum and autoanalyze runs, temporary files, and
auto_explain plans in text (with a JIT block) and JSON.

usage: gen.py MB > postgresql.log
"""
import random
import sys
from datetime import datetime, timedelta

random.seed(42)
target = int(float(sys.argv[1]) * 1024 * 1024)
t = datetime(2026, 11, 1, 0, 0, 0)
out = sys.stdout
written = 0

QUERIES = [
    "SELECT id, email, name FROM users WHERE id = {n}",
    "SELECT * FROM orders WHERE customer_id = {n} AND created_at > now() - interval '{d} days' ORDER BY created_at DESC LIMIT 20",
    "UPDATE accounts SET balance = balance - {n}.50 WHERE id = {m}",
    "INSERT INTO events (kind, payload, created_at) VALUES ('click', '{{\"page\": {n}}}', now())",
    "SELECT count(*) FROM jobs WHERE status = 'queued' AND run_at < now() - interval '5 minutes'",
    "SELECT p.id, p.title, u.name\n\tFROM posts p\n\tJOIN users u ON u.id = p.user_id\n\tWHERE p.published AND u.id IN ({n}, {m}, {k})\n\tORDER BY p.id DESC",
    "DELETE FROM sessions WHERE expires_at < now() - interval '{d} hours'",
    "SELECT sum(total) FROM orders WHERE customer_id = {n}",
]
PLAN_JSON = """duration: {ms} ms  plan:
\t{{
\t  "Query Text": "SELECT sum(total) FROM orders WHERE customer_id = {n}",
\t  "Plan": {{
\t    "Node Type": "Aggregate",
\t    "Strategy": "Plain",
\t    "Startup Cost": 4185.01,
\t    "Total Cost": 4185.02,
\t    "Plan Rows": 1,
\t    "Plan Width": 32,
\t    "Actual Startup Time": {ms},
\t    "Actual Total Time": {ms},
\t    "Actual Rows": 1,
\t    "Actual Loops": 1,
\t    "Plans": [
\t      {{
\t        "Node Type": "Seq Scan",
\t        "Parent Relationship": "Outer",
\t        "Relation Name": "orders",
\t        "Alias": "orders",
\t        "Startup Cost": 0.00,
\t        "Total Cost": 4185.00,
\t        "Plan Rows": 40,
\t        "Plan Width": 5,
\t        "Actual Startup Time": 0.02,
\t        "Actual Total Time": {ms},
\t        "Actual Rows": 40,
\t        "Actual Loops": 1,
\t        "Filter": "((customer_id)::numeric = '{n}'::numeric)",
\t        "Rows Removed by Filter": 199960
\t      }}
\t    ]
\t  }}
\t}}"""

PLAN_TEXT = """duration: {ms} ms  plan:
\tQuery Text: SELECT count(*) FROM jobs WHERE status = 'queued' AND run_at < now() - interval '{d} minutes'
\tAggregate  (cost=4185.01..4185.02 rows=1 width=8) (actual time={ms}..{ms} rows=1 loops=1)
\t  ->  Seq Scan on jobs  (cost=0.00..4185.00 rows=40 width=0) (actual time=0.020..{ms} rows=40 loops=1)
\t        Filter: ((status = 'queued'::text) AND (run_at < (now() - '{d} minutes'::interval)))
\t        Rows Removed by Filter: 199960
\tJIT:
\t  Functions: 4
\t  Options: Inlining false, Optimization false, Expressions true, Deforming true
\t  Timing: Generation 0.512 ms, Inlining 0.000 ms, Optimization 0.301 ms, Emission 5.122 ms, Total 5.935 ms"""

AUTOVACUUM = """automatic vacuum of table "shop.public.{t}": index scans: 1
\tpages: 0 removed, {p} remain, {p} scanned (100.00% of total)
\ttuples: {r} removed, {n} remain, {k} are dead but not yet removable
\tremovable cutoff: 123456, which was 42 XIDs old when operation ended
\tindex scan needed: 120 pages from table (1.20% of total) had {r} dead item identifiers removed
\tavg read rate: 0.000 MB/s, avg write rate: 1.234 MB/s
\tbuffer usage: {p} hits, 0 misses, 12 dirtied
\tWAL usage: 300 records, 12 full page images, 98765 bytes
\tsystem usage: CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.05 s"""


def line(pid, user, db, level, msg):
    global written, t
    t += timedelta(microseconds=random.randint(200, 3000))
    s = "%s.%03d UTC [%d] %s@%s %s:  %s\n" % (t.strftime("%Y-%m-%d %H:%M:%S"), t.microsecond // 1000, pid, user, db, level, msg)
    out.write(s)
    written += len(s)


while written < target:
    pid = random.randint(1000, 1200)
    r = random.random()
    if r < 0.80:
        q = random.choice(QUERIES).format(n=random.randint(1, 100000), m=random.randint(1, 1000), k=random.randint(1, 50), d=random.randint(1, 30))
        ms = "%.3f" % random.expovariate(1 / 5.0)
        line(pid, "app", "shop", "LOG", "duration: %s ms  statement: %s" % (ms, q))
    elif r < 0.88:
        line(pid, "[unknown]", "[unknown]", "LOG", "connection received: host=10.0.%d.%d port=%d" % (random.randint(0, 9), random.randint(1, 250), random.randint(30000, 60000)))
        line(pid, "app", "shop", "LOG", "connection authorized: user=app database=shop application_name=web")
    elif r < 0.92:
        line(pid, "app", "shop", "LOG", "disconnection: session time: 0:00:0%d.%03d user=app database=shop host=10.0.0.1 port=40000" % (random.randint(0, 9), random.randint(0, 999)))
    elif r < 0.95:
        line(pid, "app", "shop", "ERROR", random.choice(["duplicate key value violates unique constraint \"users_email_key\"", "canceling statement due to statement timeout", "deadlock detected"]))
        line(pid, "app", "shop", "DETAIL", "Key (email)=(user%d@example.com) already exists." % random.randint(1, 9999))
        line(pid, "app", "shop", "STATEMENT", "INSERT INTO users (email) VALUES ('user%d@example.com')" % random.randint(1, 9999))
    elif r < 0.97:
        line(pid, "app", "shop", "LOG", "process %d still waiting for ShareLock on transaction %d after 1000.%03d ms" % (pid, random.randint(1000, 99999), random.randint(0, 999)))
        line(pid, "app", "shop", "DETAIL", "Process holding the lock: %d. Wait queue: %d." % (random.randint(1000, 1200), pid))
    elif r < 0.978:
        line(pid, "app", "shop", "LOG", PLAN_JSON.format(ms="%.3f" % random.uniform(20, 80), n=random.randint(1, 100000)))
    elif r < 0.985:
        line(pid, "app", "shop", "LOG", PLAN_TEXT.format(ms="%.3f" % random.uniform(20, 80), d=random.randint(1, 60)))
    elif r < 0.99:
        line(pid, "app", "shop", "LOG", "temporary file: path \"base/pgsql_tmp/pgsql_tmp%d.%d\", size %d" % (pid, random.randint(0, 9), random.randint(100000, 10000000)))
    elif r < 0.995:
        table = random.choice(["jobs", "orders", "events", "sessions"])
        line(pid, "", "", "LOG", AUTOVACUUM.format(t=table, p=random.randint(100, 9000), r=random.randint(0, 50000), n=random.randint(10000, 900000), k=random.randint(0, 2000)))
        line(pid, "", "", "LOG", "automatic analyze of table \"shop.public.%s\"\n\tavg read rate: 0.000 MB/s, avg write rate: 0.000 MB/s\n\tsystem usage: CPU: user: 0.02 s, system: 0.00 s, elapsed: 0.03 s" % table)
    else:
        line(1099, "", "", "LOG", "checkpoint starting: %s" % random.choice(["time", "wal"]))
        line(1099, "", "", "LOG", "checkpoint complete: wrote %d buffers (%.1f%%); 0 WAL file(s) added, 0 removed, 3 recycled; write=26.9 s, sync=0.01 s, total=27.0 s; sync files=40, longest=0.003 s, average=0.001 s; distance=%d kB, estimate=%d kB"
             % (random.randint(1000, 20000), random.uniform(1, 20), random.randint(100000, 900000), 900000))
