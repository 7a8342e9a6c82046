"""What a worker process is given to execute, and what it reports back.

A :class:`RunJob` is plain data (it travels to the worker as a typed JSON frame,
:mod:`scenariokit.runner.protocol`): everything a run needs, resolved from the store before the
run starts, so the worker process never touches the database. Its steps' code is compiled once, when
the job is made (:func:`step_job`): the pool's syntax check and the worker use that compile. The
worker reports progress as :class:`RunEvent` values; the scheduler writes them to the store as they
arrive.
"""

from __future__ import annotations

import marshal
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import attrs

from scenariokit.domain.browser import BrowserSettings, context_options
from scenariokit.domain.code import compile_step_code
from scenariokit.domain.model import Retries, RunError, Step, StepResult, run_time_limit

TraceMode = Literal["off", "on-failure", "always"]
VideoSetting = Literal["off", "on", "retain-on-failure"]


@attrs.frozen
class StepJob:
    """One step to execute."""

    id: uuid.UUID
    order: int
    title: str | None
    exec_code: str
    timeout_seconds: float
    #: the code compiled by :func:`compiled`, as :mod:`marshal` bytes (base64 in a frame: only the
    #: pool sends them, to a worker of the same interpreter, which loads them instead of compiling);
    #: None while nobody compiled it
    compiled_code: bytes | None = attrs.field(default=None, repr=False)
    #: ``(line, message)`` when that compile failed
    syntax_error: tuple[int | None, str] | None = None

    @property
    def filename(self) -> str:
        """The file name step code is compiled under, so tracebacks and messages name it: ``<step N>``."""
        return f"<step {self.order}>"


def compiled(step: StepJob) -> StepJob:
    """``step`` with its code compiled, or with why it does not compile; as it is when already done.

    The one compile of a step in a run: the worker loads this code instead of compiling again, and
    the syntax check before a browser starts reads the outcome.
    """
    if step.compiled_code is not None or step.syntax_error is not None:
        return step
    try:
        code = compile_step_code(step.exec_code, step.filename)
    except SyntaxError as exc:
        return attrs.evolve(step, syntax_error=(exc.lineno, str(exc.msg)))
    except ValueError as exc:  # e.g. source code with a NUL byte
        return attrs.evolve(step, syntax_error=(None, str(exc)))
    return attrs.evolve(step, compiled_code=marshal.dumps(code))


def browser_job_fields(settings: BrowserSettings) -> dict[str, Any]:
    """The :class:`RunJob` fields that carry a run's browser settings (its context options and the rest)."""
    return {
        "context_options": context_options(settings),
        "http_credentials": settings.http_credentials.credential if settings.http_credentials else None,
        "block_urls": tuple(settings.block_urls or ()),
        "video": settings.video.value if settings.video is not None else "off",
    }


def step_job(step: Step) -> StepJob:
    """What a worker needs of a scenario's step: its code compiled, its limit made explicit."""
    return compiled(
        StepJob(
            id=step.id,
            order=step.order,
            title=step.title,
            exec_code=step.exec_code,
            timeout_seconds=step.effective_timeout,
        )
    )


@attrs.frozen(repr=False)
class CredentialValue:
    """A linked credential as step code sees it: ``helpers.credentials[alias]``."""

    alias: str
    username: str | None
    secret: str | None

    def __repr__(self) -> str:
        return f"CredentialValue(alias={self.alias!r}, username={self.username!r}, secret=***)"


@attrs.frozen
class RunJob:
    """Everything a run needs, resolved before it starts."""

    run_id: uuid.UUID
    scenario_id: uuid.UUID
    scenario_name: str
    steps: tuple[StepJob, ...]
    env_name: str
    env_data: dict[str, Any]
    credentials: tuple[CredentialValue, ...] = ()
    #: alias -> code of the stored snippets the run's code may call: those its steps call by name, and
    #: those these call; every stored snippet where that cannot be told (``services.runs._snippets_of``).
    #: An alias not among them is asked of the plugins' snippet sources in the worker.
    snippets: dict[str, str] = attrs.field(factory=dict)
    #: whole-run limit in seconds; None means the sum of the step limits.
    timeout_seconds: float | None = None
    save_session: bool = False
    #: Playwright storage state to start from (a saved session), or None for a clean context.
    storage_state: dict[str, Any] | None = None
    artifacts_dir: Path = Path("artifacts")
    trace: TraceMode = "off"
    #: how the scheduler tries a failed run again (each attempt is a job of its own to a fresh worker)
    retries: Retries = attrs.field(factory=Retries)
    #: the browser context's options from the run's browser settings (``domain.browser.context_options``:
    #: Playwright's keyword names, JSON values, no secret); empty for Playwright's default context
    context_options: dict[str, Any] = attrs.field(factory=dict)
    #: the alias of the linked credential that answers HTTP authentication (``httpCredentials``)
    http_credentials: str | None = None
    #: URL globs the run's context never requests (``blockUrls``)
    block_urls: tuple[str, ...] = ()
    #: record the run's pages (``video``): ``retain-on-failure`` keeps them for a failed run only
    video: VideoSetting = "off"

    @property
    def default_context(self) -> bool:
        """Whether the run's context is Playwright's default one (a context made ahead serves it)."""
        return not (self.context_options or self.http_credentials or self.block_urls or self.video != "off")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret values that must never leave the run unmasked."""
        return tuple(c.secret for c in self.credentials if c.secret)

    @property
    def run_timeout(self) -> float:
        """The whole-run limit in seconds."""
        return run_time_limit(self.timeout_seconds, (step.timeout_seconds for step in self.steps))


# --- events a worker reports -------------------------------------------------------------------


@attrs.frozen
class LogEvent:
    """A line for the run log (already masked)."""

    at: datetime
    level: str
    message: str
    step_id: uuid.UUID | None = None


@attrs.frozen
class StepStarted:
    """A step began; the scheduler starts that step's clock from here."""

    step_id: uuid.UUID
    at: datetime


@attrs.frozen
class StepFinished:
    """A step ended (pass or fail); skipped steps are reported in :class:`RunFinished`."""

    result: StepResult


@attrs.frozen
class ArtifactSaved:
    """A file the run recorded, by its name inside the run's artifact folder."""

    name: str


@attrs.frozen(repr=False)
class SessionSaved:
    """The run's browser context was kept (``saveSession``): its storage state and extracted token."""

    storage_state: dict[str, Any]
    token: str | None

    def __repr__(self) -> str:
        return "SessionSaved(storage_state=…, token=…)"


@attrs.frozen
class RunFinished:
    """The outcome of a run, with every step's result (including skipped ones)."""

    status: Literal["pass", "fail"]
    error: RunError | None
    step_results: tuple[StepResult, ...]
    started_at: datetime
    finished_at: datetime
    #: when the worker reached each point of the run (:data:`RUN_MARKS`); the scheduler turns them into
    #: the run's timings. Empty for an outcome the parent decided (a killed worker).
    marks: dict[str, datetime] = attrs.field(factory=dict)


#: The points a worker marks in :attr:`RunFinished.marks`, in the order a run passes them.
RUN_MARKS = ("received", "browserReady", "pageReady", "reported")


RunEvent = LogEvent | StepStarted | StepFinished | ArtifactSaved | SessionSaved | RunFinished


@attrs.frozen
class SessionReleased:
    """A held session's browser was closed: released on request, kept alive too long, or its worker stopped.

    Not a :data:`RunEvent`: it arrives after its run has finished, through the pool's
    ``on_session_released`` callback.
    """

    run_id: uuid.UUID
    reason: str = "released"


@attrs.frozen
class BrowserClosed:
    """A finished run's browser was closed (from ``started_at`` to ``finished_at``).

    Not a :data:`RunEvent`: the browser goes after the run's outcome is reported, so closing delays
    no result. The pool reports it through its ``on_browser_closed`` callback, for the run's timings:
    it kills the run's one-run worker with its browser, and that kill is the close (no worker sends it).
    """

    run_id: uuid.UUID
    started_at: datetime
    finished_at: datetime
