"""The API at dashboard load: mixed list and create traffic against the real server and a bare ceiling.

One aiohttp client with 32 concurrent connections sends ``--requests`` requests (default 3,000): 75%
``GET /api/v1/scenarios?limit=20&orderBy=name``, 25% ``POST /api/v1/scenarios`` with two steps. The
same client, in the same run, loads

- (a) a bare aiohttp handler in its own process answering a prepared page of the same shape: the
  ceiling, what the client and the loopback can do on this machine;
- (b) ``scenariokit serve`` on a temporary SQLite file;
- (c) ``scenariokit serve`` on PostgreSQL (a schema of its own, dropped afterwards), skipped with a
  note when the server at ``--postgres`` does not answer;
- (d) the same with ``--processes 2`` (``--processes N``; 1 leaves it out);
- (e) the team-operations comparison on SQLite: ``scenariokit serve`` with a scoped token required on
  every request, ``/metrics``' request timing and the audit log (what a team deployment runs), beside
  the same server with the three taken out (``--serve-without-ops``: the scope check, the metrics
  middleware and the audit entries replaced by nothing, in this file's child process only; the
  product has no switch for them), both up at once and sent their one-at-a-time requests in turn, so
  that their CPU a request is read over the same stretch of the machine's speed. ``--no-ops`` leaves
  it out.

``--against TREE`` measures instead this checkout's code and the one at ``TREE`` (an older release,
say: ``git worktree add /tmp/old 7068aa4``) in turn, ``--pairs`` times on each database (one
process), the order swapped every pair: on a machine whose speed drifts between runs minutes apart,
only figures taken side by side compare. Each line gives the load's requests/s, p99 and the
database's CPU (PostgreSQL's processes, from /proc) for that server's seeding and load; then the
median of each and their ratio.

Both servers run without the scheduler (``SCENARIOKIT_RUN_SCHEDULER=false``): the pure API figure.
About 200 scenarios are stored first. Each line gives requests/s, p50, p99, errors and the ratio to
the ceiling; then, one request at a time on one connection, the CPU the server process spent per
page of 20 scenarios and per create (from /proc: on a machine other work shares, the round trip
stretches with the load and the CPU a request costs much less), and the page's median round trip
less the ceiling's. Every figure with a target is printed with it and whether it is met: ≥ 1,000
requests/s with a p99 ≤ 100 ms under the mix, ≤ 1 ms of server CPU a page, ≤ 5% more server CPU a
request for the team operations.

    python bench/api.py [--requests 3000] [--short] [--postgres URL | --no-postgres] [--processes 2]
                        [--no-ops] [--against TREE [--pairs 3]]
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
from typing import Any

import aiohttp
from _shared import free_port, proc_stats, process_seconds, scenariokit_serve, tree_environment, wait_healthy

API = "/api/v1"
LIST_PATH = f"{API}/scenarios?limit=20&orderBy=name"
CREATE_PATH = f"{API}/scenarios"
CONNECTIONS = 32
SEEDED = 200
SEQUENTIAL = 300
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
TARGET_RPS = 1000.0
TARGET_P99_MS = 100.0
#: server CPU of one page of 20 scenarios, its HTTP included (ms)
TARGET_PAGE_CPU_MS = 1.0
#: what scoped tokens, /metrics' request timing and the audit log may add to a request's server CPU
TARGET_OPS_SHARE = 0.05
#: the share of creates in the mix
CREATE_SHARE = 0.25
JSON_HEADERS = {"Content-Type": "application/json"}
#: The secret key of the PostgreSQL run (a shared database needs one; nothing secret is stored).
BENCH_KEY = "bench-api-only-key-not-for-real-secrets"
#: This file, as its child processes are started (the ceiling, the server without team operations).
THIS_FILE = str(Path(__file__).resolve())
#: The token of the team-operations server: named, scoped ``write`` (it lists and creates).
OPS_TOKEN = "bench-api-writer-token-0123456789"
OPS_TOKENS = f"bench:write:{OPS_TOKEN}"


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
    create_cpu_ms: float | None = None

    @property
    def rps(self) -> float:
        return (len(self.latencies_ms) + self.errors) / self.seconds if self.seconds else 0.0

    @property
    def mix_cpu_ms(self) -> float | None:
        """Server CPU per request of the mix (75% pages, 25% creates), from the sequential figures."""
        if self.page_cpu_ms is None or self.create_cpu_ms is None:
            return None
        return (1 - CREATE_SHARE) * self.page_cpu_ms + CREATE_SHARE * self.create_cpu_ms

    def quantile(self, q: float, posts: bool = False) -> float:
        ordered = sorted(self.post_ms if posts else self.latencies_ms)
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else 0.0


async def load(
    url: str,
    label: str,
    requests: int,
    *,
    stop: asyncio.Event | None = None,
    connections: int = CONNECTIONS,
    headers: dict[str, str] | None = None,
) -> Result:
    """``requests`` mixed requests over 32 connections; every non-2xx answer or failure is an error.

    With ``stop``, requests go on (``requests`` is ignored) until the event is set. ``headers`` go
    with every request (a token).
    """
    result = Result(label)
    counter = itertools.count() if stop is not None else iter(range(requests))
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(url, connector=connector, headers=headers) as http:

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
    """CPU seconds (user and system, to the nanosecond: :func:`process_seconds`) of a server process
    and its live children: with ``--processes N`` the first process started the others, and a
    connection lands on any of them.
    """
    total = 0.0
    for stat in proc_stats():
        if pid in (stat.pid, stat.ppid):
            with contextlib.suppress(OSError):  # gone meanwhile
                total += process_seconds(stat.pid)
    return total


@dataclass(frozen=True)
class Served:
    """A server measured one request at a time: its URL, its process, the headers each request carries."""

    url: str
    pid: int
    headers: dict[str, str] | None = None


async def sequential_ms(
    url: str, count: int, pid: int, *, creates: bool = False, headers: dict[str, str] | None = None
) -> tuple[float, float]:
    """One request at a time on one connection, a page of 20 scenarios (``creates``: a create of two
    steps): the median round trip, and the CPU the server process ``pid`` spent per request (from
    /proc: unlike the round trip, not stretched by other work on the machine). Both in ms.
    """
    (figures,) = await in_turn_ms([Served(url, pid, headers)], count, creates=creates)
    return figures


async def in_turn_ms(
    servers: list[Served], count: int, *, creates: bool = False
) -> list[tuple[float, float]]:
    """:func:`sequential_ms` of several servers at once, each request sent to each server in turn (the
    order rotated every round): each server's figures, read over the same stretch of the machine's
    speed, which drifts by a sixth between windows minutes apart on a shared virtual machine."""
    expected = 201 if creates else 200
    samples: list[list[float]] = [[] for _ in servers]
    cpu_began: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(
                aiohttp.ClientSession(
                    server.url, connector=aiohttp.TCPConnector(limit=1), headers=server.headers
                )
            )
            for server in servers
        ]
        for index in range(count + 20):
            if index == 20:
                cpu_began = [cpu_seconds(server.pid) for server in servers]
            turn = index % len(servers)
            for which in [*range(turn, len(servers)), *range(turn)]:
                http = sessions[which]
                began = time.perf_counter()
                if creates:
                    body = create_body(100_000 + index)
                    sent = http.post(CREATE_PATH, data=body, headers=JSON_HEADERS)
                else:
                    sent = http.get(LIST_PATH)
                async with sent as answer:
                    await answer.read()
                    if answer.status != expected:
                        raise SystemExit(f"{answer.method} {answer.url.path} answered {answer.status}")
                if index >= 20:
                    samples[which].append((time.perf_counter() - began) * 1000)
        cpu_ms = [
            (cpu_seconds(server.pid) - began) * 1000 / count
            for server, began in zip(servers, cpu_began, strict=True)
        ]
    return [(statistics.median(taken), cpu) for taken, cpu in zip(samples, cpu_ms, strict=True)]


async def sequential_page_ms(url: str, count: int, pid: int) -> tuple[float, float]:
    """:func:`sequential_ms` of pages: their median round trip and the server's CPU a page (ms)."""
    return await sequential_ms(url, count, pid)


async def seed(url: str, count: int, headers: dict[str, str] | None = None) -> None:
    """``count`` scenarios named ``bench NNN`` (they sort before the load's ``load NNNNN``)."""
    connector = aiohttp.TCPConnector(limit=8)
    async with aiohttp.ClientSession(url, connector=connector, headers=headers) as http:

        async def make(index: int) -> None:
            body = json.loads(create_body(index))
            body["name"] = f"bench {index:03d}"
            async with http.post(CREATE_PATH, json=body) as answer:
                if answer.status != 201:
                    raise SystemExit(f"seeding: POST answered {answer.status}: {await answer.text()}")

        for start in range(0, count, 8):
            await asyncio.gather(*(make(i) for i in range(start, min(count, start + 8))))


async def measure_server(
    url: str, label: str, requests: int, sequential: int, pid: int, headers: dict[str, str] | None = None
) -> Result:
    """Seed, then the load, then the sequential pages and creates (``pid``: the server process whose
    CPU is read)."""
    await seed(url, SEEDED, headers)
    result = await load(url, label, requests, headers=headers)
    result.page_ms, result.page_cpu_ms = await sequential_ms(url, sequential, pid, headers=headers)
    _, result.create_cpu_ms = await sequential_ms(url, sequential // 3, pid, creates=True, headers=headers)
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


# --- the team operations, with and without -------------------------------------------------------


def serve_without_ops() -> None:
    """``scenariokit serve`` without scoped tokens, ``/metrics``' request timing and the audit log
    (run in a child process of :func:`ops_comparison`; nothing else ever runs the server so).

    The scope check and the metrics middleware are left out of the application's middlewares, and an
    audit entry is no longer written: what remains is what a server without the team operations would
    do.
    """
    from aiohttp import web
    from aiohttp.typedefs import Handler

    import scenariokit.services.audit as audit_log
    import scenariokit_server.app as server_app
    from scenariokit.cli import main as scenariokit_main

    @web.middleware
    async def passes(request: web.Request, handler: Handler) -> web.StreamResponse:
        return await handler(request)

    async def no_entry(*_: object, **__: object) -> None:
        return None

    create_app = server_app.create_app

    def create_app_without_ops(*args: Any, **kwargs: Any) -> web.Application:
        app = create_app(*args, **kwargs)
        app.middlewares[:] = [middleware for middleware in app.middlewares if middleware is not passes]
        return app

    server_app.measure_requests = lambda *_, **__: passes  # type: ignore[assignment]
    server_app.authorize = lambda *_, **__: passes  # type: ignore[assignment]
    server_app.create_app = create_app_without_ops  # type: ignore[assignment]
    audit_log.record = no_entry  # type: ignore[assignment]
    sys.exit(scenariokit_main(["serve"]))


async def ops_comparison(requests: int, sequential: int, rounds: int) -> list[tuple[Result, Result]]:
    """On SQLite, ``rounds`` pairs of servers, with the team operations (a ``write`` token required,
    metrics and audit on) and without them (:func:`serve_without_ops`), both up at once: each seeded,
    loaded in turn (the first to be loaded alternating between rounds), then sent their one-at-a-time
    pages and creates in turn (:func:`in_turn_ms`), so that their CPU a request compares."""
    env = {"SCENARIOKIT_RUN_SCHEDULER": "false"}
    ops_env = {**env, "SCENARIOKIT_API_TOKENS": OPS_TOKENS}
    with_token = {"Authorization": f"Bearer {OPS_TOKEN}"}
    command = (sys.executable, THIS_FILE, "--serve-without-ops")
    pairs = []
    for index in range(rounds):
        with tempfile.TemporaryDirectory() as with_dir, tempfile.TemporaryDirectory() as without_dir:
            async with (
                scenariokit_serve(Path(with_dir), settle=0.5, env_extra=ops_env) as with_ops,
                scenariokit_serve(Path(without_dir), settle=0.5, env_extra=env, command=command) as without,
            ):
                servers = [Served(with_ops.url, with_ops.pid, with_token), Served(without.url, without.pid)]
                labels = ["SQLite, with tokens/metrics/audit", "SQLite, without tokens/metrics/audit"]
                for server in servers:
                    await seed(server.url, SEEDED, server.headers)
                results: dict[int, Result] = {}
                for which in (0, 1) if index % 2 == 0 else (1, 0):
                    server = servers[which]
                    results[which] = await load(server.url, labels[which], requests, headers=server.headers)
                pages = await in_turn_ms(servers, sequential)
                creates = await in_turn_ms(servers, sequential // 3, creates=True)
                for which, result in results.items():
                    result.page_ms, result.page_cpu_ms = pages[which]
                    result.create_cpu_ms = creates[which][1]
                pairs.append((results[0], results[1]))
    return pairs


# --- the report -----------------------------------------------------------------------------------


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def report(results: list[Result], ceiling_page_ms: float, ceiling_cpu_ms: float) -> None:
    """The table, the ratios to the ceiling and every figure beside its target."""
    top = results[0]
    print(f"{'server':40s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>7s} {'ceiling':>8s}"
          f" {'POST p99':>9s}")  # fmt: skip
    for r in results:
        ratio = r.rps / top.rps if top.rps else 0.0
        errors = f"{r.errors}" + (f" {r.error_kinds}" if r.error_kinds else "")
        p50, p99 = r.quantile(0.5), r.quantile(0.99)
        posts = r.quantile(0.99, posts=True)
        print(f"{r.label:40s} {r.rps:8.0f} {p50:8.1f} {p99:8.1f} {errors:>7s} {ratio:7.0%} {posts:9.1f}")
    print(f"one request at a time: the ceiling's page round trip {ceiling_page_ms:.2f} ms (median), its CPU"
          f" {ceiling_cpu_ms:.2f} ms a page")  # fmt: skip
    for r in results[1:]:
        assert r.page_ms is not None and r.page_cpu_ms is not None and r.create_cpu_ms is not None
        print(f"  {r.label:38s} server CPU {r.page_cpu_ms:.2f} ms a page (target ≤ {TARGET_PAGE_CPU_MS:.1f}:"
              f" {_verdict(r.page_cpu_ms <= TARGET_PAGE_CPU_MS)}), {r.create_cpu_ms:.2f} ms a create;"
              f" a page's round trip {r.page_ms:.2f} ms, {max(0.0, r.page_ms - ceiling_page_ms):.2f} ms"
              " beyond the ceiling's")  # fmt: skip
    for r in results[1:]:
        p99, fast = r.quantile(0.99), r.rps >= TARGET_RPS
        print(f"  {r.label:38s} {r.rps:.0f} req/s (target ≥ {TARGET_RPS:.0f}: {_verdict(fast)}),"
              f" p99 {p99:.0f} ms (target ≤ {TARGET_P99_MS:.0f}: {_verdict(p99 <= TARGET_P99_MS)}),"
              f" {r.errors} errors (target 0: {_verdict(not r.errors)})")  # fmt: skip


def report_ops(pairs: list[tuple[Result, Result]]) -> None:
    """Each pair's server CPU a request with and without the team operations, and the share they add."""
    print("scoped tokens, /metrics' request timing and the audit log (SQLite, one process, one request at a"
          " time, to each server in turn; the mix is 75% pages, 25% creates):")  # fmt: skip
    for with_ops, without in pairs:
        assert with_ops.mix_cpu_ms is not None and without.mix_cpu_ms is not None
        assert with_ops.page_cpu_ms is not None and without.page_cpu_ms is not None
        share = with_ops.mix_cpu_ms / without.mix_cpu_ms - 1 if without.mix_cpu_ms else 0.0
        print(f"  server CPU a page {with_ops.page_cpu_ms:.3f} ms with, {without.page_cpu_ms:.3f} without;"
              f" a create {with_ops.create_cpu_ms:.3f} with, {without.create_cpu_ms:.3f} without;"
              f" a request of the mix {with_ops.mix_cpu_ms:.3f} with, {without.mix_cpu_ms:.3f} without:"
              f" {share:+.1%} (target ≤ +{TARGET_OPS_SHARE:.0%}: {_verdict(share <= TARGET_OPS_SHARE)});"
              f" under the load {with_ops.rps:.0f} req/s with, {without.rps:.0f} without")  # fmt: skip


def postgres_cpu_seconds() -> float:
    """CPU seconds of the machine's PostgreSQL: its live processes, and the ended backends its
    postmaster has reaped (their time is the postmaster's children's)."""
    postgres = {stat.pid: stat for stat in proc_stats() if stat.name.startswith("postgres")}
    total = 0.0
    for stat in postgres.values():
        total += stat.seconds
        if stat.ppid not in postgres:  # the postmaster: add its reaped children
            total += stat.reaped_seconds
    return total


@dataclass
class Side:
    """One checkout's figures over the pairs of ``--against`` on one database."""

    label: str
    env: dict[str, str]
    rps: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    database_cpu: list[float] = field(default_factory=list)


async def against(tree: Path, pairs: int, requests: int, postgres: str | None) -> None:
    """This checkout's code and ``tree``'s in turn, ``pairs`` times on each database (see the module)."""
    older = {"PYTHONPATH": tree_environment(tree)["PYTHONPATH"]}
    for store in ["SQLite"] + ([] if postgres is None else ["PostgreSQL"]):
        here, there = Side("this checkout", {}), Side(str(tree), older)
        for pair in range(pairs):
            for side in (here, there) if pair % 2 == 0 else (there, here):
                env = {"SCENARIOKIT_RUN_SCHEDULER": "false", **side.env}
                async with contextlib.AsyncExitStack() as stack:
                    if store == "PostgreSQL":
                        assert postgres is not None
                        url = await stack.enter_async_context(postgres_schema(postgres))
                        if url is None:
                            return
                        env.update(SCENARIOKIT_DATABASE_URL=url, SCENARIOKIT_SECRET_KEY=BENCH_KEY)
                    tmp = stack.enter_context(tempfile.TemporaryDirectory())
                    served = await stack.enter_async_context(
                        scenariokit_serve(Path(tmp), settle=0.5, env_extra=env)
                    )
                    began = postgres_cpu_seconds()
                    await seed(served.url, SEEDED)
                    result = await load(served.url, side.label, requests)
                    spent = postgres_cpu_seconds() - began
                side.rps.append(result.rps)
                side.p99.append(result.quantile(0.99))
                side.database_cpu.append(spent)
                cpu = f", PostgreSQL's CPU {spent:.1f} s" if store == "PostgreSQL" else ""
                print(f"  {store}, pair {pair + 1}, {side.label}: {result.rps:.0f} req/s,"
                      f" p99 {result.quantile(0.99):.0f} ms, {result.errors} errors{cpu}")  # fmt: skip
        median = statistics.median
        line = (f"{store}: this checkout {median(here.rps):.0f} req/s, p99 {median(here.p99):.0f} ms;"
                f" {tree} {median(there.rps):.0f} req/s, p99 {median(there.p99):.0f} ms;"
                f" requests/s {median(here.rps) / median(there.rps):.2f}x")  # fmt: skip
        if store == "PostgreSQL":
            line += (f"; PostgreSQL's CPU {median(here.database_cpu):.1f} s against"
                     f" {median(there.database_cpu):.1f} s")  # fmt: skip
        print(line, flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--short", action="store_true", help="600 requests, 100 sequential pages")
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL", DEFAULT_POSTGRES))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--processes", type=int, default=2, help="server processes of the PostgreSQL line (1: none)"
    )
    parser.add_argument("--no-ops", action="store_true", help="leave out the team-operations comparison")
    parser.add_argument("--ops-rounds", type=int, default=2, help="pairs of the team-operations comparison")
    parser.add_argument("--against", type=Path, help="a checkout to measure in turn with this one")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of --against on each database")
    args = parser.parse_args()
    requests = 600 if args.short and args.requests == 3000 else args.requests
    sequential = 100 if args.short else SEQUENTIAL
    print(f"{requests} requests, {CONNECTIONS} connections: 75% GET {LIST_PATH}, 25% POST {CREATE_PATH}")
    print(f"load average at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.against is not None:
        postgres = None if args.no_postgres else args.postgres
        await against(args.against.resolve(), args.pairs, requests, postgres)
        return
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
    pairs = [] if args.no_ops else await ops_comparison(requests, sequential, args.ops_rounds)
    report(results, ceiling_page_ms, ceiling_cpu_ms)
    if pairs:
        report_ops(pairs)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ceiling-port"]:  # the child process of ceiling()
        serve_ceiling(int(sys.argv[2]))
    elif sys.argv[1:2] == ["--serve-without-ops"]:  # a child process of ops_comparison()
        serve_without_ops()
    else:
        asyncio.run(main())
