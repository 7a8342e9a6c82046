"""A run's timeline: the scheduler's own marks plus the worker's, turned into :class:`RunTimings`.

The worker only stamps points it passes anyway (:data:`~scenariokit.domain.job.RUN_MARKS`, sent with the
outcome it reports); every phase is computed here, in the scheduler, from those stamps, its own claim
and store-write clocks and the step results. Worker and scheduler share the machine's wall clock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime

import attrs

from scenariokit.domain.job import BrowserClosed, RunFinished
from scenariokit.domain.model import RunTimings, StepTiming, utcnow


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    """Whole milliseconds from ``start`` to ``end``, never negative; None when either is unknown."""
    if start is None or end is None:
        return None
    return max(0, round((end - start).total_seconds() * 1000))


@attrs.define
class RunTimeline:
    """What the scheduler saw of one run, from the start of its claim."""

    created_at: datetime
    claim_started: datetime
    claimed: datetime = attrs.field(factory=utcnow)
    store_seconds: float = 0.0

    @contextlib.contextmanager
    def store_write(self) -> Iterator[None]:
        """Count the time of a store write made for this run while it executes."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.store_seconds += time.perf_counter() - began

    def timings(self, outcome: RunFinished) -> RunTimings:
        """The run's phases, from the claim to its outcome (the browser closes later: :func:`with_close`)."""
        marks = outcome.marks
        steps = tuple(
            StepTiming(step_id=r.step_id, order=r.order, duration_ms=r.duration_ms)
            for r in outcome.step_results
            if r.duration_ms is not None
        )
        first_step = min((r.started_at for r in outcome.step_results if r.started_at), default=None)
        return RunTimings(
            queued_ms=_ms(self.created_at, self.claim_started),
            claim_ms=_ms(self.claim_started, self.claimed),
            job_to_worker_ms=_ms(self.claimed, marks.get("received")),
            browser_ready_ms=_ms(marks.get("received"), marks.get("browserReady")),
            context_and_page_ms=_ms(marks.get("browserReady"), marks.get("pageReady")),
            steps_ms=_ms(first_step, outcome.finished_at) if steps else None,
            steps=steps,
            after_steps_ms=_ms(outcome.finished_at, marks.get("reported")),
            store_writes_ms=round(self.store_seconds * 1000),
        )


def close_ms(closed: BrowserClosed) -> int:
    """How long closing the run's browser took, in whole milliseconds."""
    return _ms(closed.started_at, closed.finished_at) or 0


def with_close(timings: RunTimings, closed: BrowserClosed) -> RunTimings:
    """The timings with the browser close the worker reported after the outcome."""
    return attrs.evolve(timings, browser_close_ms=close_ms(closed))
