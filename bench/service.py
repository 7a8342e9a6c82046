"""Runs per minute through the real service: ``scenariokit serve`` over REST against the bare script.

``scenariokit serve`` with its defaults (the worker count it picks for this machine, the headless shell
discovery finds) on a free port and a temporary SQLite file. The benchmark creates an environment and
a three-step scenario over REST, queues ``--runs`` runs of it with ``POST /api/v1/run``, and awaits them
as a dashboard would: one list request (``GET /api/v1/run``) every 250 ms until none is in progress.
The bare Playwright script (a fresh headless shell per run, sequential) is measured in the same
process run, before the server starts, and the ratio printed. The peak memory of one run's process
tree (worker, driver, browsers) and the summed run timelines are reported too.

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
    bare_playwright,
    create,
    memory_peak,
    per_minute,
    scenariokit_serve,
    serve_page,
    timeline_lines,
    timings_of,
    worker_children,
)

from scenariokit.settings import Settings

API = "/api/v1"


async def through_the_service(url: str, runs: int) -> tuple[float, list[dict[str, Any]], str]:
    """Seconds from the first ``POST /run`` to the list request that shows all ``runs`` finished."""
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit_serve(Path(tmp)) as served, aiohttp.ClientSession(served.url) as http:
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
    return elapsed, details, peak.describe()


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    runner, url = await serve_page()
    try:
        await bare_playwright(url, 2)  # warm the disk cache
        bare = await bare_playwright(url, args.runs)
        served, details, memory = await through_the_service(url, args.runs)
    finally:
        await runner.cleanup()
    base = per_minute(args.runs, bare)
    rate = per_minute(args.runs, served)
    workers = Settings().workers
    print(f"{args.runs} runs of a three-step scenario, {os.cpu_count()} cores")
    print(f"  {'bare Playwright script (fresh headless shell each)':56s} {base:7.1f} runs/min   1.00x")
    label = f"scenariokit serve, defaults ({workers} workers), over REST"
    print(f"  {label:56s} {rate:7.1f} runs/min   {rate / base:.2f}x")
    print(f"peak memory of one run's process tree: {memory}")
    for line in timeline_lines(timings_of(details)):
        print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
