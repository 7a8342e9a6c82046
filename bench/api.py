"""The API at dashboard load: mixed list and create traffic against the real server and a bare ceiling.

One aiohttp client with 32 concurrent connections sends ``--requests`` requests (default 3,000): 75%
``GET /api/v1/scenarios?limit=20&orderBy=name``, 25% ``POST /api/v1/scenarios`` with two steps. The
same client, in the same run, loads

- (a) a bare aiohttp handler in its own process answering a prepared page of the same shape: the
  ceiling, what the client and the loopback can do on this machine;
- (b) ``scenariokit serve`` on a temporary SQLite file;
- (c) ``scenariokit serve`` on PostgreSQL (a schema of its own, dropped afterwards), skipped with a
  note when the server at ``--postgres`` does not answer;
- (d) the same with ``--processes 2`` (``--processes N``; 1 leaves it out).

Both servers run without the scheduler (``SCENARIOKIT_RUN_SCHEDULER=false``): the pure API figure.
About 200 scenarios are stored first. Each line gives requests/s, p50, p99, errors and the ratio to
the ceiling; then the sequential time of one page of 20 scenarios (one connection, the median round
trip), less the ceiling's round trip: the server's own time for that page; and the CPU the server
process spent per page meanwhile (from /proc), beside the ceiling's: on a machine other work shares,
the round trip stretches with the load and the CPU a page costs does not.

    python bench/api.py [--requests 3000] [--short] [--postgres URL | --no-postgres] [--processes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from _shared import free_port, scenariokit_serve, wait_healthy

API = "/api/v1"
LIST_PATH = f"{API}/scenarios?limit=20&orderBy=name"
CREATE_PATH = f"{API}/scenarios"
CONNECTIONS = 32
SEEDED = 200
SEQUENTIAL = 300
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGET_RPS = 1500.0
TARGET_P99_MS = 100.0
TARGET_PAGE_MS = 1.0
JSON_HEADERS = {"Content-Type": "application/json"}
#: The secret key of the PostgreSQL run (a shared database needs one; nothing secret is stored).
BENCH_KEY = "bench-api-only-key-not-for-real-secrets"


def create_body(index: int) -> bytes:
    """A scenario with two steps, as the POST body."""
    steps = [
        {"execCode": "await page.goto(helpers.getEnvUrl())"},
        {"execCode": "await expect(page.locator('h1')).to_have_text('Hello')"},
    ]
    return json.dumps({"name": f"load {index:05d}", "description": "bench", "steps": steps}).encode()


# --- the ceiling ----------------------------------------------------------------------------------


def _prepared_page() -> bytes:
    """A page of 20 scenarios with two steps each, shaped as the real one, encoded once."""
    now = "2026-01-01T00:00:00.000000Z"
    items = []
    codes = ("await page.goto(helpers.getEnvUrl())", "await expect(page.locator('h1')).to_have_text('Hi')")
    for index in range(20):
        ident = str(uuid.uuid4())
        steps = [
            {"id": str(uuid.uuid4()), "scenarioId": ident, "execCode": code, "position": pos,
             "createdAt": now, "updatedAt": now}
            for pos, code in enumerate(codes)
        ]  # fmt: skip
        items.append({"id": ident, "name": f"bench {index:03d}", "description": "seeded", "tags": [],
                      "steps": steps, "credentials": [], "createdAt": now, "updatedAt": now})  # fmt: skip
    return json.dumps({"items": items, "total": SEEDED, "page": 1, "limit": 20}).encode()


def serve_ceiling(port: int) -> None:
    """The bare aiohttp server (run in a child process): GET answers the prepared page, POST one item."""
    from aiohttp import web

    page = _prepared_page()
    one = json.dumps(json.loads(page)["items"][0]).encode()

    async def list_page(_: web.Request) -> web.Response:
        return web.Response(body=page, content_type="application/json")

    async def create(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=one, status=201, content_type="application/json")

    app = web.Application()
    app.router.add_get(f"{API}/scenarios", list_page)
    app.router.add_post(f"{API}/scenarios", create)
    app.router.add_get("/health", lambda _: web.json_response({"status": "ok"}))
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


@contextlib.asynccontextmanager
async def ceiling() -> AsyncIterator[tuple[str, int]]:
    """The ceiling server in its own process: its URL and its pid."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(sys.executable, __file__, "--ceiling-port", str(port))
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(url, process)
        yield url, process.pid
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


# --- the load -------------------------------------------------------------------------------------


@dataclass
class Result:
    """What one load run measured."""

    label: str
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    post_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    page_ms: float | None = None
    page_cpu_ms: float | None = None

    @property
    def rps(self) -> float:
        return (len(self.latencies_ms) + self.errors) / self.seconds if self.seconds else 0.0

    def quantile(self, q: float, posts: bool = False) -> float:
        ordered = sorted(self.post_ms if posts else self.latencies_ms)
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else 0.0


async def load(
    url: str, label: str, requests: int, *, stop: asyncio.Event | None = None, connections: int = CONNECTIONS
) -> Result:
    """``requests`` mixed requests over 32 connections; every non-2xx answer or failure is an error.

    With ``stop``, requests go on (``requests`` is ignored) until the event is set.
    """
    result = Result(label)
    counter = itertools.count() if stop is not None else iter(range(requests))
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(url, connector=connector) as http:

        async def one(index: int) -> None:
            expected = 201 if index % 4 == 3 else 200
            began = time.perf_counter()
            try:
                if expected == 201:
                    answer = await http.post(CREATE_PATH, data=create_body(index), headers=JSON_HEADERS)
                else:
                    answer = await http.get(LIST_PATH)
                async with answer:
                    await answer.read()
                    ok = answer.status == expected
                    kind = str(answer.status)
            except (aiohttp.ClientError, OSError) as exc:
                ok, kind = False, type(exc).__name__
            if ok:
                result.latencies_ms.append((time.perf_counter() - began) * 1000)
                if expected == 201:
                    result.post_ms.append(result.latencies_ms[-1])
            else:
                result.errors += 1
                result.error_kinds[kind] = result.error_kinds.get(kind, 0) + 1

        async def client() -> None:
            for index in counter:
                if stop is not None and stop.is_set():
                    return
                await one(index)

        # warm up: every connection opened, the server's first-request paths taken
        warm = [http.get(LIST_PATH) for _ in range(connections)]
        for answer in await asyncio.gather(*warm):
            async with answer:
                await answer.read()
        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(connections)))
        result.seconds = time.perf_counter() - began
    return result


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system, from /proc) of a server process and its live children: with
    ``--processes N`` the first process started the others, and a connection lands on any of them.
    """
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):  # the process, or its child
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def sequential_page_ms(url: str, count: int, pid: int) -> tuple[float, float]:
    """One page of 20 scenarios at a time on one connection: the median round trip, and the CPU the
    server process ``pid`` spent per page (from /proc: unlike the round trip, not stretched by other
    work on the machine). Both in ms.
    """
    connector = aiohttp.TCPConnector(limit=1)
    samples = []
    async with aiohttp.ClientSession(url, connector=connector) as http:
        for index in range(count + 20):
            if index == 20:
                cpu_began = cpu_seconds(pid)
            began = time.perf_counter()
            async with http.get(LIST_PATH) as answer:
                await answer.read()
                if answer.status != 200:
                    raise SystemExit(f"GET {LIST_PATH} answered {answer.status}")
            if index >= 20:
                samples.append((time.perf_counter() - began) * 1000)
        cpu_ms = (cpu_seconds(pid) - cpu_began) * 1000 / count
    return statistics.median(samples), cpu_ms


async def seed(url: str, count: int) -> None:
    """``count`` scenarios named ``bench NNN`` (they sort before the load's ``load NNNNN``)."""
    connector = aiohttp.TCPConnector(limit=8)
    async with aiohttp.ClientSession(url, connector=connector) as http:

        async def make(index: int) -> None:
            body = json.loads(create_body(index))
            body["name"] = f"bench {index:03d}"
            async with http.post(CREATE_PATH, json=body) as answer:
                if answer.status != 201:
                    raise SystemExit(f"seeding: POST answered {answer.status}: {await answer.text()}")

        for start in range(0, count, 8):
            await asyncio.gather(*(make(i) for i in range(start, min(count, start + 8))))


async def measure_server(url: str, label: str, requests: int, sequential: int, pid: int) -> Result:
    """Seed, then the load, then the sequential page (``pid``: the server process whose CPU is read)."""
    await seed(url, SEEDED)
    result = await load(url, label, requests)
    result.page_ms, result.page_cpu_ms = await sequential_page_ms(url, sequential, pid)
    return result


@contextlib.asynccontextmanager
async def postgres_schema(base: str) -> AsyncIterator[str | None]:
    """A fresh schema's URL on the PostgreSQL at ``base`` (None when it does not answer), then dropped."""
    from scenariokit.storage.sqlalchemy.store import SqlStore, unique_schema

    url = f"{base}?schema={unique_schema('bench_api')}"
    store = SqlStore(url, secret_key=BENCH_KEY)
    try:
        await store.ping()
    except Exception as exc:  # any failure to connect means: no PostgreSQL here
        print(f"PostgreSQL at {base} does not answer ({type(exc).__name__}): skipped")
        await store.close()
        yield None
        return
    try:
        yield url
    finally:
        await store.drop_schema()
        await store.close()


def report(results: list[Result], ceiling_page_ms: float, ceiling_cpu_ms: float) -> None:
    """The table, the ratios to the ceiling and the targets."""
    top = results[0]
    print(f"{'server':34s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>7s} {'ceiling':>8s}"
          f" {'POST p99':>9s}")  # fmt: skip
    for r in results:
        ratio = r.rps / top.rps if top.rps else 0.0
        errors = f"{r.errors}" + (f" {r.error_kinds}" if r.error_kinds else "")
        p50, p99 = r.quantile(0.5), r.quantile(0.99)
        posts = r.quantile(0.99, posts=True)
        print(f"{r.label:34s} {r.rps:8.0f} {p50:8.1f} {p99:8.1f} {errors:>7s} {ratio:7.0%} {posts:9.1f}")
    print(f"one page of 20 scenarios, sequential round trip (median): ceiling {ceiling_page_ms:.2f} ms,"
          f" the ceiling's CPU {ceiling_cpu_ms:.2f} ms a page")  # fmt: skip
    for r in results[1:]:
        assert r.page_ms is not None and r.page_cpu_ms is not None
        server = max(0.0, r.page_ms - ceiling_page_ms)
        met = "met" if server <= TARGET_PAGE_MS else "NOT met"
        print(f"  {r.label:32s} {r.page_ms:.2f} ms, server time ≈ {server:.2f} ms", end=" ")
        print(f"(target ≤ {TARGET_PAGE_MS} ms: {met}); server CPU {r.page_cpu_ms:.2f} ms a page,", end=" ")
        print(f"{max(0.0, r.page_cpu_ms - ceiling_cpu_ms):.2f} ms beyond the ceiling's")
    for r in results[1:3]:
        fast = r.rps >= TARGET_RPS and r.quantile(0.99) <= TARGET_P99_MS
        met = "met" if fast and not r.errors else "NOT met"
        print(f"target ≥ {TARGET_RPS:.0f} req/s, p99 ≤ {TARGET_P99_MS:.0f} ms, 0 errors — {r.label}: {met}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--short", action="store_true", help="600 requests, 100 sequential pages")
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL", DEFAULT_POSTGRES))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--processes", type=int, default=2, help="server processes of the last line (1: none)"
    )
    args = parser.parse_args()
    requests = 600 if args.short and args.requests == 3000 else args.requests
    sequential = 100 if args.short else SEQUENTIAL
    print(f"{requests} requests, {CONNECTIONS} connections: 75% GET {LIST_PATH}, 25% POST {CREATE_PATH}")
    results = []
    async with ceiling() as (url, pid):
        results.append(await load(url, "bare aiohttp (ceiling)", requests))
        ceiling_page_ms, ceiling_cpu_ms = await sequential_page_ms(url, sequential, pid)
    api_only = {"SCENARIOKIT_RUN_SCHEDULER": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit_serve(Path(tmp), settle=0.5, env_extra=api_only) as served:
            label = "scenariokit serve, SQLite"
            results.append(await measure_server(served.url, label, requests, sequential, served.pid))
    if not args.no_postgres:
        async with postgres_schema(args.postgres) as database_url:
            if database_url is not None:
                env = {**api_only, "SCENARIOKIT_DATABASE_URL": database_url}
                env["SCENARIOKIT_SECRET_KEY"] = BENCH_KEY
                with tempfile.TemporaryDirectory() as tmp:
                    async with scenariokit_serve(Path(tmp), settle=0.5, env_extra=env) as served:
                        label = "scenariokit serve, PostgreSQL"
                        results.append(
                            await measure_server(served.url, label, requests, sequential, served.pid)
                        )
        async with postgres_schema(args.postgres) as database_url:
            if database_url is not None and args.processes > 1:
                env = {**api_only, "SCENARIOKIT_DATABASE_URL": database_url}
                env["SCENARIOKIT_SECRET_KEY"] = BENCH_KEY
                processes = ("--processes", str(args.processes))
                with tempfile.TemporaryDirectory() as tmp:
                    async with scenariokit_serve(Path(tmp), *processes, settle=5, env_extra=env) as served:
                        label = f"serve --processes {args.processes}, PostgreSQL"
                        results.append(
                            await measure_server(served.url, label, requests, sequential, served.pid)
                        )
    report(results, ceiling_page_ms, ceiling_cpu_ms)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ceiling-port"]:  # the child process of ceiling()
        serve_ceiling(int(sys.argv[2]))
    else:
        asyncio.run(main())
