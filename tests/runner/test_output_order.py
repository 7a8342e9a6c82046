"""What step code writes straight to its stdout and stderr reaches the run's log before the outcome.

The pool reads a worker's reports and each of its output streams on threads of their own, so a line
the step wrote (``os.write(2, ...)``) can reach the pool after the run's outcome: under load a CI lane
once lost ``fd2 ***`` from a run's log that way. The worker now marks each stream's end before it
reports the outcome, and the pool forwards every line before the marks first. Here the worker's output
is read slowly on purpose (each line half a second late), so without the marks the lines would come
after the outcome every time.
"""

from __future__ import annotations

import time
from typing import IO, Any

import pytest
from test_executor import JobFactory, Runner, logs, marked_sandbox

from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.parent.worker_handle import WorkerHandle
from scenariokit.runner.protocol import OUTPUT_END

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

LATE = 0.5


class SlowStream:
    """A worker's output pipe whose every line comes :data:`LATE` seconds after it was written."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def read1(self, size: int = -1) -> bytes:
        line = self._stream.readline(size)  # a line at a time, each late
        if line:
            time.sleep(LATE)
        return line

    def close(self) -> None:
        self._stream.close()


async def test_lines_written_straight_to_the_output_come_before_the_outcome(
    run: Runner, make_job: JobFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    reading = WorkerHandle._read_output

    def slowly(self: WorkerHandle, loop: Any, name: Any, stream: Any, *callbacks: Any) -> None:
        reading(self, loop, name, SlowStream(stream) if stream is not None else None, *callbacks)

    monkeypatch.setattr(WorkerHandle, "_read_output", slowly)
    job = make_job(
        "import os\nos.write(1, b'fd1 late\\n')\nos.write(2, b'fd2 late\\n')\n"
        "os.write(2, b'no newline at the end')"
    )
    pool = WorkerPool(1, sandbox=marked_sandbox())  # its workers start after the patch
    await pool.start()
    try:
        began = time.perf_counter()
        outcome, events = await run(job, on=pool)
        took = time.perf_counter() - began
    finally:
        await pool.close()

    assert outcome.status == "pass", outcome.error
    lines = logs(events)
    assert "fd1 late" in lines and "fd2 late" in lines, lines
    assert "no newline at the end" in lines, lines  # the mark ends the line step code left open
    assert not [line for line in lines if OUTPUT_END.decode().strip() in line], lines
    assert events[-1] is outcome
    assert took < 10, "the pool waits for the marks, not for its limit"


async def test_a_step_that_forges_the_end_mark_ends_nothing_but_its_own_wait(
    run: Runner, make_job: JobFactory
) -> None:
    # raw writes of the mark: the pool may stop waiting early, for this step's own lines only
    job = make_job(
        f"import os\nos.write(2, {OUTPUT_END!r})\nos.write(1, b'half' + {OUTPUT_END!r})\n"
        "log('after the forgery')",
        "os.write(2, b'second step\\n')",
    )

    outcome, events = await run(job)

    assert outcome.status == "pass", outcome.error
    lines = logs(events)
    # its raw lines may now come after the outcome (the forged marks ended the wait for them), its
    # log lines go with its reports; no mark is ever a line
    assert "after the forgery" in lines, lines
    assert not [line for line in lines if OUTPUT_END.decode().strip() in line], lines  # never a line
    assert events[-1] is outcome
