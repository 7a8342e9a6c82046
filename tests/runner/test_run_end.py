"""A finished run's worker leaves its browser to the pool's kill, and closes it itself only without one;
so does a worker whose saved session is released, and the pool kills one holding a session when it closes.

The pool kills a finished run's worker and everything it started as soon as it has the outcome (that
kill is the run's browser close in its timings). The worker used to begin a graceful close of its
browser in that moment: CPU the next run starts on, and, with the network service and the GPU service
in the browser's own process, a Chromium that ended on a CHECK (SIGTRAP) about one close in six on a
busy machine. Here the pool's kill is held back: the browser stays up while the worker waits for it,
and once :data:`POOL_KILL_WAIT_SECONDS` have passed the worker closes the browser and exits by itself,
as it must for a pool that does not come. A session's browser, held after its run, ends the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from test_executor import JobFactory, Runner, marked_sandbox

from scenariokit.domain.job import SessionReleased
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.parent.worker_handle import WorkerHandle
from scenariokit.runner.worker.process import POOL_KILL_WAIT_SECONDS

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


@attrs.define
class HeldKill:
    """The pool's kill of a worker whose run or session is over, held back until :meth:`let_go`."""

    stopping: list[WorkerHandle] = attrs.field(factory=list)
    go: asyncio.Event = attrs.field(factory=asyncio.Event)

    def let_go(self) -> None:
        self.go.set()


@pytest.fixture
def held_kill(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldKill]:
    """Every worker the pool stops after a run or session waits for the test before it is killed
    (``stopping`` names them)."""
    held = HeldKill()
    stop = WorkerPool._stop

    async def held_back(self: WorkerPool, worker: WorkerHandle, *args: Any) -> Any:
        if not worker.used:  # a warm worker replaced (the pool's first ones, see docs/deployment.md)
            return await stop(self, worker, *args)
        held.stopping.append(worker)
        await held.go.wait()
        return await stop(self, worker, *args)

    monkeypatch.setattr(WorkerPool, "_stop", held_back)
    yield held
    held.let_go()


async def test_a_finished_runs_browser_waits_for_the_pools_kill_then_closes_without_one(
    run: Runner,
    make_job: JobFactory,
    browsers_started_by: Callable[[int], set[int]],
    wait_until_gone: Callable[..., set[int]],
    held_kill: HeldKill,
) -> None:
    finished = held_kill.stopping  # the pool's kill comes only when the test says so
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
        held_kill.let_go()
        await pool.close()


async def test_a_released_sessions_browser_waits_for_the_pools_kill_and_the_release_is_reported_after_it(
    run: Runner,
    make_job: JobFactory,
    browsers_started_by: Callable[[int], set[int]],
    wait_until_gone: Callable[..., set[int]],
    held_kill: HeldKill,
) -> None:
    stopping = held_kill.stopping
    released: list[tuple[SessionReleased, set[int]]] = []
    browsers: set[int] = set()

    async def remember(event: SessionReleased) -> None:
        released.append((event, wait_until_gone(browsers, 0)))  # those alive at the report

    pool = WorkerPool(1, session_keepalive=600, on_session_released=remember, sandbox=marked_sandbox())
    await pool.start()
    try:
        login = make_job("await page.goto(helpers.getEnvUrl())", save_session=True)
        outcome, _ = await run(login, pool)
        assert outcome.status == "pass", outcome.error
        assert pool.held_sessions() == [login.run_id]
        assert not stopping, "a worker holding a session stays"
        worker = next(w for w in pool._workers if login.run_id in w.sessions)
        assert worker.pid is not None
        browsers |= browsers_started_by(worker.pid)
        assert browsers, "the held session's browser should be up"

        releasing = asyncio.ensure_future(pool.release_session(login.run_id))
        while not stopping:  # the worker's report of the release is what retires it
            await asyncio.sleep(0.01)
        assert stopping == [worker]
        await asyncio.sleep(POOL_KILL_WAIT_SECONDS / 2)  # a graceful close takes well under a second
        assert browsers_started_by(worker.pid) == browsers, "the worker closed the session's browser itself"
        assert not released, "the release is reported once its browser is closed"

        held_kill.let_go()
        assert await releasing
        assert [event for event, _ in released] == [SessionReleased(run_id=login.run_id, reason="released")]
        assert released[0][1] == set(), "the browser should be dead when the release is reported"
        assert await asyncio.to_thread(wait_until_gone, browsers | {worker.pid}) == set()
    finally:
        held_kill.let_go()
        await pool.close()


async def test_closing_a_pool_kills_a_worker_holding_a_session_without_asking_it_to_stop(
    run: Runner,
    make_job: JobFactory,
    browsers_started_by: Callable[[int], set[int]],
    wait_until_gone: Callable[..., set[int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[WorkerHandle] = []
    shutdown = WorkerHandle.shutdown

    async def noted(self: WorkerHandle, grace: float) -> None:
        asked.append(self)
        await shutdown(self, grace)

    released: list[SessionReleased] = []

    async def remember(event: SessionReleased) -> None:
        released.append(event)

    monkeypatch.setattr(WorkerHandle, "shutdown", noted)
    pool = WorkerPool(1, session_keepalive=600, on_session_released=remember, sandbox=marked_sandbox())
    await pool.start()
    try:
        held = make_job("await page.goto(helpers.getEnvUrl())", save_session=True)
        outcome, _ = await run(held, pool)
        assert outcome.status == "pass", outcome.error
        browsers = set().union(*(browsers_started_by(pid) for pid in pool.worker_pids()))
        assert browsers, "the held session's browser and the warm worker's should be running"
    finally:
        await pool.close()

    assert asked == [], "neither the warm worker nor the one holding a session has anything to close in order"
    assert await asyncio.to_thread(wait_until_gone, browsers) == set()
    assert released == [SessionReleased(run_id=held.run_id, reason="worker stopped")]
