"""A CI service's database, as its Python application uses it through psycopg 3.

A web worker records build steps (a job's steps, twenty rows a statement) and
two dashboard sessions read the newest 5,000. A data migration backfills the steps'
duration column. Written as an ORM's migration is by default, it runs in one
transaction and wraps each row in a nested transaction block (psycopg's
nested conn.transaction(), as Django's atomic() or SQLAlchemy's
begin_nested()), so that a failing row can be skipped: a SAVEPOINT per row.
Its fixed form commits batches of rows, each in a transaction of its own,
with no savepoint. Runs until it is killed.

Usage: psycopg_savepoints.py DSN nested|batched
"""
import sys
import threading
import time

import psycopg

dsn, mode = sys.argv[1], sys.argv[2]
stop = threading.Event()


def web_writer():
    with psycopg.connect(dsn, autocommit=True, application_name="ci-web") as c:
        while not stop.is_set():
            c.execute(
                "INSERT INTO job_steps (job_id, step, status, log_bytes) "
                "SELECT j, s, 'queued', 0 FROM (SELECT (random() * 1e6)::int AS j) job, generate_series(1, 20) s")
            time.sleep(0.005)


def dashboard():
    with psycopg.connect(dsn, autocommit=True, application_name="ci-dashboard") as c:
        while not stop.is_set():
            c.execute(
                "SELECT status, count(*), sum(log_bytes) FROM job_steps "
                "WHERE id > (SELECT max(id) FROM job_steps) - 5000 GROUP BY status").fetchall()
            time.sleep(0.05)  # a dashboard refreshes; the lab shares its cores


def migration():
    with psycopg.connect(dsn, application_name="backfill-durations") as c:
        ids = [r[0] for r in c.execute("SELECT id FROM job_steps WHERE duration_ms IS NULL ORDER BY id LIMIT 40000")]
        c.commit()
        if mode == "nested":
            with c.transaction():
                for i in ids:
                    if stop.is_set():
                        break
                    with c.transaction():  # a SAVEPOINT per row
                        c.execute("UPDATE job_steps SET duration_ms = log_bytes / 10 WHERE id = %s", (i,))
                    time.sleep(0.001)
        else:
            for n in range(0, len(ids), 500):
                if stop.is_set():
                    break
                with c.transaction():
                    c.execute("UPDATE job_steps SET duration_ms = log_bytes / 10 WHERE id = ANY(%s)", (ids[n:n + 500],))
                time.sleep(0.2)
        while not stop.is_set():
            time.sleep(0.05)


failed = []


def guarded(f):
    def run():
        try:
            f()
        except Exception as e:  # the Go side reports it and fails the scenario
            failed.append(f"{f.__name__}: {e}")
    return run


threads = [threading.Thread(target=guarded(f), daemon=True) for f in [web_writer, dashboard, dashboard, migration]]
for t in threads:
    t.start()
while not failed:
    time.sleep(0.1)
print(failed[0], file=sys.stderr)
sys.exit(1)
