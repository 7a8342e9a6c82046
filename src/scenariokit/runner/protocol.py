"""What the pool and a worker process say to each other, and the run outcomes both sides build.

Commands go parent → worker, reports go worker → parent, all over one multiprocessing pipe. Every
message is plain picklable data. The worker runs step code, so what it sends is untrusted: the
parent reads reports with :func:`decode_report`, which rebuilds only the classes listed here (a
plain ``pickle.loads`` would let step code run code in the server). Outcomes are built here because a
run can end in the worker (a step failed) or in the parent (the worker had to be killed), and both
must read the same.
"""

from __future__ import annotations

import io
import pickle
import uuid
from collections.abc import Iterable
from datetime import datetime

import attrs

from scenariokit.domain.authoring import AuthoringReply, PageState
from scenariokit.domain.job import (
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    StepFinished,
    StepJob,
)
from scenariokit.domain.model import RunError, RunErrorKind, StepResult, StepStatus, skip_remaining, utcnow
from scenariokit.runner.worker.stepcode import SyntaxProblem, mask_secrets

# --- parent → worker -----------------------------------------------------------------------------


@attrs.frozen
class StartRun:
    """Execute this job in a fresh browser."""

    job: RunJob


@attrs.frozen
class CancelRun:
    """Stop the run, failing it with kind ``cancelled``."""

    run_id: uuid.UUID


@attrs.frozen
class ReleaseSession:
    """Close the browser held for this run's saved session."""

    run_id: uuid.UUID


@attrs.frozen
class Shutdown:
    """Close every browser and exit."""


@attrs.frozen
class StartAuthoring:
    """Hold a live authoring session: replay ``job``'s steps, then answer requests until shut down."""

    job: RunJob
    request: int


@attrs.frozen
class AuthoringExec:
    """Execute one piece of step code in the live page (the step's limit applies)."""

    request: int
    step: StepJob
    screenshot: bool = False


@attrs.frozen
class AuthoringLook:
    """Answer the page's state now."""

    request: int
    screenshot: bool = False


Command = StartRun | CancelRun | ReleaseSession | Shutdown | StartAuthoring | AuthoringExec | AuthoringLook


def plain_ids(job: RunJob) -> RunJob:
    """``job`` with plain ``uuid.UUID`` ids: a driver's own UUID type (asyncpg's) would come back in
    reports, which the parent decodes allowing only the standard classes."""
    return attrs.evolve(
        job,
        run_id=uuid.UUID(str(job.run_id)),
        scenario_id=uuid.UUID(str(job.scenario_id)),
        steps=tuple(attrs.evolve(step, id=uuid.UUID(str(step.id))) for step in job.steps),
    )


# --- worker → parent -----------------------------------------------------------------------------


@attrs.frozen
class WorkerReady:
    """The worker is in its own process group and Playwright is running."""

    pid: int


@attrs.frozen
class RunReport:
    """An event of the run the worker is executing."""

    run_id: uuid.UUID
    event: RunEvent


Report = WorkerReady | RunReport | SessionReleased | AuthoringReply

#: the largest report the parent reads (a saved session's storage state is the big one)
MAX_REPORT_BYTES = 64 * 1024 * 1024

_REPORT_CLASSES = {
    ("scenariokit.runner.protocol", "WorkerReady"),
    ("scenariokit.runner.protocol", "RunReport"),
    ("scenariokit.domain.job", "LogEvent"),
    ("scenariokit.domain.job", "StepStarted"),
    ("scenariokit.domain.job", "StepFinished"),
    ("scenariokit.domain.job", "ArtifactSaved"),
    ("scenariokit.domain.job", "SessionSaved"),
    ("scenariokit.domain.job", "RunFinished"),
    ("scenariokit.domain.job", "SessionReleased"),
    ("scenariokit.domain.authoring", "AuthoringReply"),
    ("scenariokit.domain.authoring", "PageState"),
    ("scenariokit.domain.model", "StepResult"),
    ("scenariokit.domain.model", "RunError"),
    ("scenariokit.domain.model", "RunErrorKind"),
    ("scenariokit.domain.model", "StepStatus"),
    ("datetime", "datetime"),
    ("datetime", "timezone"),
    ("datetime", "timedelta"),
    ("uuid", "UUID"),
    ("copyreg", "_reconstructor"),
    ("builtins", "object"),
}


class UnreadableReport(ValueError):
    """A worker sent something that is not a report (a bug, or step code writing to the pipe)."""


class _ReportUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _REPORT_CLASSES:
            raise UnreadableReport(f"a report may not hold {module}.{name}")
        return super().find_class(module, name)


def decode_report(data: bytes) -> Report:
    """A report from its pickled bytes, refusing every class a report does not use."""
    try:
        report = _ReportUnpickler(io.BytesIO(data)).load()
    except UnreadableReport:
        raise
    except Exception as exc:
        raise UnreadableReport(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(report, WorkerReady | RunReport | SessionReleased | AuthoringReply):
        raise UnreadableReport(f"not a report: {type(report).__name__}")
    if isinstance(report, RunReport) and isinstance(report.event, LogEvent):
        event = report.event
        if not isinstance(event.message, str) or not isinstance(event.level, str):
            raise UnreadableReport("a log line must be text")
    if isinstance(report, AuthoringReply) and not _well_formed(report):
        raise UnreadableReport("an authoring reply must hold text where text belongs")
    return report


def _well_formed(reply: AuthoringReply) -> bool:
    """Whether a reply's fields have their types (step code can write to the pipe too)."""
    page = reply.page
    if not (page is None or isinstance(page, PageState)):
        return False
    if not (reply.error is None or isinstance(reply.error, RunError)):
        return False
    texts = () if page is None else (page.url, page.title, page.snapshot)
    return (
        isinstance(reply.request, int)
        and isinstance(reply.ok, bool)
        and all(text is None or isinstance(text, str) for text in texts)
        and (page is None or page.screenshot is None or isinstance(page.screenshot, bytes))
        and (reply.error is None or isinstance(reply.error.message, str))
        and isinstance(reply.results, tuple)
        and all(isinstance(result, StepResult) for result in reply.results)
    )


# --- outcomes ------------------------------------------------------------------------------------


def step_label(step: StepJob) -> str:
    """How messages name a step: ``step 2 ("Log in")``."""
    return f'step {step.order} ("{step.title}")' if step.title else f"step {step.order}"


#: a whole-run limit within this of a step's own limit is reported as the step's (they are the same limit)
LIMIT_TOLERANCE_SECONDS = 0.1


def seconds(value: float) -> str:
    """A time limit as messages show it: ``30 s``, ``1.5 s``."""
    return f"{value:g} s"


def step_timeout_message(step: StepJob) -> str:
    """Why a run failed when a step ran past its own limit."""
    return f"{step_label(step)} exceeded its time limit of {seconds(step.timeout_seconds)}"


def run_timeout_message(job: RunJob, step: StepJob) -> str:
    """Why a run failed when it ran past the whole-run limit."""
    return f"run exceeded its time limit of {seconds(job.run_timeout)} during {step_label(step)}"


def failed_step(step: StepJob, message: str, started_at: datetime | None = None) -> StepResult:
    """The result of a step that failed with ``message``."""
    duration = None if started_at is None else int((utcnow() - started_at).total_seconds() * 1000)
    return StepResult(
        step_id=step.id,
        order=step.order,
        status=StepStatus.FAIL,
        title=step.title,
        started_at=started_at,
        duration_ms=duration,
        error=message,
    )


def finished_run(
    job: RunJob,
    results: Iterable[StepResult],
    started_at: datetime,
    error: RunError | None = None,
) -> RunFinished:
    """The run's outcome: the given step results, every other step ``skipped``, in step order."""
    return RunFinished(
        status="fail" if error else "pass",
        error=error,
        step_results=skip_remaining(job.steps, results),
        started_at=started_at,
        finished_at=utcnow(),
    )


def failed_run(
    job: RunJob,
    done: Iterable[StepResult],
    step: StepJob,
    kind: RunErrorKind,
    message: str,
    *,
    started_at: datetime,
    step_started_at: datetime | None = None,
) -> RunFinished:
    """A run that failed at ``step``: the steps before keep their results, the rest are skipped."""
    message = mask_secrets(message, job.secrets)
    failed = failed_step(step, message, step_started_at)
    return finished_run(
        job, [*done, failed], started_at, RunError(kind=kind, message=message, step_id=step.id)
    )


def syntax_failure(job: RunJob, problem: SyntaxProblem, started_at: datetime) -> RunFinished:
    """The outcome of a run whose step code does not compile: the first bad step fails, nothing runs."""
    step = next(s for s in job.steps if s.id == problem.step_id)
    return failed_run(
        job, [], step, RunErrorKind.ERROR, f"{step_label(step)}: {problem.describe()}", started_at=started_at
    )


def mask_event(event: RunEvent, secrets: tuple[str, ...]) -> RunEvent:
    """The event with every secret in its log line or error message replaced by ``***``."""
    if not secrets:
        return event
    if isinstance(event, LogEvent):
        return attrs.evolve(event, message=mask_secrets(event.message, secrets))
    if isinstance(event, StepFinished):
        return StepFinished(_mask_result(event.result, secrets))
    if isinstance(event, RunFinished):
        error = event.error
        if error is not None:
            error = attrs.evolve(error, message=mask_secrets(error.message, secrets))
        results = tuple(_mask_result(result, secrets) for result in event.step_results)
        return attrs.evolve(event, error=error, step_results=results)
    return event


def _mask_result(result: StepResult, secrets: tuple[str, ...]) -> StepResult:
    if result.error is None:
        return result
    return attrs.evolve(result, error=mask_secrets(result.error, secrets))
