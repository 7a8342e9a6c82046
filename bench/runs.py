"""Runs per minute: the same three-step scenarios through scenariokit and as a bare Playwright script.

The bare script is what a user writes after ``playwright install``: for each scenario launch a fresh
headless shell, run the three steps, close it. It launches with scenariokit's own browser flags (no
Chromium zygote, the GPU service in the browser process), the stricter baseline the targets are held to;
the plain script, the same launched with Playwright's own flags as the user who writes it gets them, is
measured at each concurrency too, and each configuration's ratio to it printed beside. The floor is the
same steps in fresh contexts of one warm browser (no launch at all). scenariokit runs the same scenarios
from its store through its scheduler and worker processes, every run in a browser nobody used before,
with 1 and 2 workers (``--workers`` for others) and its default for this machine. All are measured in
this one process run, against the same page on 127.0.0.1, with the browser discovery finds (the headless
shell), and printed as ratios to the bare script. For each scenariokit configuration the summed run
timelines show where the time went, and the peak memory of one run's process tree (worker, driver,
browsers) is reported. Each scenariokit configuration is measured with the bubblewrap sandbox (when it
works here) and without it (``SCENARIOKIT_SANDBOX=off``); every run has a worker process of its own
either way.

With ``--reused-tree PATH`` (a checkout of the release before one-run workers, whose workers served
run after run), that tree's scenariokit runs the same scenarios with the same worker counts in a child
process of this run, so the cost of one-run sandboxed workers is a ratio measured side by side. That
release is commit c7b9a1e (headless shell and timelines, workers reused): ``git worktree add --detach
/tmp/reused c7b9a1e`` makes the checkout. That tree is measured twice: as it is (what its users had),
and with this tree's browser launch flags added (``DEFAULT_ARGS``), so that the ratio of one-run
workers to those is the cost of the sandbox and one-run workers alone, with the same browser work.

With ``--as-user NAME`` (run as root), every scenariokit configuration is measured a second time,
right after root's, with the scenariokit side running as the ordinary user ``NAME``: the same
mechanism as ``--reused-tree`` (``_tree_runs.py`` in a child process, here started with ``runuser -u
NAME --``), importing this very tree, which that user must be able to read, through ``PYTHONPATH``.
Its interpreter is ``--user-python`` (default ``~NAME/venv/bin/python``): a venv that user owns on
the distribution's ``/usr/bin/python3``, since an ordinary user cannot read ``/root``, where pyenv's
interpreters live; it needs scenariokit's dependencies (``pip install -e '<tree>[server]'`` into it
as that user installs them; the tree on ``PYTHONPATH`` comes first either way). Such a service's pool
leaves out what that user cannot have (both zygotes, control groups): the rows give its runs/min, its
ratio to root's same configuration and to the bare script, and what its pool reported left out
(``/health``'s ``leftOut``). Only 127.0.0.1 is used, as for root.

    python bench/runs.py [--scenarios 50] [--workers 1,2] [--rounds 3] [--reused-tree PATH]
        [--as-user NAME [--user-python PATH]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
from _shared import (
    STEPS,
    MemoryPeak,
    bare_playwright,
    fresh_context_floor,
    memory_peak,
    per_minute,
    serve_page,
    target_line,
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


@attrs.frozen
class OtherUser:
    """An ordinary user the scenariokit side runs as (``--as-user``), with a Python that user can run."""

    name: str
    python: Path

    def command(self) -> list[str]:
        """The start of the command line that runs that user's Python as that user."""
        # found on this process's PATH: the child's environment, which runuser is given, has no sbin
        return [shutil.which("runuser") or "/usr/sbin/runuser", "-u", self.name, "--", str(self.python)]

    def environment(self, tree: Path, sandbox: str) -> dict[str, str]:
        """A small environment of that user's own, nothing of root's: ``tree`` on ``PYTHONPATH``."""
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": pwd.getpwnam(self.name).pw_dir,
            "LANG": "C.UTF-8",
            "PYTHONPATH": tree_environment(tree)["PYTHONPATH"],
            SANDBOX_ENV: sandbox,
        }


def other_user(name: str, python: Path | None) -> OtherUser:
    """The user ``--as-user`` names, checked: this process must be root, that user must not be."""
    if os.geteuid() != 0:
        raise SystemExit("--as-user needs this bench to run as root (it starts the child with runuser)")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SystemExit(f"--as-user: no user {name!r} here (make one with: useradd -m {name})") from None
    if entry.pw_uid == 0:
        raise SystemExit(f"--as-user: {name!r} is root; name an ordinary user")
    return OtherUser(name, python or Path(entry.pw_dir) / "venv" / "bin" / "python")


async def through_tree(
    tree: Path,
    url: str,
    count: int,
    workers: int,
    browser_args: Sequence[str] = (),
    *,
    user: OtherUser | None = None,
    sandbox: str = "off",
) -> tuple[float, list[str]]:
    """Seconds for ``count`` runs with ``workers`` workers through the scenariokit of ``tree``, its
    browsers launched with ``browser_args`` as well.

    With ``user`` the child runs as that user, waits for its pool as :func:`through_scenariokit`
    does, with the sandbox ``sandbox``, and also returns what its pool left out; otherwise that list
    is empty.
    """
    added = ["--browser-args", json.dumps(list(browser_args))] if browser_args else []
    if user is None:
        command, env = [sys.executable], tree_environment(tree)
    else:
        command, env = user.command(), user.environment(tree, sandbox)
        added += ["--warm", "--left-out"]
    child = await asyncio.create_subprocess_exec(
        *command, str(BENCH / "_tree_runs.py"), url, str(count), str(workers), json.dumps(STEPS),
        *added, env=env, cwd=tempfile.gettempdir(), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await child.communicate()
    who = f" as {user.name}" if user else ""
    if child.returncode != 0:
        raise SystemExit(f"the runs through {tree}{who} failed (exit {child.returncode})")
    lines = out.decode().splitlines()
    left_out = [json.loads(line.removeprefix("left-out ")) for line in lines if line.startswith("left-out ")]
    return float(lines[-1]), left_out[-1] if left_out else []


def arguments() -> argparse.ArgumentParser:
    """The command line: every option's default is what ``nox -s bench`` measures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    parser.add_argument(
        "--rounds", type=int, default=3, help="measure everything this many times, in rotated order"
    )
    parser.add_argument(
        "--reused-tree", type=Path, help="a checkout of the release with reused workers, measured alongside"
    )
    parser.add_argument(
        "--as-user", metavar="NAME", help="also measure scenariokit run as this ordinary user (needs root)"
    )
    parser.add_argument(
        "--user-python", type=Path, help="the Python --as-user runs (default: ~NAME/venv/bin/python)"
    )
    return parser


async def main() -> None:
    args = arguments().parse_args()
    user = other_user(args.as_user, args.user_python) if args.as_user else None
    default_workers = Settings().workers
    counts = sorted({int(n) for n in args.workers.split(",")} | {default_workers})
    browser = discover_browser()
    sandboxes = ["bubblewrap", "off"] if bubblewrap_works() else ["off"]
    configs: list[Config] = [(n, sandbox) for n in counts for sandbox in sandboxes]
    labels: dict[object, str] = {
        "bare": "bare Playwright script (fresh browser each)",
        **{("bare", n): f"bare script, {n} browsers at once" for n in counts if n > 1},
        **{
            ("plain", n): "plain script (its own flags), " + ("one at a time" if n == 1 else f"{n} at once")
            for n in counts
        },
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
    if user:
        labels |= {
            ("user", *config): f"as {user.name}, {config[0]} worker(s), sandbox {config[1]}"
            for config in configs
        }
    left_out: dict[str, set[str]] = {sandbox: set() for sandbox in sandboxes}
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
            for n in counts:
                if n > 1:
                    seconds[("bare", n)] = await bare_playwright(url, args.scenarios, at_once=n)
            for n in counts:
                seconds[("plain", n)] = await bare_playwright(url, args.scenarios, at_once=n, plain=True)
            seconds["floor"] = await fresh_context_floor(url, args.scenarios)
            for config in configs[shift:] + configs[:shift]:
                took, timings, _ = await through_scenariokit(url, args.scenarios, *config)
                seconds[config] = took
                timelines[config] += timings
                if user:  # right after root's, so that their ratio is less exposed to the drift
                    took, notes = await through_tree(
                        BENCH.parent, url, args.scenarios, config[0], user=user, sandbox=config[1]
                    )
                    seconds[("user", *config)] = took
                    left_out[config[1]].update(notes)
                if args.reused_tree and config[1] == sandboxes[-1]:  # once per worker count
                    reused, _ = await through_tree(args.reused_tree, url, args.scenarios, config[0])
                    seconds[("reused", config[0])] = reused
                    seconds[("reused+flags", config[0])] = (
                        await through_tree(args.reused_tree, url, args.scenarios, config[0], DEFAULT_ARGS)
                    )[0]
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
    print("  against the bare script at the same concurrency (target >= 1.00x) and one at a time (>= 1.50x):")
    for n, sandbox in configs:
        same = "bare" if n == 1 else ("bare", n)
        paired = [mine / base for mine, base in zip(rates[(n, sandbox)], rates[same], strict=True)]
        same_line = target_line("same concurrency", statistics.median(paired), 1.0)
        alone_line = target_line("one at a time", statistics.median(ratios[(n, sandbox)]), 1.5)
        plain = statistics.median(
            mine / base for mine, base in zip(rates[(n, sandbox)], rates[("plain", n)], strict=True)
        )
        plain_line = f"the plain script at the same concurrency: {plain:.2f}x"
        print(f"    {labels[(n, sandbox)]:46s} {same_line}; {alone_line}; {plain_line}")
    if "bubblewrap" in sandboxes:
        for n in counts:
            on, off = statistics.median(rates[(n, "bubblewrap")]), statistics.median(rates[(n, "off")])
            print(f"  sandbox on/off with {n} worker(s): {on / off:.2f}")
    if user:
        for n, sandbox in configs:
            paired = [u / r for u, r in zip(rates[("user", n, sandbox)], rates[(n, sandbox)], strict=True)]
            rounds = f" (rounds: {', '.join(f'{r:.2f}' for r in paired)})" if args.rounds > 1 else ""
            print(
                f"  as {user.name} against root, {n} worker(s), sandbox {sandbox}: "
                f"{statistics.median(paired):.2f}{rounds}"
            )
        for sandbox in sandboxes:
            said = "; ".join(sorted(left_out[sandbox])) or "nothing"
            print(f"  as {user.name}, sandbox {sandbox}, the pool left out: {said}")
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
        peak = peaks[(n, sandbox)]
        print(
            f"scenariokit, {n} worker(s), sandbox {sandbox}: peak memory of one run's process tree "
            f"{peak.describe()}; {peak.against_target()}"
        )
        for line in timeline_lines(timelines[(n, sandbox)]):
            print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
