"""Runs under API load, and a bounded soak: the service keeps running runs while it serves a dashboard.

``scenariokit serve`` with its defaults (scheduler on, the workers it picks) on a SQLite file, or on
PostgreSQL with ``--postgres``; a page on 127.0.0.1 for the runs to visit; 200 scenarios seeded for the
API traffic (``bench/api.py``'s mix: 75% ``GET /api/v1/scenarios?limit=20&orderBy=name``, 25% ``POST``).

1. **Runs alone**: ``--runs`` runs of a three-step scenario queued over REST and awaited; runs/min.
2. **Runs under load**: the same while 16 connections send the API mix as fast as the server answers;
   runs/min, its ratio to (1) (target ≥ 90%), and the API's requests/s, p50, p99 meanwhile.
   For both, where the cores went: the server itself (API and scheduler), the runs' processes
   (workers, drivers, browsers), this client, and the rest of the machine, with the load average;
   and where a run's time went, from the runs' stored timings (docs/rest.md, "Run timings"): the
   means of its phases from the claim to the report of its outcome, and the time of a run slot
   (the wall time times the workers, per run) none of them covers: from one run's outcome to the
   next claim on its slot, which is the scheduler's hand-offs through the server's event loop.
3. **Soak** (``--minutes``, default 10): the API mix on 8 connections, runs kept queued (a new one each
   time one ends, ``--parallel`` at once), and every minute one worker process is killed (SIGKILL).
   Afterwards every run must have ended (pass, or fail for the killed ones) — none lost, none stuck —
   the API must have answered every request, and the server's RSS at the end is printed beside the
   start's.

    python bench/soak.py [--runs 30] [--minutes 10] [--parallel 4] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
from _shared import (
    DASHBOARD_POLL_SECONDS,
    STEPS,
    CpuGroup,
    CpuSplit,
    create,
    queue_run,
    runs_per_minute,
    scenariokit_serve,
    serve_page,
    slot_phase_means,
    statuses,
    timings_of,
    worker_children,
)

from api import BENCH_KEY, Result, load, postgres_schema, seed
from scenariokit.domain.model import RunTimings
from scenariokit.runner.parent.capacity import default_workers

API = "/api/v1"
LOAD_CONNECTIONS = 16
SOAK_CONNECTIONS = 8
TARGET_RATIO = 0.9
FINISHED = ("pass", "fail")


def time_split(timings: Sequence[RunTimings | None], seconds: float, workers: int) -> dict[str, float]:
    """The runs' mean phases in ms (:func:`slot_phase_means`), and ``outside them``: what of a slot's
    time (``seconds`` of wall time times ``workers``, per run) none of them covers."""
    means = slot_phase_means(timings)
    means["outside them"] = seconds * 1000 * workers / len(timings) - sum(means.values())
    return means


def describe_split(alone: dict[str, float], loaded: dict[str, float]) -> str:
    """``claim 5 → 9, job to worker 127 → 219, …`` (ms)."""
    return ", ".join(f"{label} {alone[label]:.0f} → {loaded[label]:.0f}" for label in alone)


def rss_mib(pid: int) -> float:
    """Resident memory of one process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def soak(
    served_url: str, server_pid: int, body: dict[str, str], minutes: float, parallel: int
) -> tuple[Result, list[str], int, float, float]:
    """The soak: API traffic, runs kept queued, a worker killed every minute."""
    stop = asyncio.Event()
    ids: list[str] = []
    kills = 0
    start_rss = rss_mib(server_pid)
    async with aiohttp.ClientSession(served_url) as http:
        mix = load(served_url, "soak API mix", 0, stop=stop, connections=SOAK_CONNECTIONS)
        traffic = asyncio.create_task(mix)

        async def keep_running() -> None:
            while not stop.is_set():
                run_id = await queue_run(http, body)
                ids.append(run_id)
                while not stop.is_set():
                    async with http.get(f"{API}/run/{run_id}", params={"limit": "1"}) as answer:
                        if (await answer.json())["status"] in FINISHED:
                            break
                    await asyncio.sleep(DASHBOARD_POLL_SECONDS)

        runners = [asyncio.create_task(keep_running()) for _ in range(parallel)]
        deadline = time.monotonic() + minutes * 60
        next_kill = time.monotonic() + 60
        while time.monotonic() < deadline:
            await asyncio.sleep(1)
            if time.monotonic() >= next_kill:
                next_kill += 60
                workers = worker_children(server_pid)
                if workers:
                    os.kill(workers[0], signal.SIGKILL)
                    kills += 1
        stop.set()
        await asyncio.gather(*runners)
        result = await traffic
        # every run ends within its time limit and a lease: wait for the last ones
        settle = time.monotonic() + 120
        while True:
            ended = await statuses(http, ids)
            if all(status in FINISHED for status in ended.values()) or time.monotonic() > settle:
                break
            await asyncio.sleep(1)
    stuck = [run_id for run_id, status in ended.items() if status not in FINISHED]
    return result, stuck, kills, start_rss, rss_mib(server_pid)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--parallel", type=int, default=4, help="runs kept queued during the soak")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (default: SQLite)")
    args = parser.parse_args()
    runner, page_url = await serve_page()
    try:
        schema = postgres_schema(args.postgres) if args.postgres else contextlib.nullcontext(None)
        async with schema as database_url:
            env: dict[str, str] = {}
            if database_url:
                env = {"SCENARIOKIT_DATABASE_URL": database_url, "SCENARIOKIT_SECRET_KEY": BENCH_KEY}
            # the server and every run's process inherit the group: their CPU is counted exactly
            with tempfile.TemporaryDirectory() as tmp, CpuGroup() as group:
                async with scenariokit_serve(Path(tmp), env_extra=env) as served:
                    await report(served.url, served.process.pid, page_url, args, group)
    finally:
        await runner.cleanup()


async def report(url: str, pid: int, page_url: str, args: argparse.Namespace, group: CpuGroup) -> None:
    async with aiohttp.ClientSession(url) as http:
        env = await create(http, f"{API}/environments", {"name": "soak", "data": {"url": page_url}})
        steps = [{"execCode": code} for code in STEPS]
        scenario = await create(http, f"{API}/scenarios", {"name": "soak", "steps": steps})
        body = {"scenarioId": scenario["id"], "environmentId": env["id"]}
        await seed(url, 200)
        await runs_per_minute(http, body, 4)  # warm up
        split_alone, split_loaded = CpuSplit(pid, group), CpuSplit(pid, group)
        ran_alone: list[dict[str, Any]] = []
        ran_loaded: list[dict[str, Any]] = []
        split_alone.start()
        alone = await runs_per_minute(http, body, args.runs, ran_alone)
        split_alone.stop()
        stop = asyncio.Event()
        split_loaded.start()
        traffic = asyncio.create_task(load(url, "API mix", 0, stop=stop, connections=LOAD_CONNECTIONS))
        loaded = await runs_per_minute(http, body, args.runs, ran_loaded)
        stop.set()
        api = await traffic
        split_loaded.stop()
        workers = default_workers()  # the server's default, which it runs with here
        time_alone = time_split(timings_of(ran_alone), args.runs * 60 / alone, workers)
        time_loaded = time_split(timings_of(ran_loaded), args.runs * 60 / loaded, workers)
    ratio = loaded / alone if alone else 0.0
    met = "met" if ratio >= TARGET_RATIO else "NOT met"
    print(f"{args.runs} runs of a three-step scenario, {os.cpu_count()} cores")
    print(f"  runs alone                      {alone:7.1f} runs/min")
    print(f"  runs under API load             {loaded:7.1f} runs/min   {ratio:.2f}x", end=" ")
    print(f"(target ≥ {TARGET_RATIO}: {met})")
    print(f"  the API meanwhile: {api.rps:.0f} req/s, p50 {api.quantile(0.5):.1f} ms, "
          f"p99 {api.quantile(0.99):.1f} ms, errors {api.errors} {api.error_kinds or ''}")  # fmt: skip
    print(f"  CPU, runs alone:       {split_alone.describe()}")
    print(f"  CPU, runs under load:  {split_loaded.describe()}")
    print(f"  a run's time, alone → under load (means, ms): {describe_split(time_alone, time_loaded)}")
    if args.minutes <= 0:
        return
    result, stuck, kills, start_rss, end_rss = await soak(url, pid, body, args.minutes, args.parallel)
    print(f"soak, {args.minutes:g} min: API {result.rps:.0f} req/s, p99 {result.quantile(0.99):.1f} ms, "
          f"errors {result.errors} {result.error_kinds or ''}")  # fmt: skip
    print(f"  workers killed: {kills}; runs stuck or lost: {len(stuck)}")
    print(f"  server RSS: {start_rss:.0f} MiB at the start, {end_rss:.0f} MiB at the end")
    ok = not result.errors and not stuck
    print(f"  target 0 errors, 0 lost or stuck runs: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    asyncio.run(main())
