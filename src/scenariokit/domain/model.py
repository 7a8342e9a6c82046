"""The scenariokit domain model.

Values are ``attrs.frozen``: a change is a new value made with :func:`attrs.evolve`, so the service layer
is the one place that decides what changes. Validation lives here, with the fields it guards; the
converter in :mod:`scenariokit.formats.convert` reports a failure under the JSON path of the field.
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

from scenariokit.domain.browser import BrowserSettings
from scenariokit.domain.fields import ALIAS_PATTERN as ALIAS_PATTERN
from scenariokit.domain.fields import FieldError as FieldError
from scenariokit.domain.fields import FieldErrors as FieldErrors
from scenariokit.domain.fields import camel as camel
from scenariokit.domain.fields import reports_every_field as reports_every_field
from scenariokit.domain.fields import valid_alias as valid_alias
from scenariokit.domain.json_values import json_fault
from scenariokit.domain.suggest import did_you_mean

MAX_TIMEOUT_SECONDS = 3600
DEFAULT_STEP_TIMEOUT_SECONDS = 30.0
NAME_MAX = 200
#: A scenario's retries: at most this many attempts after the first, each at most this long apart.
MAX_RETRIES = 5
MAX_BACKOFF_SECONDS = 600


def utcnow() -> datetime:
    """The current time, timezone-aware UTC, truncated to milliseconds so it survives every store."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def new_id() -> uuid.UUID:
    """A fresh random id."""
    return uuid.uuid4()


def mask_token(token: str | None) -> str | None:
    """Mask a session token: the first and last four characters around an ellipsis.

    A token shorter than twelve characters shows as the ellipsis alone, so short secrets reveal nothing.
    """
    if token is None:
        return None
    if len(token) < 12:
        return "…"
    return f"{token[:4]}…{token[-4:]}"


# --- validators ---------------------------------------------------------------------------------


def required_text(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise FieldError(camel(attribute.name), "is required and must not be blank")
    if len(value) > NAME_MAX:
        raise FieldError(camel(attribute.name), f"must be at most {NAME_MAX} characters")


def seconds(value: Any) -> Any:
    """A whole number of seconds as a float, as every store gives it back; anything else unchanged.

    So a write answers ``"timeoutSeconds": 120.0`` exactly as a later read does.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def valid_timeout(_: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(camel(attribute.name), "must be a number")
    if value <= 0 or value > MAX_TIMEOUT_SECONDS:
        raise FieldError(camel(attribute.name), f"must be greater than 0 and at most {MAX_TIMEOUT_SECONDS}")


def valid_order(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FieldError(camel(attribute.name), "must be a whole number of at least 1")


def valid_retry_count(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise FieldError(camel(attribute.name), f"must be a whole number from 0 to {MAX_RETRIES}")


def valid_backoff_seconds(_: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(camel(attribute.name), "must be a number")
    if not 0 <= value <= MAX_BACKOFF_SECONDS:
        raise FieldError(camel(attribute.name), f"must be from 0 to {MAX_BACKOFF_SECONDS}")


def _unique_step_ids(instance: Scenario, attribute: attrs.Attribute[Any], value: tuple[Step, ...]) -> None:
    ids = [step.id for step in value]
    if len(set(ids)) != len(ids):
        raise FieldError("steps", "step ids must be unique within a scenario")


def _unique_aliases(
    instance: Scenario, attribute: attrs.Attribute[Any], value: tuple[CredentialLink, ...]
) -> None:
    aliases = [link.alias for link in value]
    if len(set(aliases)) != len(aliases):
        raise FieldError("credentials", "aliases must be unique within a scenario")
    ids = [link.credential_id for link in value]
    if len(set(ids)) != len(ids):
        raise FieldError("credentials", "a credential may be linked to a scenario only once")


def _linked_http_credentials(
    instance: Scenario, attribute: attrs.Attribute[Any], value: BrowserSettings
) -> None:
    if not isinstance(value, BrowserSettings) or value.http_credentials is None:
        return
    alias = value.http_credentials.credential
    if all(link.alias != alias for link in instance.credentials):
        raise FieldError(
            "browser.httpCredentials.credential",
            f"{alias!r} is not the alias of a credential linked to the scenario",
        )


def json_object(_: Any, attribute: attrs.Attribute[Any], value: dict[str, Any]) -> None:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise FieldError(camel(attribute.name), "must be a JSON object")
    fault = json_fault(value, camel(attribute.name))
    if fault is not None:  # kept only if every later read can render it again
        raise FieldError(*fault)


def _sorted_steps(steps: Any) -> tuple[Step, ...]:
    return tuple(sorted(steps, key=lambda step: step.order))


# --- enums ---------------------------------------------------------------------------------------


class RunStatus(enum.StrEnum):
    """Where a run is: queued or running (``in_progress``), or finished (``pass`` / ``fail``)."""

    IN_PROGRESS = "in_progress"
    PASS = "pass"
    FAIL = "fail"


class StepStatus(enum.StrEnum):
    """How one step of a run ended."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"


class RunErrorKind(enum.StrEnum):
    """Why a run failed."""

    ASSERTION = "assertion"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    WORKER_LOST = "worker_lost"


class Backoff(enum.StrEnum):
    """How the pause between a scenario's attempts grows: the same, by the attempt, or doubling."""

    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


class SessionStatus(enum.StrEnum):
    """A saved browser session is ``open`` while its live context is held, ``closed`` once released."""

    OPEN = "open"
    CLOSED = "closed"


# --- aggregates and values -----------------------------------------------------------------------


def run_time_limit(timeout_seconds: float | None, step_limits: Iterable[float]) -> float:
    """A run's whole limit: the scenario's ``timeoutSeconds``, else the sum of its steps' limits.

    A scenario without steps gets the default step limit, so that even an empty run is bounded.
    """
    if timeout_seconds is not None:
        return timeout_seconds
    return sum(step_limits) or DEFAULT_STEP_TIMEOUT_SECONDS


@reports_every_field
@attrs.frozen
class Step:
    """One step of a scenario: code that drives the page and holds its own assertions."""

    exec_code: str = attrs.field(validator=attrs.validators.instance_of(str))
    order: int = attrs.field(default=1, validator=valid_order)
    title: str | None = None
    timeout_seconds: float | None = attrs.field(default=None, converter=seconds, validator=valid_timeout)
    id: uuid.UUID = attrs.field(factory=new_id)

    @property
    def effective_timeout(self) -> float:
        """The step's time limit in seconds, the default when it sets none."""
        return self.timeout_seconds if self.timeout_seconds is not None else DEFAULT_STEP_TIMEOUT_SECONDS


@reports_every_field
@attrs.frozen
class CredentialLink:
    """A credential linked to a scenario under an alias that step code uses to read it."""

    credential_id: uuid.UUID
    alias: str = attrs.field(validator=valid_alias)


@reports_every_field
@attrs.frozen
class Retries:
    """How often a failed run of a scenario is tried again, each attempt in a fresh browser.

    See docs/monitoring.md, "Retries".
    """

    count: int = attrs.field(default=0, validator=valid_retry_count)
    backoff: Backoff = attrs.field(default=Backoff.FIXED, converter=Backoff)
    backoff_seconds: float = attrs.field(default=0.0, converter=seconds, validator=valid_backoff_seconds)

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt ``failed_attempt`` (1 for the first) failed, before the next."""
        seconds = float(self.backoff_seconds)
        if self.backoff is Backoff.LINEAR:
            return seconds * failed_attempt
        if self.backoff is Backoff.EXPONENTIAL:
            return seconds * 2.0 ** (failed_attempt - 1)
        return seconds

    def longest(self, attempt_limit: float) -> float:
        """The longest a run may take when each attempt may take ``attempt_limit`` s, pauses included."""
        pauses = sum(self.delay(failed) for failed in range(1, self.count + 1))
        return attempt_limit * (self.count + 1) + pauses


@reports_every_field
@attrs.frozen
class Scenario:
    """An ordered list of steps, run as a whole against an environment."""

    name: str = attrs.field(validator=required_text)
    description: str | None = None
    environment_id: uuid.UUID | None = None
    timeout_seconds: float | None = attrs.field(default=None, converter=seconds, validator=valid_timeout)
    credentials: tuple[CredentialLink, ...] = attrs.field(default=(), validator=_unique_aliases)
    steps: tuple[Step, ...] = attrs.field(default=(), converter=_sorted_steps, validator=_unique_step_ids)
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    updated_at: datetime = attrs.field(factory=utcnow)
    retries: Retries = attrs.field(factory=Retries)
    #: how its runs' browser context is made; wins key by key over the environment's (docs/browser.md)
    browser: BrowserSettings = attrs.field(factory=BrowserSettings, validator=_linked_http_credentials)

    @property
    def run_timeout(self) -> float:
        """The whole-run limit in seconds (see :func:`run_time_limit`)."""
        return run_time_limit(self.timeout_seconds, (step.effective_timeout for step in self.steps))

    def step(self, step_id: uuid.UUID) -> Step | None:
        """The step with this id, or None."""
        return next((step for step in self.steps if step.id == step_id), None)

    def link(self, credential_id: uuid.UUID) -> CredentialLink | None:
        """The link to this credential, or None."""
        return next((link for link in self.credentials if link.credential_id == credential_id), None)


@reports_every_field
@attrs.frozen
class Environment:
    """A named set of key-value data that step code reads through ``helpers.env``."""

    name: str = attrs.field(validator=required_text)
    description: str | None = None
    data: dict[str, Any] = attrs.field(factory=dict, validator=json_object)
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    updated_at: datetime = attrs.field(factory=utcnow)
    #: how the browser context of every run against it is made (docs/browser.md)
    browser: BrowserSettings = attrs.field(factory=BrowserSettings)

    def url(self, key: str | None = None) -> str:
        """The URL step code asked for (see :func:`environment_url`)."""
        return environment_url(self.name, self.data, key)


def environment_url(name: str, data: Mapping[str, Any], key: str | None = None) -> str:
    """The URL step code asked for: ``data[key]``, else ``data["url"]``, else ``data["baseUrl"]``.

    A function of the data alone, so a worker holding an environment's name and data asks it without
    building (and validating) an :class:`Environment`. LookupError names the keys tried.
    """
    candidates = ([key] if key else []) + ["url", "baseUrl"]
    for candidate in candidates:
        value = data.get(candidate)
        if isinstance(value, str) and value:
            return value
    tried = ", ".join(repr(k) for k in candidates)
    near = did_you_mean(key, data) if key else ""
    raise LookupError(f"environment {name!r} has no URL: tried data keys {tried}{near}")


@reports_every_field
@attrs.frozen(repr=False)
class Credential:
    """A username and secret step code reads by alias. The secret never appears in a response."""

    name: str = attrs.field(validator=required_text)
    description: str | None = None
    username: str | None = None
    secret: str | None = None
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    updated_at: datetime = attrs.field(factory=utcnow)

    @property
    def has_secret(self) -> bool:
        """Whether a secret is stored."""
        return bool(self.secret)

    def __repr__(self) -> str:  # the secret must not reach a log through repr
        return f"Credential(id={self.id!s}, name={self.name!r}, username={self.username!r}, secret=***)"


@reports_every_field
@attrs.frozen
class Snippet:
    """Reusable code, called from step code with ``await runSnippet(alias, args)``."""

    alias: str = attrs.field(validator=valid_alias)
    title: str = attrs.field(validator=required_text)
    description: str | None = None
    code: str = ""
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    updated_at: datetime = attrs.field(factory=utcnow)


@attrs.frozen(repr=False)
class Session:
    """A browser context saved by a run: its storage state and the token found in it."""

    name: str
    status: SessionStatus = SessionStatus.OPEN
    token: str | None = None
    storage_state: dict[str, Any] | None = None
    run_id: uuid.UUID | None = None
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    updated_at: datetime = attrs.field(factory=utcnow)

    @property
    def masked_token(self) -> str | None:
        """The token as responses show it."""
        return mask_token(self.token)

    def __repr__(self) -> str:
        token = self.masked_token
        return f"Session(id={self.id!s}, name={self.name!r}, status={self.status.value}, token={token!r})"


@attrs.frozen
class RunError:
    """Why a run failed, and at which step."""

    kind: RunErrorKind
    message: str
    step_id: uuid.UUID | None = None


@attrs.frozen
class StepResult:
    """How one step of a run went."""

    step_id: uuid.UUID
    order: int
    status: StepStatus
    title: str | None = None
    started_at: datetime | None = None
    duration_ms: int | None = None
    error: str | None = None


class StepRef(Protocol):
    """What a run's outcome needs of a step: a scenario's :class:`Step`, or the step a worker was given."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def order(self) -> int: ...

    @property
    def title(self) -> str | None: ...


def skip_remaining(steps: Iterable[StepRef], results: Iterable[StepResult]) -> tuple[StepResult, ...]:
    """The step results of a run that has ended: every step without a result of its own is ``skipped``.

    The one statement of that rule, for every way a run ends: in its worker, killed by its parent, a
    pool that failed, a lease that ran out. Each step keeps its last result; a result for a step not
    listed (the scenario was edited or deleted meanwhile) is kept too, since it happened. In step order.
    """
    by_step = {result.step_id: result for result in results}
    skipped = [
        StepResult(step_id=step.id, order=step.order, status=StepStatus.SKIPPED, title=step.title)
        for step in steps
        if step.id not in by_step
    ]
    return tuple(sorted([*by_step.values(), *skipped], key=lambda result: result.order))


@attrs.frozen
class StepTiming:
    """How long one step of a run took, in milliseconds."""

    step_id: uuid.UUID
    order: int
    duration_ms: int


@attrs.frozen
class RunTimings:
    """Where a run's time went, phase by phase, in whole milliseconds (docs/rest.md, "Run timings").

    A phase the run did not go through (no browser close for a held session, no browser for a run that
    never reached a worker) is None. Phases follow each other, so their sum is the run's wall time.
    """

    #: created → a scheduler started to claim it
    queued_ms: int | None = None
    #: the claim: lease taken and everything the run needs read from the store
    claim_ms: int | None = None
    #: claimed → the worker process started on it (waiting for a free worker included)
    job_to_worker_ms: int | None = None
    #: the worker had a fresh browser (near 0 when a browser launched ahead was ready)
    browser_ready_ms: int | None = None
    #: a new browser context and page
    context_and_page_ms: int | None = None
    #: the first step's start → the last step's end
    steps_ms: int | None = None
    #: each step that ran
    steps: tuple[StepTiming, ...] = ()
    #: after the steps: failure screenshot, trace, saved session, and the report to the scheduler
    after_steps_ms: int | None = None
    #: what the scheduler spent writing the run's progress (step results, log lines) while it ran
    store_writes_ms: int | None = None
    #: closing the run's browser after its outcome was stored (it delays no result)
    browser_close_ms: int | None = None


@attrs.frozen
class RunAttempt:
    """One attempt of a run, each in a fresh browser: how it ended and when."""

    attempt: int
    status: RunStatus
    error: RunError | None = None
    step_results: tuple[StepResult, ...] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None


def is_flaky(attempts: Iterable[RunAttempt]) -> bool:
    """Whether a failed attempt was followed by a passing one: the run passed, but not at once."""
    failed_before = False
    for attempt in attempts:
        if attempt.status is RunStatus.PASS and failed_before:
            return True
        failed_before = failed_before or attempt.status is RunStatus.FAIL
    return False


@attrs.frozen
class Run:
    """One execution of a scenario against an environment, in its own fresh browser."""

    scenario_id: uuid.UUID
    environment_id: uuid.UUID
    scenario_name: str = ""
    save_session: bool = False
    session_id: uuid.UUID | None = None
    source_session_id: uuid.UUID | None = None
    status: RunStatus = RunStatus.IN_PROGRESS
    error: RunError | None = None
    step_results: tuple[StepResult, ...] = ()
    artifacts: tuple[str, ...] = ()
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    #: the run's timeline, once a scheduler executed it
    timings: RunTimings | None = None
    #: every attempt of a run that was tried more than once, the failed ones while it goes on; empty
    #: for a run of one attempt, which the run's own fields tell (see :attr:`all_attempts`)
    attempts: tuple[RunAttempt, ...] = ()
    #: a failed attempt was followed by a passing one (:func:`is_flaky`)
    flaky: bool = False
    #: the batch the run was queued in: one request, one run per environment (docs/monitoring.md)
    batch_id: uuid.UUID | None = None
    #: the schedule whose fire queued the run
    schedule_id: uuid.UUID | None = None
    #: the browser settings the run executes with: its environment's, overlaid by its scenario's
    browser: BrowserSettings = attrs.field(factory=BrowserSettings)

    @property
    def duration_ms(self) -> int | None:
        """Milliseconds from start to finish, once finished."""
        if self.started_at is None or self.finished_at is None:
            return None
        return int((self.finished_at - self.started_at).total_seconds() * 1000)

    @property
    def finished(self) -> bool:
        """Whether the run has reached ``pass`` or ``fail``."""
        return self.status is not RunStatus.IN_PROGRESS

    @property
    def all_attempts(self) -> tuple[RunAttempt, ...]:
        """The attempts that ended: those stored, or the run itself once a run of one attempt finished."""
        if self.attempts or not self.finished:
            return self.attempts
        only = RunAttempt(
            attempt=1,
            status=self.status,
            error=self.error,
            step_results=self.step_results,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )
        return (only,)


@attrs.frozen
class RunLogEntry:
    """One line of a run's log."""

    run_id: uuid.UUID
    message: str
    level: str = "info"
    step_id: uuid.UUID | None = None
    at: datetime = attrs.field(factory=utcnow)
    seq: int | None = None


@attrs.frozen
class LastFailure:
    """The latest failed run of a scenario: which, when it ended, and why."""

    run_id: uuid.UUID
    at: datetime | None
    message: str


@attrs.frozen
class RunStats:
    """How a scenario's finished runs went over a window of days (docs/monitoring.md, "History")."""

    runs: int = 0
    passed: int = 0
    failed: int = 0
    flaky: int = 0
    #: duration percentiles (nearest rank) of the runs that have both a start and an end, in ms
    p50_ms: int | None = None
    p95_ms: int | None = None
    last_failure: LastFailure | None = None

    @property
    def pass_rate(self) -> float | None:
        """Passed runs over all runs (None without runs)."""
        return self.passed / self.runs if self.runs else None

    @property
    def flaky_rate(self) -> float | None:
        """Flaky runs (passed after a failed attempt) over all runs (None without runs)."""
        return self.flaky / self.runs if self.runs else None


#: How many earlier runs a streak looks back at: thresholds beyond it read as "at least this many".
STREAK_WINDOW = 100


@attrs.frozen
class RunStreak:
    """Where a finished run stands among the runs of its scenario against its environment.

    ``failures`` counts the failed runs in a row ending with this one (0 when it passed);
    ``failures_before`` those in a row just before it. A run's streak depends only on the runs that
    finished before it, so it is the same whoever computes it, and a threshold is crossed by one run only.
    """

    failures: int = 0
    failures_before: int = 0


def streak_of(statuses: Sequence[RunStatus]) -> RunStreak:
    """The streak of the run whose status comes first in ``statuses`` (newest first, then earlier runs)."""
    if not statuses:
        return RunStreak()

    def failed_in_a_row(items: Sequence[RunStatus]) -> int:
        count = 0
        for status in items:
            if status is not RunStatus.FAIL:
                break
            count += 1
        return count

    return RunStreak(failures=failed_in_a_row(statuses), failures_before=failed_in_a_row(statuses[1:]))
