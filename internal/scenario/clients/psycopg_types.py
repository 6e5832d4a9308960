"""Run an application's lookups through psycopg 3, binding the parameters
with the types Python values get: a Decimal is sent as numeric, a float as
double precision, a small int as int2.

psycopg 3 binds parameters on the server, so PostgreSQL receives $1 with
that type, and pg_stat_statements keeps only "$1". Against an integer or
numeric(12,2) column, a numeric or double precision parameter makes the
planner cast the column, and the column's index is not used.

The ledger table gets the types an application typically sends by mistake
(an account id read from JSON as Decimal, an amount as float); its twin
ledger_ok gets the right ones (int and Decimal).

usage: psycopg_types.py DSN CALLS
prints one line: {"psycopg": "x.y", "mean_ms": {"ledger": ..., "ledger_ok": ...}}
"""
import json
import sys
import time
from decimal import Decimal

import psycopg


def main(dsn: str, calls: int) -> None:
    took = {"ledger": 0.0, "ledger_ok": 0.0}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(calls):
            for table, account, amount in (
                ("ledger", Decimal(4711 + i), 12.5 + i),
                ("ledger_ok", 4711 + i, Decimal("12.50") + i),
            ):
                start = time.perf_counter()
                conn.execute(f"SELECT count(*) FROM {table} WHERE account_id = %s", (account,)).fetchall()
                conn.execute(f"SELECT id, amount FROM {table} WHERE amount = %s", (amount,)).fetchall()
                took[table] += time.perf_counter() - start
    print(json.dumps({"psycopg": psycopg.__version__,
                      "mean_ms": {t: round(v * 1000 / calls / 2, 2) for t, v in took.items()}}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
