"""What every service shares: the store, the converter, settings and the run control hooks."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Literal, Protocol, TypeVar

import attrs
import cattrs
import pluggy

from scenariokit.domain.authoring import AuthoringRecord, AuthoringStarted, ExecOutcome, PageLook
from scenariokit.domain.errors import AuthoringUnavailable, NotFound, ValidationError
from scenariokit.domain.job import RunJob
from scenariokit.formats.convert import make_converter
from scenariokit.plugins import HookRelay
from scenariokit.storage.ports import Store, UnitOfWork

T = TypeVar("T")


class RunControl(Protocol):
    """What the service layer asks of whoever executes runs (the scheduler); a no-op without one."""

    @property
    def owner(self) -> str | None:
        """The lease owner name this process claims runs under; None when it executes none."""

    def run_queued(self) -> None:
        """A new run waits in the queue."""

    async def cancel(self, run_id: uuid.UUID) -> bool:
        """Stop a run this process executes; True when it does or may (others see the store's flag)."""

    async def release_session(self, session_id: uuid.UUID) -> None:
        """Close the live browser context held for a saved session."""


class NoRunControl:
    """Run control for a process that executes no runs: requests wait in the store for a worker."""

    @property
    def owner(self) -> str | None:
        return None

    def run_queued(self) -> None:
        return None

    async def cancel(self, run_id: uuid.UUID) -> bool:
        return False

    async def release_session(self, session_id: uuid.UUID) -> None:
        return None


class AuthoringControl(Protocol):
    """What the authoring service asks of whoever holds live authoring sessions (the scheduler's host)."""

    async def open(self, record: AuthoringRecord, job: RunJob) -> AuthoringStarted:
        """Start a session's worker and replay ``job``'s steps; Conflict beyond the cap."""

    async def exec(
        self,
        authoring_id: uuid.UUID,
        code: str,
        *,
        title: str | None = None,
        timeout_seconds: float | None = None,
        screenshot: bool = False,
    ) -> ExecOutcome:
        """Execute code in the session's page."""

    async def look(self, authoring_id: uuid.UUID, *, screenshot: bool = False) -> PageLook:
        """The session's page now."""

    def record(self, authoring_id: uuid.UUID) -> AuthoringRecord:
        """What the session has done; NotFound (or AuthoringEnded) when it is not live."""

    async def end(self, authoring_id: uuid.UUID) -> None:
        """End the session."""


_NO_AUTHORING = (
    "authoring sessions are held where step code executes: this process runs no scheduler "
    "(serve --no-scheduler); call a server that runs one"
)


class NoAuthoring:
    """Authoring control of a process that executes no step code: every request says so (503)."""

    async def open(self, record: AuthoringRecord, job: RunJob) -> AuthoringStarted:
        raise AuthoringUnavailable(_NO_AUTHORING)

    async def exec(
        self,
        authoring_id: uuid.UUID,
        code: str,
        *,
        title: str | None = None,
        timeout_seconds: float | None = None,
        screenshot: bool = False,
    ) -> ExecOutcome:
        raise AuthoringUnavailable(_NO_AUTHORING)

    async def look(self, authoring_id: uuid.UUID, *, screenshot: bool = False) -> PageLook:
        raise AuthoringUnavailable(_NO_AUTHORING)

    def record(self, authoring_id: uuid.UUID) -> AuthoringRecord:
        raise AuthoringUnavailable(_NO_AUTHORING)

    async def end(self, authoring_id: uuid.UUID) -> None:
        raise AuthoringUnavailable(_NO_AUTHORING)


@attrs.frozen
class RunSettings:
    """How runs are executed and where their files go."""

    artifacts_dir: Path = Path("artifacts")
    trace: Literal["off", "on-failure", "always"] = "off"
    lease_seconds: float = 15.0
    session_keepalive_seconds: float = 600.0
    #: live authoring sessions at once (``SCENARIOKIT_AUTHORING_MAX``)
    authoring_max: int = 2
    #: an authoring session unused this long is closed (``SCENARIOKIT_AUTHORING_IDLE_SECONDS``)
    authoring_idle_seconds: float = 600.0


@attrs.define
class Context:
    """Shared by the services of one application."""

    store: Store
    plugins: pluggy.PluginManager
    settings: RunSettings = attrs.field(factory=RunSettings)
    control: RunControl = attrs.field(factory=NoRunControl)
    authoring: AuthoringControl = attrs.field(factory=NoAuthoring)
    converter: cattrs.Converter = attrs.field(factory=make_converter)

    @property
    def hooks(self) -> HookRelay:
        """The lifecycle hooks, fired by the services after the commit that stored what they report."""
        return HookRelay(self.plugins)

    def uow(self, *, readonly: bool = False) -> UnitOfWork:
        """A new unit of work on the store."""
        factory = self.store.unit_of_work
        try:
            return factory(readonly=readonly)  # type: ignore[call-arg]
        except TypeError:
            return factory()


class ServiceBase:
    """A group of use cases over one context."""

    def __init__(self, context: Context) -> None:
        self.ctx = context


def require(item: T | None, kind: str, ident: object) -> T:
    """``item``, or NotFound when it is None."""
    if item is None:
        raise NotFound(kind, ident)
    return item


def missing_reference(field: str, kind: str, ident: object) -> ValidationError:
    """The 400 for a body that names a record which does not exist."""
    return ValidationError(f"{field} refers to a missing {kind}", {field: f"no {kind} with id {ident}"})
