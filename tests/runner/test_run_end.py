"""A finished run's worker leaves its browser to the pool's kill, and closes it itself only without one.

The pool kills a finished run's worker and everything it started as soon as it has the outcome (that
kill is the run's browser close in its timings). The worker used to begin a graceful close of its
browser in that moment: CPU the next run starts on, and, with the network service and the GPU service
in the browser's own process, a Chromium that ended on a CHECK (SIGTRAP) about one close in six on a
busy machine. Here the pool's kill is held back: the browser stays up while the worker waits for it,
and once :data:`POOL_KILL_WAIT_SECONDS` have passed the worker closes the browser and exits by itself,
as it must for a pool that does not come.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from test_executor import JobFactory, Runner, marked_sandbox

from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.parent.worker_handle import WorkerHandle
from scenariokit.runner.worker.process import POOL_KILL_WAIT_SECONDS

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_a_finished_runs_browser_waits_for_the_pools_kill_then_closes_without_one(
    run: Runner,
    make_job: JobFactory,
    browsers_started_by: Callable[[int], set[int]],
    wait_until_gone: Callable[..., set[int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = WorkerPool._stop
    finished: list[WorkerHandle] = []
    release = asyncio.Event()

    async def held_back(self: WorkerPool, worker: WorkerHandle, run_id: uuid.UUID | None = None) -> Any:
        finished.append(worker)
        await release.wait()  # the pool's kill comes only when the test says so
        return await stop(self, worker, run_id)

    monkeypatch.setattr(WorkerPool, "_stop", held_back)
    pool = WorkerPool(1, sandbox=marked_sandbox())
    await pool.start()
    try:
        outcome, _ = await run(make_job("await page.goto(helpers.getEnvUrl())"), pool)
        assert outcome.status == "pass", outcome.error
        ended = time.monotonic()
        while not finished:  # the pool's stop is a task of its own, started with the outcome
            await asyncio.sleep(0.01)
        worker = finished[0]
        assert worker.pid is not None
        browsers = browsers_started_by(worker.pid)
        assert browsers, "the run's browser should still be up when its outcome is in"

        await asyncio.sleep(POOL_KILL_WAIT_SECONDS / 2)  # a graceful close takes well under a second
        assert browsers_started_by(worker.pid) == browsers, "the worker closed its browser before the pool"

        # then it closes its browser and exits, its pool's kill still held back
        left = POOL_KILL_WAIT_SECONDS - (time.monotonic() - ended)
        assert await asyncio.to_thread(wait_until_gone, browsers | {worker.pid}, left + 15) == set()
    finally:
        release.set()
        await pool.close()
