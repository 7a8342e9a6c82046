"""CPU seconds per run, by component: where a one-run worker's cost goes on a machine of few cores.

On a machine whose cores are all busy, runs/min is the cores' seconds divided by the CPU seconds one run
costs, whatever the wall time of each part. This runs the three-step bench scenarios through
scenariokit (queued at once, as ``bench/runs.py`` does) and samples the CPU time of every process the
run starts (the bubblewrap launcher, the worker's Python, the Playwright driver, the browser's
processes) from ``/proc`` every few milliseconds, adding the scheduler process's own CPU (pool, store
writes). The window starts with warm workers and ends once the workers started for the next runs are
warm again, so it holds exactly one worker start per run. The bare Playwright script is measured the
same way (its driver and browser processes), one browser at a time and with as many at once as
scenariokit runs workers, so the two sit side by side: each configuration's ratio is to the script
at its own concurrency (issue 31's item 2), then to the script one at a time. The bare script
launches with scenariokit's own browser flags, the stricter baseline; the plain script (Playwright's
own flags, what the user who writes it gets) is measured too, as many at once, and the end gives each
configuration's ratio to it apart, against no target. Runs side by side
share the cores' caches and the machine's memory bandwidth (and, on a virtual machine, maybe one
physical core), so a second of CPU does less at two at once than at one: only the same concurrency
compares like with like.

The CPU per run and its ratio are counted exactly where the machine allows: the bench runs in a
control group of its own (cgroup v1's ``cpuacct``, :class:`_shared.CpuGroup`), which the kernel
charges in nanoseconds for every process ever in it, exited ones included. The samples, read from
``/proc`` in ticks of 10 ms with each process's last milliseconds lost, miss more of a run made of
more short-lived processes (a sandboxed run is about seven; the bare script's, two): they give the
parts, and the line under them says how much they miss. Where no group can be made the sampled sum
stands in, and the report says so. The drivers the Playwright driver zygote forks are its children, as
the workers are the worker zygote's: the CPU and the minor page faults of those each reaped in the
window (each one's whole life, summed by the kernel) and each zygote's own are printed under the
driver's and the worker's sampled parts.

    python bench/cpu.py [--scenarios 30] [--workers 2] [--sandbox bubblewrap,off] [--driver-snapshot on,off]
        [--start zygote,exec] [--reused-tree PATH] [--rounds 3]

``--rounds N`` runs it all N times in turn, each configuration against the bare script of its own
round, and ends with each one's median ratio against the target (at most the bare script's CPU per
run at the same concurrency): the machine's speed drifts by a sixth between runs minutes apart, and
one round's ratio moved from 0.97x to 1.07x within the hour on one machine (wave 3, session 28), so
the verdict is three rounds' median unless told otherwise.

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
import statistics
import sys
import tempfile
import time
from pathlib import Path

import attrs
from _shared import (
    DRIVER_ZYGOTE,
    STEPS,
    WORKER_ZYGOTE,
    CpuGroup,
    CpuSampler,
    Reaped,
    bare_playwright,
    reaped_and_own,
    serve_page,
    tree_environment,
    until_warm,
    zygote_of,
)

import scenariokit
from scenariokit.domain.model import RunStatus
from scenariokit.formats.queries import RunQuery
from scenariokit.runner.confinement.sandbox import DRIVER_SNAPSHOT_ENV, SANDBOX_ENV, bubblewrap_works
from scenariokit.runner.parent import executor
from scenariokit.storage.ports import StoreActivity

_zygote_supported = executor.zygote_supported

#: CPU seconds per run of the bare script by how many browsers it ran at once, measured first: the
#: others are printed as ratios to it, at their own concurrency and one at a time
_bare: dict[int, float] = {}
#: every process this bench starts is born in it, where the machine allows one (set by main)
GROUP = CpuGroup()
#: the sampled parts whose processes a zygote forks: the field of :class:`SchedulerWork` holding what
#: it reaped, and what one such process is
FORKED = {"Playwright driver (node)": ("drivers", "driver"), "worker Python": ("workers", "worker")}


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
    #: what the Playwright driver zygote's and the worker zygote's children (a run's driver and
    #: worker each) that ended in the window spent, and each zygote itself (its forks), counted by the
    #: kernel; None without such a zygote
    drivers: Reaped | None = None
    workers: Reaped | None = None


def report(
    label: str,
    count: int,
    seconds: float,
    sampler: CpuSampler,
    parent_label: str,
    work: SchedulerWork | None = None,
    at_once: int = 1,
    *,
    compared: bool = True,
) -> float:
    """One configuration's runs/min, CPU per run (and, when ``compared``, its ratios to the bare
    script's), by component; returns the CPU per run. ``at_once``: how many runs it ran at a time
    (its workers).

    The CPU per run is counted exactly where the bench has its control group (:data:`GROUP`): every
    process of the window, exited ones included, in nanoseconds. The parts are the sampler's (ticks of
    10 ms, a process's last milliseconds lost); the line under them says what they miss. Without the
    group the sampled sum stands in, as it did before the group.
    """
    bench = work.bench if work else 0.0  # the bench's own calls: no part of any count
    parts = sampler.by_component()
    parts[parent_label] = sampler.parent - bench
    sampled = sum(parts.values()) / count
    exact = None if sampler.exact is None else (sampler.exact - bench) / count
    per_run = sampled if exact is None else exact
    how = "sampled" if exact is None else "counted exactly"
    ratio = ""
    if compared and at_once in _bare:
        ratio = f", {per_run / _bare[at_once]:.2f}x the bare script's {at_once} at once"
    if compared and at_once != 1 and 1 in _bare:
        ratio += f", {per_run / _bare[1]:.2f}x its one at a time"
    print(f"{label}: {count} runs in {seconds:.1f} s ({count / seconds * 60:.0f}/min), "
          f"{per_run * 1000:.0f} ms CPU per run ({how}){ratio}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for component, cpu in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"    {component:34s} {cpu / count * 1000:7.0f} ms")
        if work is not None and component in FORKED:
            children, one = FORKED[component]
            reaped = getattr(work, children)
            if reaped is not None:
                faults = f"({reaped.minor_faults / count:.0f} minor page faults a run)"
                for what, spent, more in (
                    (f"forked {children}, counted exactly (reaped)", reaped.seconds, f"  {faults}"),
                    (f"the {one} zygote itself (its forks)", reaped.own_seconds, ""),
                ):
                    print(f"      {what:44s} {spent / count * 1000:5.1f} ms{more}")
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
    if exact is None:
        print(f"    (sampled: every process counted exactly is left out, {GROUP.reason})")
    else:
        missed = (exact - sampled) * 1000
        why = "/proc's ticks of 10 ms cut off, what processes spent after their last sample"
        print(f"    {'missed by the samples':34s} {missed:7.0f} ms  ({why})")
    outside = sampler.machine - bench - per_run * count
    why = "the machine's busy time less the above: the kernel's own threads, other programs"
    print(f"    {'outside the bench':34s} {outside / count * 1000:7.0f} ms  ({why})")
    return per_run


async def scenariokit_cpu(
    url: str, count: int, workers: int, sandbox: str, snapshot: str = "on", start: str = "zygote"
) -> tuple[str, float]:
    """One configuration's runs through the library, reported; its label and CPU seconds per run."""
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
            with CpuSampler(group=GROUP) as sampler:
                scheduler = await kit.start_runner()
                await scheduler.pool.node_cache_made()  # made in the background: not in the window
                await until_warm(scheduler.pool)
                sampler.baseline()
                zygotes = [zygote_of(os.getpid(), kind) for kind in (DRIVER_ZYGOTE, WORKER_ZYGOTE)]
                zygotes_began = [reaped_and_own(pid) if pid is not None else None for pid in zygotes]
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
                zygotes_ended = [reaped_and_own(pid) if pid is not None else None for pid in zygotes]
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
            drivers, workers_reaped = (
                ended.since(began) if began is not None and ended is not None else None
                for began, ended in zip(zygotes_began, zygotes_ended, strict=True)
            )
            work = SchedulerWork(
                loop=loop, bench=bench, activity=counted, drivers=drivers, workers=workers_reaped
            )
            per_run = report(label, count, took, sampler, "scheduler process (pool, store)", work, workers)
    return label, per_run


async def reused_cpu(tree: Path, url: str, count: int, workers: int) -> tuple[str, float]:
    """The reused-worker release of ``tree``, in a child process: its CPU from its workers being up."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).parent / "_tree_runs.py"), url, str(count), str(workers),
        json.dumps(STEPS), "--handshake",
        env=tree_environment(tree), cwd=tempfile.gettempdir(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    with CpuSampler(group=GROUP) as sampler:
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
    label = f"reused workers ({tree}), {workers} worker(s)"
    return label, report(label, count, float(done[1]), sampler, "this process", at_once=workers)


async def bare_cpu(url: str, count: int, at_once: int, *, plain: bool = False) -> float:
    """The bare script's CPU per run with ``at_once`` browsers at a time, kept in :data:`_bare`; with
    ``plain``, the plain script's (Playwright's own launch flags), returned and kept apart."""
    with CpuSampler(group=GROUP) as sampler:
        began = time.perf_counter()
        await bare_playwright(url, count, at_once=at_once, plain=plain)
        took = time.perf_counter() - began
    script = "plain Playwright script (its own flags), " if plain else "bare Playwright script, "
    label = script + ("one browser at a time" if at_once == 1 else f"{at_once} at once")
    per_run = report(label, count, took, sampler, "script's Python", at_once=at_once, compared=not plain)
    if not plain:
        _bare[at_once] = per_run
    return per_run


def arguments() -> argparse.ArgumentParser:
    """The command line: every option's default is what ``nox -s bench`` measures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sandbox", default="bubblewrap,off" if bubblewrap_works() else "off")
    parser.add_argument(
        "--driver-snapshot", default="on", help="on, off, or on,off to compare in one session"
    )
    parser.add_argument("--start", default="zygote", help="how workers come to exist: zygote, exec, or both")
    parser.add_argument("--reused-tree", type=Path, help="a checkout of the release with reused workers")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of it all, in turn: the machine drifts between them"
    )
    return parser


async def main() -> None:
    args = arguments().parse_args()
    with GROUP:
        await measure(args)


async def measure(args: argparse.Namespace) -> None:
    """In each round the bare script, then each configuration asked for; then each configuration's
    median ratio over the rounds against issue 31's item 2 (at most the bare script's CPU per run at
    the same concurrency). Everything runs in this process's control group."""
    runner, url = await serve_page()
    ratios: dict[str, list[float]] = {}
    to_plain: dict[str, list[float]] = {}
    try:
        await bare_playwright(url, 2)
        for round_ in range(1, args.rounds + 1):
            if args.rounds > 1:
                print(f"-- round {round_} of {args.rounds}")
            _bare.clear()
            for at_once in sorted({1, args.workers}):
                await bare_cpu(url, args.scenarios, at_once)
            plain = await bare_cpu(url, args.scenarios, args.workers, plain=True)
            measured = []
            if args.reused_tree:
                measured.append(await reused_cpu(args.reused_tree, url, args.scenarios, args.workers))
            for sandbox in args.sandbox.split(","):
                for snapshot in args.driver_snapshot.split(","):
                    for start in args.start.split(","):
                        config = (url, args.scenarios, args.workers, sandbox, snapshot, start)
                        measured.append(await scenariokit_cpu(*config))
            for label, per_run in measured:
                ratios.setdefault(label, []).append(per_run / _bare[args.workers])
                to_plain.setdefault(label, []).append(per_run / plain)
    finally:
        await runner.cleanup()
    print(f"CPU per run against the bare script's {args.workers} at once, over {args.rounds} round(s):")
    for label, each in ratios.items():
        print(f"  {label}: {ceiling_line(each)}")
    print(f"and against the plain script's {args.workers} at once (Playwright's own flags, no target):")
    for label, each in to_plain.items():
        spread = f" ({min(each):.2f}x-{max(each):.2f}x)" if len(each) > 1 else ""
        print(f"  {label}: median {statistics.median(each):.2f}x{spread}")


def ceiling_line(ratios: list[float], at_most: float = 1.0) -> str:
    """``median 0.98x (0.95x-1.02x); target <= 1.00x: met`` for the ratios of the rounds."""
    median = statistics.median(ratios)
    spread = f" ({min(ratios):.2f}x-{max(ratios):.2f}x)" if len(ratios) > 1 else ""
    verdict = "met" if median <= at_most else "NOT met"
    return f"median {median:.2f}x{spread}; target <= {at_most:.2f}x: {verdict}"


if __name__ == "__main__":
    asyncio.run(main())
