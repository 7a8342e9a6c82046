"""What one request of the dashboard mix costs the server, measured inside its process.

The real application (``create_app``) on aiohttp's test server over a temporary SQLite file (or the
PostgreSQL at ``--postgres``), 200 scenarios with two steps stored; then requests one at a time: a
page of 20 scenarios (``GET /api/v1/scenarios?limit=20&orderBy=name``), and with ``--posts`` a create
of a two-step scenario after every third page. Each request's time in the application (middlewares,
view, service, store, encoding: ``Application._handle``) is recorded, without the HTTP parsing and
writing the bare ceiling of ``bench/api.py`` shares. ``--profile FILE`` writes a cProfile of the
timed requests (read it with ``python -m pstats FILE``).

    python bench/request_cost.py [--requests 1000] [--posts] [--profile out.prof] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import tempfile

import aiohttp
from _shared import time_applications
from aiohttp import web
from aiohttp.test_utils import TestServer

from api import BENCH_KEY, CREATE_PATH, LIST_PATH, create_body, postgres_schema, seed
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit_server import Settings, create_app
from scenariokit_server.boundary import server_options

#: how long each request spent in the application, by method (ms)
SAMPLES: dict[str, list[float]] = {}


def record_time(app: web.Application, request: web.Request, milliseconds: float) -> None:
    """Keep one request's time in the application, by method, in :data:`SAMPLES`."""
    SAMPLES.setdefault(request.method, []).append(milliseconds)


async def measure(
    database_url: str, requests: int, posts: bool, profile: str | None
) -> dict[str, list[float]]:
    """Seed, warm up, then time ``requests`` pages (and creates with ``posts``) one at a time."""
    store = await open_store(database_url, secret_key=BENCH_KEY)
    try:
        settings = Settings(database_url="sqlite://", run_scheduler=False, workers=1)
        server = TestServer(create_app(settings, services=Services(store)))
        await server.start_server(**server_options())
        try:
            url = f"http://127.0.0.1:{server.port}"
            await seed(url, 200)
            async with aiohttp.ClientSession(url) as http:
                for _ in range(50):  # warm: statements prepared, caches filled
                    async with http.get(LIST_PATH) as answer:
                        await answer.read()
                SAMPLES.clear()
                profiler = cProfile.Profile() if profile else None
                if profiler:
                    profiler.enable()
                for index in range(requests):
                    async with http.get(LIST_PATH) as answer:
                        if answer.status != 200:
                            raise SystemExit(f"GET answered {answer.status}: {await answer.text()}")
                    if posts and index % 3 == 2:
                        body = create_body(10_000 + index)
                        headers = {"Content-Type": "application/json"}
                        async with http.post(CREATE_PATH, data=body, headers=headers) as answer:
                            if answer.status != 201:
                                raise SystemExit(f"POST answered {answer.status}: {await answer.text()}")
                if profiler:
                    profiler.disable()
                    profiler.dump_stats(profile)
        finally:
            await server.close()
        return SAMPLES
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--posts", action="store_true", help="a create after every third page")
    parser.add_argument("--profile", default=None, help="write a cProfile of the timed requests here")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (default: SQLite)")
    args = parser.parse_args()
    time_applications(record_time)
    if args.postgres:
        async with postgres_schema(args.postgres) as url:
            if url is None:
                return
            samples = await measure(url, args.requests, args.posts, args.profile)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            samples = await measure(f"sqlite:///{tmp}/bench.db", args.requests, args.posts, args.profile)
    for method, times in sorted(samples.items()):
        times.sort()
        print(f"{method:4s} {len(times):5d} requests: median {statistics.median(times):.3f} ms,"
              f" p10 {times[len(times) // 10]:.3f} ms, p90 {times[len(times) * 9 // 10]:.3f} ms"
              " in the application")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
