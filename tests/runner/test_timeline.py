"""A run's timings are computed in the scheduler from the worker's marks, its own clocks and the steps."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from scenariokit.domain.job import RUN_MARKS, BrowserClosed, RunFinished
from scenariokit.domain.model import StepResult, StepStatus, StepTiming, utcnow
from scenariokit.runner.parent.timeline import RunTimeline, close_ms, with_close


def at(start: datetime, ms: int) -> datetime:
    return start + timedelta(milliseconds=ms)


def test_each_phase_runs_from_one_mark_to_the_next() -> None:
    t0 = utcnow()
    first, second = uuid.uuid4(), uuid.uuid4()
    outcome = RunFinished(
        status="fail",
        error=None,
        step_results=(
            StepResult(first, 1, StepStatus.PASS, started_at=at(t0, 100), duration_ms=30),
            StepResult(second, 2, StepStatus.FAIL, started_at=at(t0, 130), duration_ms=20),
            StepResult(step_id=uuid.uuid4(), order=3, status=StepStatus.SKIPPED),
        ),
        started_at=at(t0, 12),
        finished_at=at(t0, 150),
        marks=dict(zip(RUN_MARKS, (at(t0, 12), at(t0, 40), at(t0, 100), at(t0, 155)), strict=True)),
    )
    timeline = RunTimeline(created_at=t0, claim_started=at(t0, 3), claimed=at(t0, 10))
    with timeline.store_write():
        pass

    timings = timeline.timings(outcome)

    assert (timings.queued_ms, timings.claim_ms, timings.job_to_worker_ms) == (3, 7, 2)
    assert (timings.browser_ready_ms, timings.context_and_page_ms) == (28, 60)
    assert (timings.steps_ms, timings.after_steps_ms) == (50, 5)
    assert timings.steps == (StepTiming(first, 1, 30), StepTiming(second, 2, 20))  # skipped steps did not run
    assert timings.store_writes_ms is not None and timings.store_writes_ms >= 0
    assert timings.browser_close_ms is None

    closed = BrowserClosed(run_id=uuid.uuid4(), started_at=at(t0, 160), finished_at=at(t0, 195))
    assert close_ms(closed) == 35 and with_close(timings, closed).browser_close_ms == 35


def test_an_outcome_without_worker_marks_leaves_the_worker_phases_unknown() -> None:
    """A worker killed at its time limit reports nothing: the parent decides the outcome, unmarked."""
    t0 = utcnow()
    outcome = RunFinished(status="fail", error=None, step_results=(), started_at=t0, finished_at=t0)

    timings = RunTimeline(created_at=t0, claim_started=t0, claimed=at(t0, 4)).timings(outcome)

    assert (timings.queued_ms, timings.claim_ms, timings.store_writes_ms) == (0, 4, 0)
    assert timings.job_to_worker_ms is None and timings.browser_ready_ms is None
    assert timings.context_and_page_ms is None and timings.after_steps_ms is None
    assert timings.steps_ms is None and timings.steps == ()


def test_clocks_a_little_apart_never_give_a_negative_phase() -> None:
    t0 = utcnow()
    outcome = RunFinished(
        status="pass",
        error=None,
        step_results=(),
        started_at=t0,
        finished_at=t0,
        marks={"received": at(t0, -2)},  # the worker's stamp came a hair before the scheduler's
    )

    timings = RunTimeline(created_at=t0, claim_started=t0, claimed=t0).timings(outcome)

    assert timings.job_to_worker_ms == 0
