"""Agent authoring (docs/authoring.md): what a live authoring session holds and answers.

An authoring session is a live browser held by a sandboxed worker process, in which an agent (or a
recorder panel) executes step code one piece at a time and keeps what worked as a scenario: the exact
code that ran. These values cross between the worker process, the parent that holds it
(:mod:`scenariokit.runner.parent.authoring_host`) and the service (:mod:`scenariokit.services.authoring`), so
they are plain, picklable data; the worker's replies are decoded by the parent's allow-list.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import attrs

from scenariokit.domain.job import LogEvent
from scenariokit.domain.model import CredentialLink, RunError, Step, StepResult, utcnow

#: Playwright's ARIA snapshot of the page is cut at this many characters (after masking).
MAX_SNAPSHOT_CHARS = 20_000
#: What ends a snapshot that was cut, within :data:`MAX_SNAPSHOT_CHARS`.
SNAPSHOT_CUT_NOTE = f"\n… (snapshot cut at {MAX_SNAPSHOT_CHARS:,} characters)"
#: The longest code one exec takes (a step's code is meant to be read; 400 naming ``code`` beyond).
MAX_EXEC_CODE_CHARS = 100_000


@attrs.frozen
class PageState:
    """The page as an agent needs it to choose its next move: URL, title, ARIA snapshot, screenshot."""

    url: str | None
    title: str | None
    snapshot: str | None
    #: PNG bytes, only when asked for
    screenshot: bytes | None = attrs.field(default=None, repr=False)


@attrs.frozen
class AuthoringReply:
    """The worker's answer to one request of the parent (start, exec or look), matched by ``request``.

    ``ok`` is whether the request did what it asked: the session started, the code ran without an
    error. ``results`` are the replayed steps' results (a start's reply only).
    """

    request: int
    ok: bool
    error: RunError | None
    page: PageState | None
    results: tuple[StepResult, ...] = ()


@attrs.frozen
class AuthoredExec:
    """One exec of a session as it is remembered for saving: its code exactly as it ran."""

    index: int
    code: str
    ok: bool
    title: str | None = None
    timeout_seconds: float | None = None


@attrs.define
class AuthoringRecord:
    """What an authoring session is and has done: where it started, what it replayed, its execs."""

    id: uuid.UUID
    environment_id: uuid.UUID
    #: the scenario whose first ``up_to_step`` steps were replayed, or None
    scenario_id: uuid.UUID | None
    up_to_step: int
    #: the steps replayed, as they were when the session started
    replayed: tuple[Step, ...]
    #: the credential links step code sees through ``helpers.credentials`` (saved with the steps)
    links: tuple[CredentialLink, ...]
    session_id: uuid.UUID | None = None
    execs: list[AuthoredExec] = attrs.field(factory=list)
    #: scenarios this session saved as new ones: it may save into them again
    saved: set[uuid.UUID] = attrs.field(factory=set)
    started_at: datetime = attrs.field(factory=utcnow)


@attrs.frozen
class AuthoringStarted:
    """A session that started: the page after the replay, the replayed steps' results, their log."""

    authoring_id: uuid.UUID
    page: PageState
    replayed: tuple[StepResult, ...]
    logs: tuple[LogEvent, ...]


@attrs.frozen
class ExecOutcome:
    """What one exec answers: ok or the error (masked), the log lines, the page after it.

    ``live`` is False when the exec ended the session (its worker died or had to be stopped): the
    page is then unknown (None) and a new session is needed.
    """

    index: int
    ok: bool
    error: RunError | None
    logs: tuple[LogEvent, ...]
    page: PageState | None
    live: bool = True


@attrs.frozen
class PageLook:
    """The page of a live session now, with the log lines that arrived since the last answer."""

    authoring_id: uuid.UUID
    page: PageState
    logs: tuple[LogEvent, ...]
