"""CPU seconds per run, by component: where a one-run worker's cost goes on a machine of few cores.

On a machine whose cores are all busy, runs/min is the cores' seconds divided by the CPU seconds one run
costs, whatever the wall time of each part. This runs the three-step bench scenarios through
scenariokit (queued at once, as ``bench/runs.py`` does) and samples the CPU time of every process the
run starts (the bubblewrap launcher, the worker's Python, the Playwright driver, the browser's
processes) from ``/proc`` every few milliseconds, adding the scheduler process's own CPU (pool, store
writes). The window starts with warm workers and ends once the workers started for the next runs are
warm again, so it holds exactly one worker start per run. The bare Playwright script is measured the
same way (its driver and browser processes), so the two sit side by side.

    python bench/cpu.py [--scenarios 30] [--workers 2] [--sandbox bubblewrap,off] [--driver-snapshot on,off]
        [--start zygote,exec]

``--start exec`` starts every worker by exec, as a pool without a zygote does (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from _shared import STEPS, CpuSampler, bare_playwright, serve_page

import scenariokit
from scenariokit.domain.model import RunStatus
from scenariokit.formats.queries import RunQuery
from scenariokit.runner import executor
from scenariokit.runner.sandbox import DRIVER_SNAPSHOT_ENV, SANDBOX_ENV, bubblewrap_works

_zygote_supported = executor.zygote_supported

#: CPU seconds per run of the bare script, measured first: the others are printed as ratios to it
_bare: list[float] = []


def report(label: str, count: int, seconds: float, sampler: CpuSampler, parent_label: str) -> None:
    """One configuration's runs/min, CPU per run (and its ratio to the bare script's), by component."""
    parts = sampler.by_component()
    parts[parent_label] = sampler.parent
    per_run = sum(parts.values()) / count
    ratio = f", {per_run / _bare[0]:.2f}x the bare script's" if _bare else ""
    _bare.append(per_run)
    print(f"{label}: {count} runs in {seconds:.1f} s ({count / seconds * 60:.0f}/min), "
          f"{per_run * 1000:.0f} ms CPU per run{ratio}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for component, cpu in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"    {component:34s} {cpu / count * 1000:7.0f} ms")


async def scenariokit_cpu(
    url: str, count: int, workers: int, sandbox: str, snapshot: str = "on", start: str = "zygote"
) -> None:
    os.environ[SANDBOX_ENV] = sandbox
    os.environ[DRIVER_SNAPSHOT_ENV] = "true" if snapshot == "on" else "false"
    executor.zygote_supported = _zygote_supported if start == "zygote" else lambda kind: False
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit.open_kit(f"sqlite:///{Path(tmp) / 'bench.db'}", workers=workers) as kit:
            env = await kit.environments.create({"name": "bench", "data": {"url": url}})
            scenarios = [
                await kit.scenarios.create({"name": f"b{i}", "steps": [{"execCode": c} for c in STEPS]})
                for i in range(count)
            ]
            with CpuSampler() as sampler:
                scheduler = await kit.start_runner()
                await scheduler.pool.node_cache_made()  # made in the background: not in the window
                await _until_warm(scheduler.pool)
                sampler.baseline()
                began = time.perf_counter()
                for s in scenarios:
                    await kit.runs.create({"scenarioId": str(s.id), "environmentId": str(env.id)})
                waiting = RunQuery(status=RunStatus.IN_PROGRESS, limit=1)
                while (await kit.runs.list(waiting)).total:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
                took = time.perf_counter() - began
                await _until_warm(scheduler.pool)  # the workers for the next runs, paid in this window
                await asyncio.sleep(0.5)
            label = (
                f"scenariokit, {workers} worker(s), sandbox {sandbox}, driver snapshot {snapshot}, "
                f"started by {start}"
            )
            report(label, count, took, sampler, "scheduler process (pool, store)")


async def _until_warm(pool: object) -> None:
    for _ in range(600):
        if pool.ready_workers >= pool.size and not getattr(pool, "_retiring", ()):  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.05)


async def bare_cpu(url: str, count: int) -> None:
    with CpuSampler() as sampler:
        began = time.perf_counter()
        await bare_playwright(url, count)
        took = time.perf_counter() - began
    report("bare Playwright script", count, took, sampler, "script's Python")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sandbox", default="bubblewrap,off" if bubblewrap_works() else "off")
    parser.add_argument(
        "--driver-snapshot", default="on", help="on, off, or on,off to compare in one session"
    )
    parser.add_argument("--start", default="zygote", help="how workers come to exist: zygote, exec, or both")
    args = parser.parse_args()
    runner, url = await serve_page()
    try:
        await bare_playwright(url, 2)
        await bare_cpu(url, args.scenarios)
        for sandbox in args.sandbox.split(","):
            for snapshot in args.driver_snapshot.split(","):
                for start in args.start.split(","):
                    await scenariokit_cpu(url, args.scenarios, args.workers, sandbox, snapshot, start)
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
