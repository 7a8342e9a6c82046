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
        [--start zygote,exec] [--reused-tree PATH]

``--start exec`` starts every worker by exec, as a pool without a zygote does (docs/architecture.md).
``--reused-tree PATH`` (a checkout of the release before one-run workers, as for ``bench/runs.py``) runs
the same scenarios through that tree's scenariokit in a child process, sampled the same way from the
moment its workers are up: the CPU per run that one-run workers are held against.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import attrs
from _shared import STEPS, CpuSampler, bare_playwright, serve_page, tree_environment, until_warm

import scenariokit
from scenariokit.domain.model import RunStatus
from scenariokit.formats.queries import RunQuery
from scenariokit.runner.confinement.sandbox import DRIVER_SNAPSHOT_ENV, SANDBOX_ENV, bubblewrap_works
from scenariokit.runner.parent import executor
from scenariokit.storage.ports import StoreActivity

_zygote_supported = executor.zygote_supported

#: CPU seconds per run of the bare script, measured first: the others are printed as ratios to it
_bare: list[float] = []


@attrs.frozen
class SchedulerWork:
    """What the scheduler process did in the window, beside its CPU: for the lines under it."""

    #: CPU seconds of its event loop's thread (claims, events, store writes), and of the bench's own
    #: calls on it (queueing the runs, waiting for them), which are no part of the scheduler's work
    loop: float
    bench: float
    #: the store's units of work and commits (the bench's own left out); None for a store that
    #: counts none (a tree from before the counts)
    activity: StoreActivity | None


def report(
    label: str,
    count: int,
    seconds: float,
    sampler: CpuSampler,
    parent_label: str,
    work: SchedulerWork | None = None,
) -> None:
    """One configuration's runs/min, CPU per run (and its ratio to the bare script's), by component."""
    parts = sampler.by_component()
    parts[parent_label] = sampler.parent - (work.bench if work else 0.0)
    per_run = sum(parts.values()) / count
    ratio = f", {per_run / _bare[0]:.2f}x the bare script's" if _bare else ""
    _bare.append(per_run)
    print(f"{label}: {count} runs in {seconds:.1f} s ({count / seconds * 60:.0f}/min), "
          f"{per_run * 1000:.0f} ms CPU per run{ratio}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for component, cpu in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"    {component:34s} {cpu / count * 1000:7.0f} ms")
        if work is not None and component == parent_label:
            threads = cpu - work.loop
            for what, spent in (
                ("its event loop (claims, events, store)", work.loop),
                ("its threads (worker starts and stops, pipes)", threads),
            ):
                print(f"      {what:44s} {spent / count * 1000:5.1f} ms")
            done = work.activity
            if done is None:
                print("      store per run: not counted (a store without activity counts)")
            else:
                print(f"      store per run: {done.writes / count:.2f} write transactions "
                      f"({done.commits / count:.2f} committed), {done.reads / count:.2f} reads")  # fmt: skip
            print(f"      (left out: the bench's own calls, queueing runs and polling, "
                  f"{work.bench / count * 1000:.1f} ms per run)")  # fmt: skip
    unseen = sampler.machine - sum(parts.values())
    print(f"    {'not seen in any sampled process':34s} {unseen / count * 1000:7.0f} ms"
          f"  (the machine's busy time less the above: the kernel's own work, other programs)")  # fmt: skip


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
            store = kit.services.store
            with CpuSampler() as sampler:
                scheduler = await kit.start_runner()
                await scheduler.pool.node_cache_made()  # made in the background: not in the window
                await until_warm(scheduler.pool)
                sampler.baseline()
                counts = getattr(store, "activity", None) or StoreActivity()
                loop_began, activity = time.thread_time(), counts.snapshot()
                began = time.perf_counter()
                for s in scenarios:
                    await kit.runs.create({"scenarioId": str(s.id), "environmentId": str(env.id)})
                bench = time.thread_time() - loop_began
                queued = counts.since(activity)
                # Asked every half second: a tighter poll's reads would cost the scheduler's process
                # more than some of what is measured (every 50 ms: about 15 ms per run).
                waiting, polls = RunQuery(status=RunStatus.IN_PROGRESS, limit=1), 0
                while True:
                    asked = time.thread_time()
                    left = (await kit.runs.list(waiting)).total
                    bench += time.thread_time() - asked
                    polls += 1
                    if not left:
                        break
                    await asyncio.sleep(0.5)
                took = time.perf_counter() - began
                await until_warm(scheduler.pool)  # the workers for the next runs, paid in this window
                await asyncio.sleep(0.5)
                loop = time.thread_time() - loop_began - bench
                done = counts.since(activity)
            own = StoreActivity(
                writes=done.writes - queued.writes,
                reads=done.reads - queued.reads - polls,
                commits=done.commits - queued.commits,
            )
            label = (
                f"scenariokit, {workers} worker(s), sandbox {sandbox}, driver snapshot {snapshot}, "
                f"started by {start}"
            )
            counted = own if hasattr(store, "activity") else None
            work = SchedulerWork(loop=loop, bench=bench, activity=counted)
            report(label, count, took, sampler, "scheduler process (pool, store)", work)


async def reused_cpu(tree: Path, url: str, count: int, workers: int) -> None:
    """The reused-worker release of ``tree``, in a child process: its CPU from its workers being up."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).parent / "_tree_runs.py"), url, str(count), str(workers),
        json.dumps(STEPS), "--handshake",
        env=tree_environment(tree), cwd=tempfile.gettempdir(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    with CpuSampler() as sampler:
        sampler.labels[child.pid] = "scheduler process (pool, store)"
        if (await child.stdout.readline()).strip() != b"ready":
            raise SystemExit(f"the runs through {tree} did not start")
        await asyncio.sleep(0.5)  # the sampler has seen every process of the child
        sampler.baseline()
        child.stdin.write(b"go\n")
        await child.stdin.drain()
        done = (await child.stdout.readline()).split()
        await asyncio.sleep(0.5)  # as for one-run workers: the browser launched for the next run is up
    child.stdin.write(b"close\n")
    await child.stdin.drain()
    await child.wait()
    if child.returncode != 0 or done[:1] != [b"done"]:
        raise SystemExit(f"the runs through {tree} failed (exit {child.returncode})")
    report(f"reused workers ({tree}), {workers} worker(s)", count, float(done[1]), sampler, "this process")


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
    parser.add_argument("--reused-tree", type=Path, help="a checkout of the release with reused workers")
    args = parser.parse_args()
    runner, url = await serve_page()
    try:
        await bare_playwright(url, 2)
        await bare_cpu(url, args.scenarios)
        if args.reused_tree:
            await reused_cpu(args.reused_tree, url, args.scenarios, args.workers)
        for sandbox in args.sandbox.split(","):
            for snapshot in args.driver_snapshot.split(","):
                for start in args.start.split(","):
                    await scenariokit_cpu(url, args.scenarios, args.workers, sandbox, snapshot, start)
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
