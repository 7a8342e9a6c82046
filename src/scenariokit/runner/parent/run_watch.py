"""The parent's clock on a run: which limit applies now, and what the run's outcome is if it passes.

The worker stops cooperative step code at its limits itself, with a screenshot and a proper result.
These limits are slightly longer (a small grace), and catch what the worker cannot: code that never
yields, a hung browser call, a worker that stopped responding to a cancel.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime

from scenariokit.domain.job import RunEvent, RunFinished, RunJob, StepFinished, StepJob, StepStarted
from scenariokit.domain.model import RunError, RunErrorKind, StepResult, StepStatus, utcnow
from scenariokit.runner.protocol import (
    LIMIT_TOLERANCE_SECONDS,
    failed_run,
    finished_run,
    run_timeout_message,
    seconds,
    step_label,
    step_timeout_message,
)
from scenariokit.runner.worker.stepcode import mask_secrets

#: added to a step's and the run's limit before the parent steps in
LIMIT_GRACE_SECONDS = 1.5
#: how long a cancelled run may take to stop by itself
CANCEL_GRACE_SECONDS = 0.75
#: from sending the job to the first step: getting a browser, a context and a page
SETUP_LIMIT_SECONDS = 60.0
#: after the last step: screenshot, trace and saved session
FINISH_LIMIT_SECONDS = 30.0


class RunWatch:
    """Follows one run's events and knows its current deadline."""

    def __init__(self, job: RunJob) -> None:
        self.job = job
        self.started_at = utcnow()
        self._last_order = max((step.order for step in job.steps), default=0)
        self._steps = {step.id: step for step in job.steps}
        self._done: dict[uuid.UUID, StepResult] = {}
        self._step: StepJob | None = None
        self._step_started_at: datetime | None = None
        self._finishing = False
        now = time.monotonic()
        self._setup_deadline: float | None = now + SETUP_LIMIT_SECONDS
        self._finish_deadline: float | None = None
        self._step_deadline: float | None = None
        self._run_deadline: float | None = None
        self._cancel_deadline: float | None = None

    def observe(self, event: RunEvent) -> None:
        """Move the deadlines on with a worker's event."""
        now = time.monotonic()
        if isinstance(event, StepStarted):
            step = self._steps[event.step_id]
            self._step, self._step_started_at = step, event.at
            self._setup_deadline = None
            self._step_deadline = now + step.timeout_seconds + LIMIT_GRACE_SECONDS
            if self._run_deadline is None:
                self._run_deadline = now + self.job.run_timeout + LIMIT_GRACE_SECONDS
        elif isinstance(event, StepFinished):
            result = event.result
            self._done[result.step_id] = result
            self._step_deadline = None
            if result.status is StepStatus.FAIL or result.order == self._last_order:
                self._finishing = True
                self._run_deadline = None
                self._finish_deadline = now + FINISH_LIMIT_SECONDS

    def cancel_requested(self) -> None:
        """A cancel was sent: the run has a moment to stop by itself."""
        if self._cancel_deadline is None:
            self._cancel_deadline = time.monotonic() + CANCEL_GRACE_SECONDS

    def _deadlines(self) -> list[float]:
        candidates = (
            self._setup_deadline,
            self._finish_deadline,
            self._step_deadline,
            self._run_deadline,
            self._cancel_deadline,
        )
        return [deadline for deadline in candidates if deadline is not None]

    def seconds_left(self) -> float:
        """Seconds until the nearest deadline (never negative)."""
        now = time.monotonic()
        return max(0.0, min(self._deadlines(), default=now + SETUP_LIMIT_SECONDS) - now)

    def where(self) -> str:
        """Where the run is, for messages: ``during step 2 ("Log in")``."""
        if self._finishing:
            return "while finishing the run"
        if self._step is None:
            return "before the first step"
        if self._step.id in self._done:
            return f"after {step_label(self._step)}"
        return f"during {step_label(self._step)}"

    def overrun(self) -> tuple[RunErrorKind, str]:
        """Which limit passed, as the kind and message the run fails with."""
        now = time.monotonic()
        if self._cancel_deadline is not None and self._cancel_deadline <= now:
            return RunErrorKind.CANCELLED, f"run cancelled {self.where()}"
        step = self._step
        if step is not None and self._step_deadline is not None and self._run_deadline is not None:
            if self._run_deadline < self._step_deadline - LIMIT_TOLERANCE_SECONDS:
                return RunErrorKind.TIMEOUT, run_timeout_message(self.job, step)
            return RunErrorKind.TIMEOUT, step_timeout_message(step)
        if step is not None and self._run_deadline is not None:
            return RunErrorKind.TIMEOUT, run_timeout_message(self.job, step)
        if self._finishing:
            return (
                RunErrorKind.ERROR,
                f"the worker did not finish the run within {seconds(FINISH_LIMIT_SECONDS)}",
            )
        return RunErrorKind.ERROR, f"the worker did not start the run within {seconds(SETUP_LIMIT_SECONDS)}"

    def outcome(self, kind: RunErrorKind, message: str) -> RunFinished:
        """The run's outcome when the parent ends it: the current step fails, later ones are skipped."""
        step = self._step
        if step is not None and step.id not in self._done:
            return failed_run(
                self.job,
                self._done.values(),
                step,
                kind,
                message,
                started_at=self.started_at,
                step_started_at=self._step_started_at,
            )
        failed = next((r for r in self._done.values() if r.status is StepStatus.FAIL), None)
        error = RunError(
            kind=kind,
            message=mask_secrets(message, self.job.secrets),
            step_id=failed.step_id if failed else (step.id if step else None),
        )
        return finished_run(self.job, self._done.values(), self.started_at, error)
