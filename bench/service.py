"""Runs per minute through the real service: ``scenariokit serve`` over REST against the bare script.

``scenariokit serve`` with its defaults (the worker count it picks for this machine, the headless shell
discovery finds) on a free port and a temporary SQLite file, measured once it is warm (its pool has
built the drivers' snapshot and zygote: a service that has been up a while). The benchmark creates an
environment and a three-step scenario over REST, queues ``--runs`` runs of it with ``POST
/api/v1/run``, and awaits them as a dashboard would: one list request (``GET /api/v1/run``) every
250 ms until none is in progress.
The bare Playwright script (a fresh headless shell per run) is measured in the same process run,
before the server starts, twice: one browser at a time, and as many browsers at once as the server
runs workers (the same concurrency); the ratios to both are printed against their targets (issue 31:
at least 1.0x the script at the same concurrency and 1.5x the one-at-a-time script). The peak memory
(PSS) of one run's process tree (worker, driver, browsers) and the summed run timelines are reported
too.

    python bench/service.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from _shared import (
    DASHBOARD_POLL_SECONDS,
    STEPS,
    MemoryPeak,
    bare_playwright,
    create,
    memory_peak,
    per_minute,
    scenariokit_serve,
    serve_page,
    target_line,
    timeline_lines,
    timings_of,
    worker_children,
)

from scenariokit.settings import Settings

API = "/api/v1"


async def through_the_service(url: str, runs: int) -> tuple[float, list[dict[str, Any]], MemoryPeak]:
    """Seconds from the first ``POST /run`` to the list request that shows all ``runs`` finished."""
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            scenariokit_serve(Path(tmp), warm=True) as served,
            aiohttp.ClientSession(served.url) as http,
        ):
            env = await create(http, f"{API}/environments", {"name": "bench", "data": {"url": url}})
            steps = [{"execCode": code} for code in STEPS]
            scenario = await create(http, f"{API}/scenarios", {"name": "bench", "steps": steps})
            body = {"scenarioId": scenario["id"], "environmentId": env["id"]}
            async with memory_peak(lambda: worker_children(served.process.pid)) as peak:
                began = time.perf_counter()
                ids = [(await create(http, f"{API}/run", body))["id"] for _ in range(runs)]
                while True:
                    async with http.get(f"{API}/run", params={"limit": "200"}) as answer:
                        listed = (await answer.json())["items"]
                    if not any(item["status"] == "in_progress" for item in listed):
                        break
                    await asyncio.sleep(DASHBOARD_POLL_SECONDS)
                elapsed = time.perf_counter() - began
            await asyncio.sleep(1)  # the last browsers close after their outcome: let that land
            details = []
            for run_id in ids:
                async with http.get(f"{API}/run/{run_id}", params={"limit": "1"}) as answer:
                    details.append(await answer.json())
    failed = [d for d in details if d["status"] != "pass"]
    if failed:
        raise SystemExit(f"{len(failed)} runs did not pass: {failed[0]['error']}")
    return elapsed, details, peak


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    workers = Settings().workers
    runner, url = await serve_page()
    try:
        await bare_playwright(url, 2)  # warm the disk cache
        bare = per_minute(args.runs, await bare_playwright(url, args.runs))
        bare_at_once = per_minute(args.runs, await bare_playwright(url, args.runs, at_once=workers))
        served, details, memory = await through_the_service(url, args.runs)
    finally:
        await runner.cleanup()
    rate = per_minute(args.runs, served)
    print(f"{args.runs} runs of a three-step scenario, {os.cpu_count()} cores")
    print(f"  {'bare Playwright script, one browser at a time':60s} {bare:7.1f} runs/min")
    print(f"  {f'bare Playwright script, {workers} browsers at once':60s} {bare_at_once:7.1f} runs/min")
    label = f"scenariokit serve, defaults ({workers} workers), over REST"
    print(f"  {label:60s} {rate:7.1f} runs/min")
    print(f"  {target_line(f'against the script with {workers} at once', rate / bare_at_once, 1.0)}")
    print(f"  {target_line('against the script one at a time', rate / bare, 1.5)}")
    print(f"peak memory of one run's process tree: {memory.describe()}; {memory.against_target()}")
    for line in timeline_lines(timings_of(details)):
        print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
