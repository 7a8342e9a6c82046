"""Runs per minute: the same three-step scenarios through scenariokit and as a bare Playwright script.

The bare script is what a user writes after ``playwright install``: for each scenario launch a fresh
headless shell, run the three steps, close it. The floor is the same steps in fresh contexts of one
warm browser (no launch at all). scenariokit runs the same scenarios from its store through its
scheduler and worker processes, every run in a browser nobody used before, with 1 and 2 workers
(``--workers`` for others) and its default for this machine. All are measured in this one process run,
against the same page on 127.0.0.1, with the browser discovery finds (the headless shell), and printed
as ratios to the bare script. For each scenariokit configuration the summed run timelines show where
the time went, and the peak memory of one run's process tree (worker, driver, browsers) is reported.

    python bench/runs.py [--scenarios 50] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from _shared import (
    STEPS,
    MemoryPeak,
    bare_playwright,
    fresh_context_floor,
    memory_peak,
    per_minute,
    serve_page,
    timeline_lines,
)

import scenariokit
from scenariokit.domain.model import RunStatus, RunTimings
from scenariokit.queries import RunQuery
from scenariokit.runner.browser import discover_browser
from scenariokit.settings import Settings


async def through_scenariokit(
    url: str, count: int, workers: int
) -> tuple[float, list[RunTimings | None], MemoryPeak]:
    """Seconds for ``count`` runs queued at once and executed with ``workers`` workers, their timings."""
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit.open_kit(f"sqlite:///{Path(tmp) / 'bench.db'}", workers=workers) as kit:
            env = await kit.environments.create({"name": "bench", "data": {"url": url}})
            scenarios = [
                await kit.scenarios.create(
                    {"name": f"bench {i}", "steps": [{"execCode": code} for code in STEPS]}
                )
                for i in range(count)
            ]
            scheduler = await kit.start_runner()  # worker start-up is a one-off, like installing the script
            await asyncio.sleep(2)  # let every worker launch its first browser
            async with memory_peak(scheduler.pool.worker_pids) as peak:
                began = time.perf_counter()
                runs = [
                    await kit.runs.create({"scenarioId": str(s.id), "environmentId": str(env.id)})
                    for s in scenarios
                ]
                waiting = RunQuery(status=RunStatus.IN_PROGRESS, limit=1)
                while (await kit.runs.list(waiting)).total:  # noqa: ASYNC110 - the store is what we watch
                    await asyncio.sleep(0.05)
                elapsed = time.perf_counter() - began
            await asyncio.sleep(1)  # the last browsers close after their outcome: let that land
            details = [await kit.runs.get(run.id) for run in runs]
    failed = [d.run for d in details if d.run.status is not RunStatus.PASS]
    if failed:
        raise SystemExit(f"{len(failed)} scenariokit runs did not pass: {failed[0].error}")
    return elapsed, [d.run.timings for d in details], peak


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    args = parser.parse_args()
    default_workers = Settings().workers
    counts = sorted({int(n) for n in args.workers.split(",")} | {default_workers})
    browser = discover_browser()
    runner, url = await serve_page()
    try:
        await bare_playwright(url, 2)  # warm the disk cache, so the first measurement is not penalised
        bare = await bare_playwright(url, args.scenarios)
        floor = await fresh_context_floor(url, args.scenarios)
        measured = {n: await through_scenariokit(url, args.scenarios, n) for n in counts}
    finally:
        await runner.cleanup()
    base = per_minute(args.scenarios, bare)
    print(
        f"{args.scenarios} three-step scenarios, {browser.describe()}, {os.cpu_count()} cores, "
        f"default workers here: {default_workers}"
    )
    rows = [
        ("bare Playwright script (fresh browser each)", bare),
        ("fresh-context floor (one warm browser)", floor),
    ]
    rows += [
        (f"scenariokit, {n} worker(s){' (default)' if n == default_workers else ''}", took)
        for n, (took, _, _) in measured.items()
    ]
    floor_rate = per_minute(args.scenarios, floor)
    for label, took in rows:
        rate = per_minute(args.scenarios, took)
        ratios = f"{rate / base:5.2f}x bare   {rate / floor_rate:5.2f}x floor"
        print(f"  {label:46s} {rate:7.1f} runs/min   {ratios}")
    for n, (_, timings, peak) in measured.items():
        print(f"scenariokit, {n} worker(s): peak memory of one run's process tree {peak.describe()}")
        for line in timeline_lines(timings):
            print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
