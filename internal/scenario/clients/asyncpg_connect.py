"""Open fresh asyncpg connections, each running one query that needs a
type asyncpg has no built-in codec for, as a web worker does on start-up.

asyncpg introspects unknown types with its typeinfo_tree catalog query on
every new connection (the cache is per connection). Under PostgreSQL's
default JIT settings that query is compiled by LLVM each time.

usage: asyncpg_connect.py DSN CONNECTIONS
prints one line: {"connections": N, "first_query_ms": [...], "asyncpg": "x.y"}
"""
import asyncio
import json
import sys
import time

import asyncpg


async def worker(dsn: str, n: int, timings: list) -> None:
    for _ in range(n):
        conn = await asyncpg.connect(dsn)
        try:
            start = time.perf_counter()
            rows = await conn.fetch("select $1::int[]", [1, 2, 3])
            timings.append(round((time.perf_counter() - start) * 1000, 2))
            if rows[0][0] != [1, 2, 3]:
                raise SystemExit("unexpected result %r" % (rows,))
        finally:
            await conn.close()


async def main(dsn: str, n: int) -> None:
    # Two web workers start at once, as a deployment starts them, each
    # opening its share of the connections one after another.
    timings = []
    await asyncio.gather(worker(dsn, (n + 1) // 2, timings), worker(dsn, n // 2, timings))
    print(json.dumps({"connections": n, "first_query_ms": timings, "asyncpg": asyncpg.__version__}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
