"""Storage ports: the repositories and unit of work the service layer talks to.

Adapters implement them (:mod:`scenariokit.storage.sqlalchemy` for SQLite and PostgreSQL). A unit of
work is a transaction: leaving ``async with uow:`` without ``await uow.commit()`` rolls everything back.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import Generic, Self, TypeVar

import attrs

from scenariokit.domain.audit import AuditEntry
from scenariokit.domain.model import (
    Credential,
    Environment,
    LastPass,
    Run,
    RunLogEntry,
    RunStats,
    RunStatus,
    RunTimings,
    Scenario,
    Session,
    Snippet,
    StepResult,
)
from scenariokit.domain.revisions import Revision, RevisionInfo
from scenariokit.domain.schedule import Schedule
from scenariokit.formats.queries import (
    AuditQuery,
    CredentialQuery,
    EnvironmentQuery,
    ListQuery,
    LogQuery,
    Page,
    RevisionQuery,
    RunQuery,
    ScenarioQuery,
    ScheduleQuery,
    SessionQuery,
    SnippetQuery,
)
from scenariokit.formats.records import ScenarioRecord

T = TypeVar("T")
Q = TypeVar("Q", bound=ListQuery)


class Repository(abc.ABC, Generic[T, Q]):
    """Reads and writes one aggregate. ``get`` returns None for a missing id; services raise NotFound."""

    @abc.abstractmethod
    async def get(self, ident: uuid.UUID, *, lock: bool = False) -> T | None:
        """The record with this id, or None.

        With ``lock`` the record stays locked until the unit of work ends, so a read-merge-write
        (PATCH) cannot interleave with another writer of the same record and lose its change.
        """

    @abc.abstractmethod
    async def get_many(self, idents: Sequence[uuid.UUID]) -> list[T]:
        """The records with these ids that exist, in no particular order."""

    @abc.abstractmethod
    async def list(self, query: Q) -> Page[T]:
        """One page of records, sorted and filtered as the query says."""

    @abc.abstractmethod
    async def add(self, item: T) -> None:
        """Insert a new record (its id is already set)."""

    @abc.abstractmethod
    async def update(self, item: T) -> None:
        """Replace the stored record with the same id."""

    @abc.abstractmethod
    async def delete(self, ident: uuid.UUID) -> bool:
        """Delete the record; False when there was none."""


class ScenarioRepository(Repository[Scenario, ScenarioQuery]):
    """Scenarios with their steps and credential links, stored and loaded as one aggregate."""

    @abc.abstractmethod
    async def list_records(self, query: ScenarioQuery) -> Page[ScenarioRecord]:
        """The page :meth:`list` gives, as read records (no domain values): what JSON answers are made of."""

    @abc.abstractmethod
    async def all_ids(self) -> list[uuid.UUID]:
        """Every scenario id, oldest first (for export of all)."""

    @abc.abstractmethod
    async def step_owners(self, step_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
        """The scenario holding each of these step ids, for those that are stored."""

    @abc.abstractmethod
    async def lock(self, idents: Sequence[uuid.UUID]) -> None:
        """Lock these scenarios until the unit of work ends (as ``get(..., lock=True)`` locks one)."""


class EnvironmentRepository(Repository[Environment, EnvironmentQuery]):
    """Environments."""

    @abc.abstractmethod
    async def in_use(self, ident: uuid.UUID) -> bool:
        """Whether a scenario links this environment as its default."""


class CredentialRepository(Repository[Credential, CredentialQuery]):
    """Credentials; secrets are encrypted at rest by the adapter."""

    @abc.abstractmethod
    async def linked_scenarios(self, ident: uuid.UUID) -> int:
        """How many scenarios link this credential."""


class SnippetRepository(Repository[Snippet, SnippetQuery]):
    """Snippets, unique by alias."""

    @abc.abstractmethod
    async def get_by_alias(self, alias: str) -> Snippet | None:
        """The snippet with this alias, or None."""

    @abc.abstractmethod
    async def code_by_alias(self, aliases: Collection[str] | None = None) -> dict[str, str]:
        """alias -> code of the snippets with these aliases (those that exist), or of every snippet."""


class SessionRepository(Repository[Session, SessionQuery]):
    """Saved browser sessions. Deleting one clears the link of every run that saved it (``sessionId``)."""

    @abc.abstractmethod
    async def close_open(self, before: datetime | None = None) -> int:
        """Mark open sessions closed (those last updated before ``before``, or all); how many changed."""


@attrs.frozen
class RunLease:
    """A worker's claim on a run: who holds it and until when."""

    run_id: uuid.UUID
    owner: str
    expires_at: datetime


@attrs.frozen
class QueueState:
    """What waits to be executed: queued runs and the earliest schedule fire, read in one statement."""

    #: runs queued and claimed by no scheduler
    depth: int
    #: when the oldest of them was queued; None when none waits
    oldest_queued_at: datetime | None
    #: the earliest next fire of an enabled schedule; None when no schedule is enabled
    next_fire_at: datetime | None


@attrs.frozen
class ScenarioOutcome:
    """How the latest finished run of a scenario went."""

    scenario_id: uuid.UUID
    scenario_name: str
    status: RunStatus
    duration_seconds: float | None


class RunRepository(Repository[Run, RunQuery]):
    """Runs, their log and the leases workers hold on them."""

    @abc.abstractmethod
    async def claim_next(self, owner: str, now: datetime, expires_at: datetime) -> Run | None:
        """Atomically take the oldest unclaimed in-progress run for ``owner``; None when none waits.

        Two workers never claim the same run: PostgreSQL uses ``FOR UPDATE SKIP LOCKED``, SQLite a
        conditional update.
        """

    @abc.abstractmethod
    async def set_step_results(self, run_id: uuid.UUID, results: Sequence[StepResult]) -> bool:
        """Store the step results of a run in progress, as they are so far (one statement, no read);
        False when the run is not in progress."""

    @abc.abstractmethod
    async def set_timings(self, run_id: uuid.UUID, timings: RunTimings) -> bool:
        """Replace a finished run's timings (its browser closed after its outcome was stored), one
        statement, no read; False when the run has not finished."""

    @abc.abstractmethod
    async def renew_lease(self, run_id: uuid.UUID, owner: str, expires_at: datetime) -> bool:
        """Extend the lease ``owner`` holds on a run; False when it no longer holds it."""

    @abc.abstractmethod
    async def release_lease(self, run_id: uuid.UUID, owner: str) -> bool:
        """Put an in-progress run ``owner`` leases back in the queue (no lease); False when it does not."""

    @abc.abstractmethod
    async def queue_state(self) -> QueueState:
        """How many runs wait unclaimed, since when, and when the next schedule fire is due: one query."""

    @abc.abstractmethod
    async def last_outcomes(self) -> list[ScenarioOutcome]:
        """The latest finished run of every scenario that has one (by creation): one query."""

    @abc.abstractmethod
    async def expired_leases(self, now: datetime) -> list[RunLease]:
        """Leases of in-progress runs that ran out (their worker is gone)."""

    @abc.abstractmethod
    async def lease(self, run_id: uuid.UUID, *, lock: bool = False) -> RunLease | None:
        """The lease on an in-progress run, or None when nobody holds one (queued or finished).

        With ``lock`` the run's row stays locked until the transaction ends, so a decision taken on
        the lease (reap it, cancel the run) cannot race a renewal or a claim.
        """

    @abc.abstractmethod
    async def request_cancel(self, run_id: uuid.UUID) -> bool:
        """Flag a run for cancellation; False when it is not in progress."""

    @abc.abstractmethod
    async def cancel_requested(self, run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Which of these runs have a cancellation request."""

    @abc.abstractmethod
    async def append_logs(self, entries: Sequence[RunLogEntry]) -> None:
        """Append lines to run logs."""

    @abc.abstractmethod
    async def list_logs(self, run_id: uuid.UUID, query: LogQuery) -> Page[RunLogEntry]:
        """One page of a run's log in the order written, filtered by ``query.q`` (case-insensitive)."""

    @abc.abstractmethod
    async def recent_statuses(self, run: Run, limit: int) -> list[RunStatus]:
        """The statuses of ``run`` and the finished runs of its scenario and environment before it.

        Newest first, ``run`` first, at most ``limit``; "before" is by ``finishedAt`` (then id).
        """

    @abc.abstractmethod
    async def stats(self, scenario_id: uuid.UUID, since: datetime) -> RunStats:
        """How the scenario's finished runs created since ``since`` went, computed by the database.

        One query per figure set (counts, duration percentiles, last failure): no run is loaded.
        """

    @abc.abstractmethod
    async def rename_scenario(self, scenario_id: uuid.UUID, name: str) -> None:
        """Keep the scenario name stored with its runs (their sort key) in step with a rename."""

    @abc.abstractmethod
    async def last_passes(
        self, scenario_ids: Sequence[uuid.UUID], *, before: datetime | None = None
    ) -> dict[uuid.UUID, LastPass]:
        """The latest passing run of each of these scenarios (finished before ``before`` when given)."""

    # last in the class: after it, ``list`` in this class's annotations would name this method
    @abc.abstractmethod
    async def list(self, query: RunQuery, *, timings: bool = True) -> Page[Run]:
        """One page of runs; without ``timings`` each run's timings are left out (None), not read."""


class RevisionRepository(abc.ABC):
    """The revisions of scenarios: written once, never changed; deleted with their scenario."""

    @abc.abstractmethod
    async def add(self, revision: Revision) -> None:
        """Store a new revision; step bodies already stored for its scenario are not stored again."""

    @abc.abstractmethod
    async def get(self, scenario_id: uuid.UUID, number: int) -> Revision | None:
        """Revision ``number`` of a scenario with its content, or None."""

    @abc.abstractmethod
    async def list(self, scenario_id: uuid.UUID, query: RevisionQuery) -> Page[RevisionInfo]:
        """One page of a scenario's revisions without their content, newest first unless asked otherwise."""


class ScheduleRepository(Repository[Schedule, ScheduleQuery]):
    """Schedules, and the claim of each fire."""

    @abc.abstractmethod
    async def due(self, now: datetime, limit: int) -> list[Schedule]:
        """Enabled schedules whose next fire is at or before ``now``, earliest first."""

    @abc.abstractmethod
    async def claim_fire(
        self, ident: uuid.UUID, *, due_at: datetime, fired_at: datetime, next_fire_at: datetime
    ) -> bool:
        """Take the fire due at ``due_at``: move the schedule on to ``next_fire_at``; False if another did.

        A conditional update on the fire it expects: of every scheduler sharing the store, exactly one
        sees it succeed (PostgreSQL re-reads the row once a concurrent claim commits; SQLite writes one
        at a time). The caller queues the fire's runs in the same unit of work.
        """

    @abc.abstractmethod
    async def next_due(self) -> datetime | None:
        """The earliest next fire of an enabled schedule, or None."""


class AuditRepository(abc.ABC):
    """The audit log: entries are added with the write they record and listed, never changed."""

    @abc.abstractmethod
    async def add(self, item: AuditEntry) -> None:
        """Record one entry (in the unit of work of the write it describes)."""

    @abc.abstractmethod
    async def list(self, query: AuditQuery) -> Page[AuditEntry]:
        """One page of entries, newest first unless the query says otherwise, filtered as it says."""


class UnitOfWork(abc.ABC):
    """One transaction over every repository."""

    scenarios: ScenarioRepository
    environments: EnvironmentRepository
    credentials: CredentialRepository
    snippets: SnippetRepository
    sessions: SessionRepository
    runs: RunRepository
    schedules: ScheduleRepository
    audit: AuditRepository
    revisions: RevisionRepository

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.rollback()

    @abc.abstractmethod
    async def commit(self) -> None:
        """Make the work of this unit permanent."""

    @abc.abstractmethod
    async def rollback(self) -> None:
        """Undo whatever was not committed."""


@attrs.define
class StoreActivity:
    """What a store was asked to do, counted as it happens (``bench/cpu.py`` prints it per run).

    Plain integer counts, bumped as each unit of work begins and commits: cheap enough to be on always.
    """

    #: units of work that may write (each a transaction: on SQLite, ``BEGIN IMMEDIATE``)
    writes: int = 0
    #: reading units of work
    reads: int = 0
    #: commits of writing units of work
    commits: int = 0

    def snapshot(self) -> StoreActivity:
        """A copy of the counts now, to subtract later ones from."""
        return attrs.evolve(self)

    def since(self, earlier: StoreActivity) -> StoreActivity:
        """The counts from ``earlier`` to now."""
        return StoreActivity(
            writes=self.writes - earlier.writes,
            reads=self.reads - earlier.reads,
            commits=self.commits - earlier.commits,
        )


class Store(abc.ABC):
    """A storage backend: hands out units of work and owns the connection pool."""

    url: str
    #: the units of work it handed out and the commits made, so far
    activity: StoreActivity

    @abc.abstractmethod
    def unit_of_work(self) -> UnitOfWork:
        """A new unit of work (a transaction)."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise when the database cannot be reached."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections."""
