#!/usr/bin/env python3
"""Write a realistic PostgreSQL stderr log (log_line_prefix '%m [%p] %q%u@%d ')
of about MB megabytes: statement durations with varied literals and
multi-line SQL, connections, errors, lock waits, checkpoints, temporary
files, and auto_explain plans in text and JSON.

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
    elif r < 0.985:
        line(pid, "app", "shop", "LOG", PLAN_JSON.format(ms="%.3f" % random.uniform(20, 80), n=random.randint(1, 100000)))
    elif r < 0.99:
        line(pid, "app", "shop", "LOG", "temporary file: path \"base/pgsql_tmp/pgsql_tmp%d.%d\", size %d" % (pid, random.randint(0, 9), random.randint(100000, 10000000)))
    else:
        line(pid, "", "", "LOG", "checkpoint starting: %s" % random.choice(["time", "wal"]))
