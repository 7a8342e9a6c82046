"""What a run's way to its worker costs the event loop it shares with a server's requests.

Each time a coroutine waits on a future, a task or a thread, it resumes on a later turn of the event
loop; on a busy server each turn waits behind the requests served meanwhile (docs/deployment.md, "Runs
under API load"). So what is free is taken without waiting, and a worker's start hands its blocking
work to threads in as few calls as it can. These run on the session's shared pool with real Chromium.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from scenariokit.domain.job import RunEvent, RunJob
from scenariokit.runner.parent import worker_handle as worker_handle_module
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.parent.worker_handle import WorkerHandle

JobFactory = Callable[..., RunJob]

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


class LoopTurns:
    """Counts the event loop's turns: a callback that schedules itself again on each one."""

    def __init__(self) -> None:
        self.count = 0
        self._next = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._next = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._next.cancel()


@pytest_asyncio.fixture(loop_scope="session")
async def loop_turns() -> AsyncIterator[LoopTurns]:
    turns = LoopTurns()
    yield turns
    turns.stop()


async def test_a_run_takes_a_free_slot_and_a_warm_worker_in_the_same_turn_of_the_loop(
    full_pool: WorkerPool, make_job: JobFactory, loop_turns: LoopTurns, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent_at: list[int] = []
    send = WorkerHandle.send

    async def counted_send(self: WorkerHandle, command: Any) -> bool:
        sent_at.append(loop_turns.count)
        return await send(self, command)

    monkeypatch.setattr(WorkerHandle, "send", counted_send)

    async def ignore(event: RunEvent) -> None:
        return None

    job = make_job("print('hello')")
    began = loop_turns.count
    outcome = await full_pool.execute(job, ignore)

    assert outcome.status == "pass", outcome.error
    assert sent_at == [began], "the run reached its worker only after turns of the loop"


async def test_a_workers_start_hands_its_blocking_work_to_threads_in_two_calls(
    full_pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before its process starts, the user id, the folder and the control group in one call; after
    it, the sandbox's set-up and the zygote's fork in another."""
    launch = full_pool.launch
    assert launch is not None
    worker = WorkerHandle(launch)
    to_thread = asyncio.to_thread
    handed: list[str] = []
    starting: asyncio.Task[Any] | None = None

    def counted(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if asyncio.current_task() is starting:  # asked by the start itself (it may await it elsewhere)
            handed.append(getattr(function, "__name__", repr(function)))
        return to_thread(function, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)

    def ignore(*_: object) -> None:
        return None

    starting = asyncio.ensure_future(worker.start(ignore, ignore))
    try:
        await starting
    finally:
        monkeypatch.undo()
        await asyncio.to_thread(worker.kill)

    assert worker.started
    assert handed == (["_prepare", "_fork_in"] if launch.zygote is not None else ["_prepare"])


async def test_a_start_cancelled_while_a_thread_prepares_it_leaves_nothing_behind(
    full_pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread goes on after the cancel: its folder (and lease, as root under bubblewrap) are undone."""
    launch = full_pool.launch
    assert launch is not None
    make_run_dir = worker_handle_module.make_run_dir
    made: list[Path] = []

    def slow_run_dir(*args: Any) -> Path:
        time.sleep(0.3)  # the cancel comes meanwhile
        made.append(make_run_dir(*args))
        return made[-1]

    monkeypatch.setattr(worker_handle_module, "make_run_dir", slow_run_dir)
    worker = WorkerHandle(launch)

    def ignore(*_: object) -> None:
        return None

    starting = asyncio.ensure_future(worker.start(ignore, ignore))
    await asyncio.sleep(0.05)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    for _ in range(40):  # had the start not waited for its thread, the folder would come after it
        if made:
            break
        await asyncio.sleep(0.05)

    assert len(made) == 1 and not made[0].exists(), "its folder is removed"
    assert worker.user is None or not worker.user.held, "its user id is given back"
