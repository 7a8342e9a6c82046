"""Runs per minute: the same three-step scenarios through scenariokit and as a bare Playwright script.

The bare script is what a user writes after ``playwright install``: for each scenario launch a fresh
headless shell, run the three steps, close it. The floor is the same steps in fresh contexts of one
warm browser (no launch at all). scenariokit runs the same scenarios from its store through its
scheduler and worker processes, every run in a browser nobody used before, with 1 and 2 workers
(``--workers`` for others) and its default for this machine. All are measured in this one process run,
against the same page on 127.0.0.1, with the browser discovery finds (the headless shell), and printed
as ratios to the bare script. For each scenariokit configuration the summed run timelines show where
the time went, and the peak memory of one run's process tree (worker, driver, browsers) is reported.
Each scenariokit configuration is measured with the bubblewrap sandbox (when it works here) and
without it (``SCENARIOKIT_SANDBOX=off``); every run has a worker process of its own either way.

With ``--reused-tree PATH`` (a checkout of the release before one-run workers, whose workers served
run after run), that tree's scenariokit runs the same scenarios with the same worker counts in a child
process of this run, so the cost of one-run sandboxed workers is a ratio measured side by side. That
release is commit c7b9a1e (headless shell and timelines, workers reused): ``git worktree add --detach
/tmp/reused c7b9a1e`` makes the checkout. That tree is measured twice: as it is (what its users had),
and with this tree's browser launch flags added (``DEFAULT_ARGS``), so that the ratio of one-run
workers to those is the cost of the sandbox and one-run workers alone, with the same browser work.

    python bench/runs.py [--scenarios 50] [--workers 1,2] [--rounds 1] [--reused-tree PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
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
    tree_environment,
    until_warm,
)

import scenariokit
from scenariokit.domain.model import RunStatus, RunTimings
from scenariokit.formats.queries import RunQuery
from scenariokit.runner.confinement.sandbox import SANDBOX_ENV, bubblewrap_works
from scenariokit.runner.worker.browser import DEFAULT_ARGS, discover_browser
from scenariokit.settings import Settings

Config = tuple[int, str]  # (workers, sandbox mode)
BENCH = Path(__file__).resolve().parent


async def through_scenariokit(
    url: str, count: int, workers: int, sandbox: str, *, sample_memory: bool = False
) -> tuple[float, list[RunTimings | None], MemoryPeak]:
    """Seconds for ``count`` runs queued at once and executed with ``workers`` workers, their timings.

    With ``sample_memory`` the workers' process trees are sampled meanwhile (about 35 ms of CPU per
    pass over 3 warm workers, 4 passes a second, in this process): only in a pass whose seconds are
    not counted, since the reused workers' runs are not sampled.
    """
    os.environ[SANDBOX_ENV] = sandbox  # read when the scheduler starts its pool
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit.open_kit(f"sqlite:///{Path(tmp) / 'bench.db'}", workers=workers) as kit:
            env = await kit.environments.create({"name": "bench", "data": {"url": url}})
            scenarios = [
                await kit.scenarios.create(
                    {"name": f"bench {i}", "steps": [{"execCode": code} for code in STEPS]}
                )
                for i in range(count)
            ]
            # Worker start-up is a one-off, like installing the script; so is what the pool prepares
            # for its workers' drivers in the background (compile cache, snapshot, driver zygote,
            # each with a browser launched to warm it up): a service that has been up a while has it.
            scheduler = await kit.start_runner()
            await scheduler.pool.node_cache_made()
            await until_warm(scheduler.pool)
            sampled = scheduler.pool.worker_pids if sample_memory else list
            async with memory_peak(sampled) as peak:
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


async def through_tree(
    tree: Path, url: str, count: int, workers: int, browser_args: Sequence[str] = ()
) -> float:
    """Seconds for ``count`` runs with ``workers`` workers through the scenariokit of ``tree``, its
    browsers launched with ``browser_args`` as well."""
    env = tree_environment(tree)
    added = ["--browser-args", json.dumps(list(browser_args))] if browser_args else []
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(BENCH / "_tree_runs.py"), url, str(count), str(workers), json.dumps(STEPS),
        *added, env=env, cwd=tempfile.gettempdir(), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"the runs through {tree} failed (exit {child.returncode})")
    return float(out.decode().split()[-1])


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure everything this many times, in rotated order"
    )
    parser.add_argument(
        "--reused-tree", type=Path, help="a checkout of the release with reused workers, measured alongside"
    )
    args = parser.parse_args()
    default_workers = Settings().workers
    counts = sorted({int(n) for n in args.workers.split(",")} | {default_workers})
    browser = discover_browser()
    sandboxes = ["bubblewrap", "off"] if bubblewrap_works() else ["off"]
    configs: list[Config] = [(n, sandbox) for n in counts for sandbox in sandboxes]
    labels: dict[object, str] = {
        "bare": "bare Playwright script (fresh browser each)",
        "floor": "fresh-context floor (one warm browser)",
    }
    labels |= {
        (n, sandbox): f"scenariokit, {n} worker(s){' (default)' if n == default_workers else ''}, "
        f"sandbox {sandbox}"
        for n, sandbox in configs
    }
    if args.reused_tree:
        labels |= {("reused", n): f"reused workers (before one-run), {n} worker(s)" for n in counts}
        labels |= {
            ("reused+flags", n): f"reused workers with today's launch flags, {n} worker(s)" for n in counts
        }
    rates: dict[object, list[float]] = {key: [] for key in labels}
    ratios: dict[object, list[float]] = {key: [] for key in labels}
    timelines: dict[Config, list[RunTimings | None]] = {config: [] for config in configs}
    peaks: dict[Config, MemoryPeak] = {}
    runner, url = await serve_page()
    try:
        await bare_playwright(url, 2)  # warm the disk cache, so the first measurement is not penalised
        for round_ in range(args.rounds):
            # a machine shared with other work drifts: each round measures everything, in another order
            shift = round_ % len(configs)
            seconds: dict[object, float] = {"bare": await bare_playwright(url, args.scenarios)}
            seconds["floor"] = await fresh_context_floor(url, args.scenarios)
            for config in configs[shift:] + configs[:shift]:
                took, timings, _ = await through_scenariokit(url, args.scenarios, *config)
                seconds[config] = took
                timelines[config] += timings
                if args.reused_tree and config[1] == sandboxes[-1]:  # once per worker count
                    reused = await through_tree(args.reused_tree, url, args.scenarios, config[0])
                    seconds[("reused", config[0])] = reused
                    seconds[("reused+flags", config[0])] = await through_tree(
                        args.reused_tree, url, args.scenarios, config[0], DEFAULT_ARGS
                    )
            for key, took in seconds.items():
                rates[key].append(per_minute(args.scenarios, took))
                ratios[key].append(seconds["bare"] / took)
        for config in configs:  # memory: a pass of its own, not timed
            peaks[config] = (await through_scenariokit(url, 10, *config, sample_memory=True))[2]
    finally:
        await runner.cleanup()
    print(
        f"{args.scenarios} three-step scenarios, {browser.describe()}, {os.cpu_count()} cores, "
        f"default workers here: {default_workers}, median of {args.rounds} round(s)"
    )
    for key, label in labels.items():
        rate, ratio = statistics.median(rates[key]), statistics.median(ratios[key])
        to_floor = statistics.median(r / f for r, f in zip(rates[key], rates["floor"], strict=True))
        spread = f"  (rounds: {', '.join(f'{r:.0f}' for r in rates[key])})" if args.rounds > 1 else ""
        print(f"  {label:46s} {rate:7.1f} runs/min   {ratio:5.2f}x bare   {to_floor:5.2f}x floor{spread}")
    if "bubblewrap" in sandboxes:
        for n in counts:
            on, off = statistics.median(rates[(n, "bubblewrap")]), statistics.median(rates[(n, "off")])
            print(f"  sandbox on/off with {n} worker(s): {on / off:.2f}")
    if args.reused_tree:
        against = {"reused": "reused workers", "reused+flags": "reused workers with today's flags"}
        for n in counts:
            for kind, name in against.items():
                reused = statistics.median(rates[(kind, n)])
                for sandbox in sandboxes:
                    mine = statistics.median(rates[(n, sandbox)])
                    # each round measured both within minutes of each other: their ratio is less exposed
                    # to the machine's drift than the ratio of the medians
                    paired = [r / u for r, u in zip(rates[(n, sandbox)], rates[(kind, n)], strict=True)]
                    rounds = f", rounds {', '.join(f'{r:.2f}' for r in paired)}" if args.rounds > 1 else ""
                    print(
                        f"  one-run workers, sandbox {sandbox}, against {name} with {n} worker(s): "
                        f"{mine / reused:.2f}; median of the rounds' ratios {statistics.median(paired):.2f}"
                        f"{rounds} (limit: at least 0.90)"
                    )
    for n, sandbox in configs:
        peak = peaks[(n, sandbox)].describe()
        print(f"scenariokit, {n} worker(s), sandbox {sandbox}: peak memory of one run's process tree {peak}")
        for line in timeline_lines(timelines[(n, sandbox)]):
            print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
