"""The instructions the whole server spends on a page of 20 scenarios and on a create, counted.

``scenariokit serve`` (the scheduler off) runs under valgrind's callgrind, on a temporary SQLite file
and on PostgreSQL (a schema of its own, dropped afterwards; skipped with a note when the server at
``--postgres`` does not answer). Counting is off while it starts, is seeded with 200 scenarios of two
steps and is warmed; then it counts ``--requests`` pages (``GET /api/v1/scenarios?limit=20&orderBy=name``,
one at a time), and as many creates of a scenario with two steps. Each line gives the instructions
a page and a create cost the server's process: HTTP, the access log, the view, the store, its driver
(PostgreSQL's own work is in its processes, not counted).

A count, not a time: the same on a machine whose speed drifts, whatever else it runs, so two versions
compare from runs apart. ``--against TREE`` counts the code at ``TREE`` too (``git worktree add
/tmp/old COMMIT``) and prints each figure's ratio. Instructions are not cycles (a cache miss costs
none): ``bench/api.py`` and ``bench/request_cost.py`` give the times.

    python bench/request_count.py [--requests 200] [--postgres URL | --no-postgres] [--against TREE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from _shared import (
    CALLGRIND_ENV,
    CALLGRIND_START,
    callgrind_installed,
    count_instructions,
    scenariokit_serve,
    tree_environment,
    under_callgrind,
)

from api import (
    BENCH_KEY,
    CREATE_PATH,
    DEFAULT_POSTGRES,
    JSON_HEADERS,
    LIST_PATH,
    SEEDED,
    create_body,
    postgres_schema,
    seed,
)

#: Requests before counting: statements prepared, caches filled.
WARM = 40


@contextlib.asynccontextmanager
async def database(store: str, postgres: str | None) -> AsyncIterator[dict[str, str] | None]:
    """The server's settings for ``store`` (None: PostgreSQL does not answer)."""
    if store == "SQLite":
        yield {}
        return
    assert postgres is not None
    async with postgres_schema(postgres) as url:
        yield None if url is None else {"SCENARIOKIT_DATABASE_URL": url, "SCENARIOKIT_SECRET_KEY": BENCH_KEY}


async def count(store_env: dict[str, str], code_env: dict[str, str], requests: int) -> tuple[float, float]:
    """Instructions a page and a create cost one server (``code_env``: whose code it runs)."""
    env = {"SCENARIOKIT_RUN_SCHEDULER": "false", **CALLGRIND_ENV, **store_env, **code_env}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command = under_callgrind(folder, str(Path(sys.executable).parent / "scenariokit"), "serve")
        served = scenariokit_serve(
            folder, settle=0, env_extra=env, command=command, healthy_within=CALLGRIND_START
        )
        async with served as server, aiohttp.ClientSession(server.url) as http:
            await seed(server.url, SEEDED)

            async def pages(number: int) -> None:
                for _ in range(number):
                    async with http.get(LIST_PATH) as answer:
                        await answer.read()
                        if answer.status != 200:
                            raise SystemExit(f"a page answered {answer.status}: {await answer.text()}")

            async def creates(first: int, number: int) -> None:
                for index in range(first, first + number):
                    body = create_body(index)
                    async with http.post(CREATE_PATH, data=body, headers=JSON_HEADERS) as answer:
                        await answer.read()
                        if answer.status != 201:
                            raise SystemExit(f"a create answered {answer.status}: {await answer.text()}")

            await pages(WARM)
            await creates(10_000, WARM)
            page = await count_instructions(server.pid, folder, lambda: pages(requests))
            create = await count_instructions(server.pid, folder, lambda: creates(20_000, requests))
    return page / requests, create / requests


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="pages counted, and as many creates")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="the PostgreSQL to count against")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--against", type=Path, help="a checkout whose code is counted too")
    args = parser.parse_args()
    if not callgrind_installed():
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    postgres = None if args.no_postgres else args.postgres
    codes = {"this checkout": {}}
    if args.against is not None:
        codes[str(args.against)] = {"PYTHONPATH": tree_environment(args.against.resolve())["PYTHONPATH"]}
    print(f"{args.requests} pages of 20 scenarios and {args.requests} creates of two steps, one at a time,"
          f" {SEEDED} scenarios stored; instructions of the server's process (callgrind):")  # fmt: skip
    for store in ["SQLite"] + ([] if postgres is None else ["PostgreSQL"]):
        counted: dict[str, tuple[float, float]] = {}
        for label, code_env in codes.items():
            async with database(store, postgres) as store_env:
                if store_env is None:
                    break
                counted[label] = await count(store_env, code_env, args.requests)
            page, create = counted[label]
            print(f"  {store}, {label}: a page {page / 1e6:.3f} M, a create {create / 1e6:.3f} M")
        if args.against is not None and len(counted) == 2:
            (page, create), (old_page, old_create) = counted.values()
            print(f"  {store}, this checkout against {args.against}: a page {page / old_page:.3f}x,"
                  f" a create {create / old_create:.3f}x")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
