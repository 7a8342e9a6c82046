"""Seconds for N three-step runs through the scenariokit of another source tree (``bench/runs.py
--reused-tree``): the release before one-run workers, measured by the same steps in the same run.

Started by ``bench/runs.py`` with that tree's ``src`` as ``PYTHONPATH``; it imports nothing of this
tree, uses only what both trees offer (``open_kit``, the services, ``start_runner``) and prints the
seconds as its last line.

    PYTHONPATH=<tree>/src python bench/_tree_runs.py URL COUNT WORKERS STEPS_JSON [--handshake]
        [--browser-args JSON] [--warm] [--left-out]

With ``--handshake`` (``bench/cpu.py``) it prints ``ready`` once its workers are up and waits for a line
on its standard input before it queues the runs, then prints ``done SECONDS`` once they are over and
waits for another line before it closes, so the caller's CPU window holds the runs alone.

With ``--browser-args`` (a JSON list) every browser that tree launches gets those flags too, where
its own defaults lack them: the caller passes its own tree's launch flags, so the two trees' runs
differ in their workers alone.

``bench/runs.py --as-user NAME`` starts this script as an ordinary user (``runuser``) with this very
tree on ``PYTHONPATH``, so that it measures what ``bench/runs.py`` measures in its own process, only
as that user. For that, ``--warm`` waits before the runs as ``bench/runs.py`` does (until the pool's
driver cache is made and every worker is warm) rather than a fixed two seconds, and ``--left-out``
prints ``left-out JSON`` (what the pool could not give its workers, ``/health``'s ``leftOut``) on the
line before the seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import pluggy

import scenariokit
from scenariokit.domain.model import RunStatus

# the plugins installed beside this tree's scenariokit (webhooks) import what the other tree may lack
pluggy.PluginManager.load_setuptools_entrypoints = lambda self, group, name=None: 0  # type: ignore[method-assign]

try:  # where each tree keeps the run query
    from scenariokit.formats.queries import RunQuery
except ImportError:
    from scenariokit.queries import RunQuery  # type: ignore[no-redef]


async def seconds_for(
    url: str,
    count: int,
    workers: int,
    steps: list[str],
    handshake: bool = False,
    warm: bool = False,
    left_out: bool = False,
) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit.open_kit(f"sqlite:///{Path(tmp) / 'bench.db'}", workers=workers) as kit:
            env = await kit.environments.create({"name": "bench", "data": {"url": url}})
            scenarios = [
                await kit.scenarios.create(
                    {"name": f"bench {i}", "steps": [{"execCode": code} for code in steps]}
                )
                for i in range(count)
            ]
            scheduler = await kit.start_runner()
            if warm:  # as bench/runs.py waits: only this tree and those after it have these
                from _shared import until_warm

                await scheduler.pool.node_cache_made()
                await until_warm(scheduler.pool)
            else:
                await asyncio.sleep(2)  # the workers' first browsers are up
            if handshake:
                print("ready", flush=True)
                await asyncio.to_thread(sys.stdin.readline)
            began = time.perf_counter()
            runs = [
                await kit.runs.create({"scenarioId": str(s.id), "environmentId": str(env.id)})
                for s in scenarios
            ]
            waiting = RunQuery(status=RunStatus.IN_PROGRESS, limit=1)
            while (await kit.runs.list(waiting)).total:  # noqa: ASYNC110 - the store is what we watch
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - began
            if handshake:  # the caller's window ends here, before the kit is closed
                print(f"done {elapsed}", flush=True)
                await asyncio.to_thread(sys.stdin.readline)
            details = [await kit.runs.get(run.id) for run in runs]
            if left_out:
                print("left-out", json.dumps(scheduler.pool.left_out), flush=True)
    failed = [d.run for d in details if d.run.status is not RunStatus.PASS]
    if failed:
        raise SystemExit(f"{len(failed)} runs did not pass: {failed[0].error}")
    return elapsed


def add_browser_args(extra: list[str]) -> None:
    """Have this tree's pool hand its workers a browser that launches with ``extra`` as well."""
    import attrs

    from scenariokit.runner.parent import executor
    from scenariokit.runner.worker import browser

    missing = tuple(arg for arg in extra if arg not in browser.DEFAULT_ARGS)
    discover = executor.discover_browser

    def discover_with_args(*args: object, **kwargs: object) -> browser.BrowserConfig:
        config = discover(*args, **kwargs)  # type: ignore[arg-type]
        return attrs.evolve(config, args=(*config.args, *missing))

    executor.discover_browser = discover_with_args  # type: ignore[assignment]


if __name__ == "__main__":
    url, count, workers, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
    handshake = "--handshake" in sys.argv[5:]
    if "--browser-args" in sys.argv[5:]:
        add_browser_args(json.loads(sys.argv[sys.argv.index("--browser-args") + 1]))
    warm, left_out = "--warm" in sys.argv[5:], "--left-out" in sys.argv[5:]
    print(asyncio.run(seconds_for(url, count, workers, steps, handshake, warm, left_out)))
