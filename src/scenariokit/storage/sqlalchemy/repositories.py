"""Repositories over SQLAlchemy Core: rows in, domain objects out.

Rows and values map through each repository's :class:`~.rows.RowMap` (columns named after fields,
values read without validators). Sort keys reach SQL only through the column maps below, after the
query object checked them; every sort ends with the primary key so pages never skip or repeat a row.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

import attrs
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from scenariokit.domain.audit import AuditEntry
from scenariokit.domain.model import (
    Credential,
    CredentialLink,
    Environment,
    LastFailure,
    LastPass,
    Run,
    RunError,
    RunLogEntry,
    RunStats,
    RunStatus,
    RunTimings,
    Scenario,
    Session,
    SessionStatus,
    Snippet,
    Step,
    StepResult,
)
from scenariokit.domain.revisions import (
    Revision,
    RevisionInfo,
    ScenarioContent,
    fields_document,
    fields_hash,
    step_hash,
)
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
from scenariokit.storage import ports
from scenariokit.storage.secrets import SecretBox

from . import tables as t
from .inserts import insert_numbered, insert_rows
from .listing import ORDER_COLUMNS, scenario_page
from .rows import DOCUMENTS, Encrypted, RowMap

T = TypeVar("T")
Q = TypeVar("Q", bound=ListQuery)


@functools.cache
def _update(table: sa.Table) -> sa.Update:
    """The UPDATE of one row by its id (parameter ``row_id``), the columns to set given as parameters."""
    return sa.update(table).where(table.c.id == sa.bindparam("row_id"))


@functools.cache
def _by_id(table: sa.Table, *, lock: bool = False) -> sa.Select[Any]:
    """The SELECT of one row by its id (parameter ``ident_``), ``FOR UPDATE`` with ``lock``: built once,
    as INSERTs are (:func:`.inserts.insert_statement`): the statement and its cache key are made once."""
    stmt = sa.select(table).where(table.c.id == sa.bindparam("ident_"))
    return stmt.with_for_update() if lock else stmt


@functools.cache
def _by_ids(table: sa.Table) -> sa.Select[Any]:
    """The SELECT of the rows whose ids parameter ``idents_`` lists, built once as :func:`_by_id` is
    (a page of runs reads its environments and sessions with it: built each time, it cost 0.19 ms
    against 0.11 for one environment)."""
    return sa.select(table).where(table.c.id.in_(sa.bindparam("idents_", expanding=True)))


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class _TableRepository(Generic[T, Q]):
    """What every repository shares: get, list with paging, add, update, delete by id."""

    table: ClassVar[sa.Table]
    row_map: ClassVar[RowMap[Any]]
    order_columns: ClassVar[Mapping[str, str]]
    search_columns: ClassVar[tuple[str, ...]] = ("name",)

    def __init__(self, conn: AsyncConnection, box: SecretBox) -> None:
        self.conn = conn
        self.box = box

    def to_row(self, item: T) -> dict[str, Any]:
        return self.row_map.to_row(item, self.box)

    def from_row(self, row: sa.Row[Any]) -> T:
        item: T = self.row_map.from_row(row, self.box)
        return item

    async def _load(self, rows: Sequence[sa.Row[Any]]) -> list[T]:
        return [self.from_row(row) for row in rows]

    def _filters(self, query: Q) -> list[sa.ColumnElement[bool]]:
        if not query.q:
            return []
        pattern = _like(query.q)
        return [
            sa.or_(
                *(
                    sa.func.lower(self.table.c[name]).like(pattern, escape="\\")
                    for name in self.search_columns
                )
            )
        ]

    async def get(self, ident: uuid.UUID, *, lock: bool = False) -> T | None:
        # SQLite needs no row lock: a writing unit of work holds the database lock from BEGIN IMMEDIATE.
        stmt = _by_id(self.table, lock=lock and self.conn.dialect.name == "postgresql")
        rows = (await self.conn.execute(stmt, {"ident_": ident})).all()
        loaded = await self._load(rows)
        return loaded[0] if loaded else None

    async def get_many(self, idents: Sequence[uuid.UUID]) -> list[T]:
        if not idents:
            return []
        rows = (await self.conn.execute(_by_ids(self.table), {"idents_": list(idents)})).all()
        return await self._load(rows)

    async def kept_total(self, query: Q) -> int | None:
        """The total of the query's rows from counts the store keeps (or a count of its own), or None
        to count it with the page."""
        return None

    async def _counted_apart(self, query: Q) -> int:
        """The query's rows counted by a statement of their own: through an index over the filters'
        range, reading nothing beyond it, where a window count beside the page reads and sorts every
        matching row."""
        counted = sa.select(sa.func.count()).select_from(self.table).where(*self._filters(query))
        return int((await self.conn.execute(counted)).scalar_one())

    async def _summed(self, counts: sa.Table, where: Sequence[sa.ColumnElement[bool]]) -> int:
        """The sum of ``counts.n`` over the rows ``where`` picks: a total kept by triggers."""
        total = await self.conn.execute(sa.select(sa.func.coalesce(sa.func.sum(counts.c.n), 0)).where(*where))
        return int(total.scalar_one())

    async def _page(
        self,
        query: Q,
        selected: Sequence[sa.Table | sa.Column[Any]],
        load: Callable[[Sequence[sa.Row[Any]]], Awaitable[list[T]]],
    ) -> Page[T]:
        """One page of the query's rows: the ``selected`` columns of each, made items by ``load``."""
        filters = self._filters(query)
        column = self.table.c[self.order_columns[query.order_by]]
        direction = sa.desc if query.order_dir == "desc" else sa.asc
        kept = await self.kept_total(query)
        # Else the total rides on the page's rows: one query for the page, not two. Unfiltered, it is a
        # count of the table beside them (SQLite counts a B-tree's entries without reading its rows),
        # and the page reads its twenty rows through the order's index. Filtered (a search), a window
        # count: the search reads every row once either way, and the window sorts only the matches.
        # A window count over a whole table read and sorted all of it for every page (62 ms a page of
        # 20,000 scenarios on SQLite, 21 ms on PostgreSQL). The tables that only grow (runs, the audit
        # log) keep their counts instead.
        columns: list[Any]
        if kept is not None:
            columns = [*selected]
        elif filters:
            columns = [*selected, sa.func.count().over().label("_total")]
        else:
            counted = sa.select(sa.func.count()).select_from(self.table).scalar_subquery()
            columns = [*selected, counted.label("_total")]
        stmt = (
            sa.select(*columns)
            .where(*filters)
            .order_by(direction(column), direction(self.table.c.id))
            .limit(query.limit)
            .offset(query.offset)
        )
        rows = (await self.conn.execute(stmt)).all()
        if kept is not None:
            total = kept
        elif rows:
            total = int(rows[0]._total)
        elif query.page == 1:
            total = 0
        else:  # past the last page: no row carries the total
            total = await self._counted_apart(query)
        return Page(items=tuple(await load(rows)), total=total, page=query.page, limit=query.limit)

    async def list(self, query: Q) -> Page[T]:
        return await self._page(query, (self.table,), self._load)

    async def add(self, item: T) -> None:
        # The row as parameters of a statement built once: ``insert().values(row)`` is a new statement per
        # call, whose cache key SQLAlchemy works out from every value (most of what a create cost).
        await insert_rows(self.conn, self.table, [self.to_row(item)])

    async def update(self, item: T) -> None:
        row = self.to_row(item)
        await self.conn.execute(
            _update(self.table), {**row, "row_id": row["id"]}
        )  # built once, as INSERTs are

    async def delete(self, ident: uuid.UUID) -> bool:
        result = await self.conn.execute(sa.delete(self.table).where(self.table.c.id == ident))
        return bool(result.rowcount)


_NAMED_ORDER = {"name": "name", "createdAt": "created_at", "updatedAt": "updated_at"}


class EnvironmentRepository(_TableRepository[Environment, EnvironmentQuery], ports.EnvironmentRepository):
    table = t.environments
    row_map = RowMap(Environment, t.environments)
    order_columns = _NAMED_ORDER

    async def in_use(self, ident: uuid.UUID) -> bool:
        stmt = sa.select(sa.literal(1)).where(t.scenarios.c.environment_id == ident).limit(1)
        return (await self.conn.execute(stmt)).first() is not None


class CredentialRepository(_TableRepository[Credential, CredentialQuery], ports.CredentialRepository):
    table = t.credentials
    row_map = RowMap(Credential, t.credentials, columns={"secret": Encrypted("secret_encrypted")})
    order_columns = _NAMED_ORDER

    async def linked_scenarios(self, ident: uuid.UUID) -> int:
        stmt = sa.select(sa.func.count()).where(t.scenario_credentials.c.credential_id == ident)
        return int((await self.conn.execute(stmt)).scalar_one())


class SnippetRepository(_TableRepository[Snippet, SnippetQuery], ports.SnippetRepository):
    table = t.snippets
    row_map = RowMap(Snippet, t.snippets)
    order_columns = {"alias": "alias", "title": "title", "createdAt": "created_at", "updatedAt": "updated_at"}
    search_columns = ("alias", "title")

    async def get_by_alias(self, alias: str) -> Snippet | None:
        row = (await self.conn.execute(sa.select(self.table).where(self.table.c.alias == alias))).first()
        return self.from_row(row) if row else None

    async def code_by_alias(self, aliases: Collection[str] | None = None) -> dict[str, str]:
        stmt = sa.select(self.table.c.alias, self.table.c.code)
        if aliases is not None:
            if not aliases:
                return {}
            stmt = stmt.where(self.table.c.alias.in_(sorted(aliases)))
        return {alias: code for alias, code in (await self.conn.execute(stmt)).all()}


class SessionRepository(_TableRepository[Session, SessionQuery], ports.SessionRepository):
    table = t.sessions
    row_map = RowMap(
        Session,
        t.sessions,
        columns={
            "token": Encrypted("token_encrypted"),
            "storage_state": Encrypted("storage_state_encrypted", as_json=True),
        },
    )
    order_columns = {"name": "name", "status": "status", "createdAt": "created_at"}

    async def delete(self, ident: uuid.UUID) -> bool:
        # What a foreign key ON DELETE SET NULL would do (runs.session_id has none): no run names a
        # session that is gone, in the same transaction as the delete.
        await self.conn.execute(sa.update(t.runs).where(t.runs.c.session_id == ident).values(session_id=None))
        return await super().delete(ident)

    async def close_open(self, before: datetime | None = None) -> int:
        filters = [self.table.c.status == SessionStatus.OPEN.value]
        if before is not None:
            filters.append(self.table.c.updated_at < before)
        result = await self.conn.execute(
            sa.update(self.table).where(*filters).values(status=SessionStatus.CLOSED.value)
        )
        return int(result.rowcount or 0)


#: a scenario's children: a step's ``order`` is its row's ``position``
_STEP_ROWS = RowMap(Step, t.steps, columns={"order": "position"})
_LINK_ROWS = RowMap(CredentialLink, t.scenario_credentials)


#: a page's children, each read with one statement built once (its ids an expanding parameter)
_STEPS_OF = (
    sa.select(t.steps)
    .where(t.steps.c.scenario_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(t.steps.c.position)
)
_DELETE_STEPS = sa.delete(t.steps).where(t.steps.c.id.in_(sa.bindparam("ids", expanding=True)))
_DELETE_LINKS = sa.delete(t.scenario_credentials).where(
    t.scenario_credentials.c.scenario_id.in_(sa.bindparam("ids", expanding=True))
)
_LINKS_OF = (
    sa.select(t.scenario_credentials)
    .where(t.scenario_credentials.c.scenario_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(t.scenario_credentials.c.position, t.scenario_credentials.c.alias)
)


class ScenarioRepository(_TableRepository[Scenario, ScenarioQuery], ports.ScenarioRepository):
    """Scenarios are written with their steps and links; lists load both in two batched queries."""

    table = t.scenarios
    row_map = RowMap(Scenario, t.scenarios, elsewhere=("steps", "credentials"))
    order_columns = ORDER_COLUMNS  # one map for both reads of a page

    async def _load(self, rows: Sequence[sa.Row[Any]]) -> list[Scenario]:
        if not rows:
            return []
        ids = [row.id for row in rows]
        steps: dict[uuid.UUID, list[Step]] = {ident: [] for ident in ids}
        links: dict[uuid.UUID, list[CredentialLink]] = {ident: [] for ident in ids}
        step_rows = await self.conn.execute(_STEPS_OF, {"ids": ids})
        for row in step_rows:
            steps[row.scenario_id].append(_STEP_ROWS.from_row(row, self.box))
        link_rows = await self.conn.execute(_LINKS_OF, {"ids": ids})
        for row in link_rows:
            links[row.scenario_id].append(_LINK_ROWS.from_row(row, self.box))
        return [
            self.row_map.from_row(row, self.box, steps=tuple(steps[row.id]), credentials=tuple(links[row.id]))
            for row in rows
        ]

    def _step_rows(self, item: Scenario) -> list[dict[str, Any]]:
        return [{**_STEP_ROWS.to_row(step, self.box), "scenario_id": item.id} for step in item.steps]

    def _link_rows(self, item: Scenario) -> list[dict[str, Any]]:
        return [
            {**_LINK_ROWS.to_row(link, self.box), "scenario_id": item.id, "position": i}
            for i, link in enumerate(item.credentials)
        ]

    async def _write_children(self, item: Scenario) -> None:
        """Write what changed of ``item``'s steps and links against what is stored.

        An edit changes a step or two; rewriting all of them left PostgreSQL a dead row a step in
        ``steps`` and in its index for every edit, and a scenario edited thousands of times read ever
        slower (docs/performance.md, "Editing a scenario writes what changed").
        """
        rows = {row["id"]: row for row in self._step_rows(item)}
        stored = {row.id: row._asdict() for row in await self.conn.execute(_STEPS_OF, {"ids": [item.id]})}
        gone = [ident for ident in stored if ident not in rows]
        if gone:
            await self.conn.execute(_DELETE_STEPS, {"ids": gone})
        changed = [row for ident, row in rows.items() if ident in stored and stored[ident] != row]
        if changed:
            await self.conn.execute(_update(t.steps), [{**row, "row_id": row["id"]} for row in changed])
        await insert_rows(self.conn, t.steps, [row for ident, row in rows.items() if ident not in stored])
        links = self._link_rows(item)
        stored_links = [row._asdict() for row in await self.conn.execute(_LINKS_OF, {"ids": [item.id]})]
        if stored_links != links:  # a few rows, rarely changed: written again whole
            await self.conn.execute(_DELETE_LINKS, {"ids": [item.id]})
            await insert_rows(self.conn, t.scenario_credentials, links)

    async def _insert_children(self, item: Scenario) -> None:
        await insert_rows(self.conn, t.steps, self._step_rows(item))
        await insert_rows(self.conn, t.scenario_credentials, self._link_rows(item))

    async def add(self, item: Scenario) -> None:
        await super().add(item)
        await self._insert_children(item)  # a new scenario has no children to delete first

    async def update(self, item: Scenario) -> None:
        await super().update(item)
        await self._write_children(item)

    async def list_records(self, query: ScenarioQuery) -> Page[ScenarioRecord]:
        return await scenario_page(self.conn, query, _like(query.q) if query.q else None)

    async def all_ids(self) -> list[uuid.UUID]:
        stmt = sa.select(self.table.c.id).order_by(self.table.c.created_at, self.table.c.id)
        return list((await self.conn.execute(stmt)).scalars())

    async def lock(self, idents: Sequence[uuid.UUID]) -> None:
        if self.conn.dialect.name != "postgresql":
            return  # SQLite: a writing unit of work holds the database lock from BEGIN IMMEDIATE
        ids = sorted(set(idents))  # one order for every locker: two imports never deadlock
        for start in range(0, len(ids), 500):
            await self.conn.execute(
                sa.select(self.table.c.id)
                .where(self.table.c.id.in_(ids[start : start + 500]))
                .order_by(self.table.c.id)
                .with_for_update()
            )

    async def step_owners(self, step_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
        owners: dict[uuid.UUID, uuid.UUID] = {}
        ids = list(step_ids)
        for start in range(0, len(ids), 500):  # bounded IN lists
            rows = await self.conn.execute(
                sa.select(t.steps.c.id, t.steps.c.scenario_id).where(
                    t.steps.c.id.in_(ids[start : start + 500])
                )
            )
            owners.update({row.id: row.scenario_id for row in rows})
        return owners


_LOG_ROWS = RowMap(RunLogEntry, t.run_logs)


@functools.cache
def _claim_statement(skip_locked: bool) -> sa.Update:
    """The claim of the oldest unclaimed run, returning its row; built once per dialect's way to pick."""
    runs = t.runs
    pick = (
        sa.select(runs.c.id)
        .where(runs.c.status == RunStatus.IN_PROGRESS.value, runs.c.lease_owner.is_(None))
        .order_by(runs.c.created_at, runs.c.id)
        .limit(1)
    )
    if skip_locked:
        pick = pick.with_for_update(skip_locked=True)
    return (
        sa.update(runs)
        .where(runs.c.id == pick.scalar_subquery(), runs.c.lease_owner.is_(None))
        .values(
            lease_owner=sa.bindparam("owner_"),
            lease_expires_at=sa.bindparam("expires_", type_=t.UTCDateTime()),
            started_at=sa.func.coalesce(runs.c.started_at, sa.bindparam("now_", type_=t.UTCDateTime())),
        )
        .returning(*runs.c)
    )


#: what the scheduler asks of its runs every few moments, built once (their values are parameters)
_RENEW_LEASE = (
    sa.update(t.runs)
    .where(
        t.runs.c.id == sa.bindparam("row_id"),
        t.runs.c.lease_owner == sa.bindparam("owner_"),
        t.runs.c.status == RunStatus.IN_PROGRESS.value,
    )
    .values(lease_expires_at=sa.bindparam("expires_", type_=t.UTCDateTime()))
)
_CANCEL_REQUESTED = sa.select(t.runs.c.id).where(
    t.runs.c.id.in_(sa.bindparam("ids", expanding=True)), t.runs.c.cancel_requested
)
#: the statuses of a finished run's scenario in its environment, newest first, up to the run itself
#: (its finish time, then its id, break ties): the ``run_finished`` hook's streak, read with every
#: outcome a plugin hears; built once, as the statements above
_RECENT_STATUSES = (
    sa.select(t.runs.c.status)
    .where(
        t.runs.c.scenario_id == sa.bindparam("scenario_id_"),
        t.runs.c.environment_id == sa.bindparam("environment_id_"),
        t.runs.c.status != RunStatus.IN_PROGRESS.value,
        sa.or_(
            t.runs.c.finished_at < sa.bindparam("at_", type_=t.UTCDateTime()),
            sa.and_(
                t.runs.c.finished_at == sa.bindparam("at_", type_=t.UTCDateTime()),
                t.runs.c.id <= sa.bindparam("run_id_"),
            ),
        ),
    )
    .order_by(t.runs.c.finished_at.desc(), t.runs.c.id.desc())
    .limit(sa.bindparam("limit_"))
)
#: a run's step results while it is in progress, a finished run's timings: statements built once
_SET_IF_IN_PROGRESS = (
    sa.update(t.runs)
    .where(t.runs.c.id == sa.bindparam("row_id"), t.runs.c.status == sa.bindparam("in_progress"))
    .values(step_results=sa.bindparam("step_results"))
)
_SET_TIMINGS = (
    sa.update(t.runs)
    .where(t.runs.c.id == sa.bindparam("row_id"), t.runs.c.status != sa.bindparam("in_progress"))
    .values(timings=sa.bindparam("timings"))
)


class RunRepository(_TableRepository[Run, RunQuery], ports.RunRepository):
    table = t.runs
    row_map = RowMap(Run, t.runs)
    order_columns = {"createdAt": "created_at", "status": "status", "scenario.name": "scenario_name"}
    #: a page without each run's timings: the column is not read, the document not built
    _WITHOUT_TIMINGS = RowMap(Run, t.runs, elsewhere=("timings",))
    _COLUMNS_WITHOUT_TIMINGS = tuple(column for column in t.runs.c if column.name != "timings")

    def _filters(self, query: RunQuery) -> list[sa.ColumnElement[bool]]:
        filters: list[sa.ColumnElement[bool]] = []
        if query.status is not None:
            filters.append(self.table.c.status == query.status.value)
        if query.scenario_id is not None:
            filters.append(self.table.c.scenario_id == query.scenario_id)
        if query.batch_id is not None:
            filters.append(self.table.c.batch_id == query.batch_id)
        if query.environment_id is not None:
            filters.append(self.table.c.environment_id == query.environment_id)
        if query.since is not None:
            filters.append(self.table.c.created_at >= query.since)
        return filters

    async def kept_total(self, query: RunQuery) -> int | None:
        """The sum of ``run_counts`` (kept by triggers) over the query's status, scenario and environment.

        ``since`` is not kept: its runs are counted apart, through an index over the range (creation
        time, alone or after the status, scenario or environment). A batch (at most a few runs) is
        counted with its page: None.
        """
        if query.batch_id is not None:
            return None
        if query.since is not None:
            return await self._counted_apart(query)
        counts = t.run_counts
        where: list[sa.ColumnElement[bool]] = []
        if query.status is not None:
            where.append(counts.c.status == query.status.value)
        if query.scenario_id is not None:
            where.append(counts.c.scenario_id == query.scenario_id)
        if query.environment_id is not None:
            where.append(counts.c.environment_id == query.environment_id)
        return await self._summed(counts, where)

    async def update(self, item: Run) -> None:
        row = self.to_row(item)
        values = {key: value for key, value in row.items() if key not in {"id", "created_at"}}
        if item.finished:
            values.update(lease_owner=None, lease_expires_at=None)
        await self.conn.execute(_update(self.table), {**values, "row_id": item.id})

    async def claim_next(self, owner: str, now: datetime, expires_at: datetime) -> Run | None:
        stmt = _claim_statement(self.conn.dialect.name == "postgresql")
        parameters = {"owner_": owner, "expires_": expires_at, "now_": now}
        # the claimed row itself comes back (RETURNING, on SQLite and PostgreSQL alike): no second read
        claimed = (await self.conn.execute(stmt, parameters)).first()
        return self.from_row(claimed) if claimed is not None else None

    async def set_step_results(self, run_id: uuid.UUID, results: Sequence[StepResult]) -> bool:
        values = self.row_map.some_columns(self.box, step_results=tuple(results))
        result = await self.conn.execute(
            _SET_IF_IN_PROGRESS, {**values, "row_id": run_id, "in_progress": RunStatus.IN_PROGRESS.value}
        )
        return bool(result.rowcount)

    async def set_timings(self, run_id: uuid.UUID, timings: RunTimings) -> bool:
        values = self.row_map.some_columns(self.box, timings=timings)
        parameters = {**values, "row_id": run_id, "in_progress": RunStatus.IN_PROGRESS.value}
        return bool((await self.conn.execute(_SET_TIMINGS, parameters)).rowcount)

    async def renew_lease(self, run_id: uuid.UUID, owner: str, expires_at: datetime) -> bool:
        parameters = {"row_id": run_id, "owner_": owner, "expires_": expires_at}
        return bool((await self.conn.execute(_RENEW_LEASE, parameters)).rowcount)

    async def release_lease(self, run_id: uuid.UUID, owner: str) -> bool:
        result = await self.conn.execute(
            sa.update(self.table)
            .where(
                self.table.c.id == run_id,
                self.table.c.lease_owner == owner,
                self.table.c.status == RunStatus.IN_PROGRESS.value,
            )
            .values(lease_owner=None, lease_expires_at=None)
        )
        return bool(result.rowcount)

    async def queue_state(self) -> ports.QueueState:
        runs, schedules = self.table, t.schedules
        waiting = (runs.c.status == RunStatus.IN_PROGRESS.value, runs.c.lease_owner.is_(None))
        row = (
            await self.conn.execute(
                sa.select(
                    sa.select(sa.func.count()).select_from(runs).where(*waiting).scalar_subquery(),
                    sa.select(sa.func.min(runs.c.created_at)).where(*waiting).scalar_subquery(),
                    sa.select(sa.func.min(schedules.c.next_fire_at))
                    .where(schedules.c.enabled)
                    .scalar_subquery(),
                )
            )
        ).one()
        # min() keeps its column's type, so the times come back timezone-aware like every other
        return ports.QueueState(depth=int(row[0]), oldest_queued_at=row[1], next_fire_at=row[2])

    async def last_outcomes(self) -> list[ports.ScenarioOutcome]:
        runs, scenarios = self.table, t.scenarios
        # Per scenario, its newest finished run: a walk back along (scenario_id, created_at, id).
        latest = (
            sa.select(runs.c.id)
            .where(
                runs.c.scenario_id == scenarios.c.id,
                runs.c.status != RunStatus.IN_PROGRESS.value,
            )
            .order_by(runs.c.created_at.desc(), runs.c.id.desc())
            .limit(1)
            .correlate(scenarios)
            .scalar_subquery()
        )
        rows = await self.conn.execute(
            sa.select(scenarios.c.id, scenarios.c.name, runs.c.status, runs.c.started_at, runs.c.finished_at)
            .select_from(scenarios.join(runs, runs.c.id == latest))
            .order_by(scenarios.c.id)
        )
        return [
            ports.ScenarioOutcome(
                scenario_id=row.id,
                scenario_name=row.name,
                status=RunStatus(row.status),
                duration_seconds=(
                    (row.finished_at - row.started_at).total_seconds()
                    if row.started_at is not None and row.finished_at is not None
                    else None
                ),
            )
            for row in rows
        ]

    async def expired_leases(self, now: datetime) -> list[ports.RunLease]:
        rows = await self.conn.execute(
            sa.select(self.table.c.id, self.table.c.lease_owner, self.table.c.lease_expires_at)
            .where(
                self.table.c.status == RunStatus.IN_PROGRESS.value,
                self.table.c.lease_owner.is_not(None),
                self.table.c.lease_expires_at < now,
            )
            .order_by(self.table.c.id)  # reapers lock these rows in one order: they never deadlock
        )
        return [ports.RunLease(run_id=r.id, owner=r.lease_owner, expires_at=r.lease_expires_at) for r in rows]

    async def lease(self, run_id: uuid.UUID, *, lock: bool = False) -> ports.RunLease | None:
        runs = self.table
        stmt = sa.select(runs.c.status, runs.c.lease_owner, runs.c.lease_expires_at).where(
            runs.c.id == run_id
        )
        if lock and self.conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update()  # SQLite: the unit of work already holds the write lock
        row = (await self.conn.execute(stmt)).first()
        if row is None or row.status != RunStatus.IN_PROGRESS.value or row.lease_owner is None:
            return None
        return ports.RunLease(run_id=run_id, owner=row.lease_owner, expires_at=row.lease_expires_at)

    async def request_cancel(self, run_id: uuid.UUID) -> bool:
        result = await self.conn.execute(
            sa.update(self.table)
            .where(self.table.c.id == run_id, self.table.c.status == RunStatus.IN_PROGRESS.value)
            .values(cancel_requested=True)
        )
        return bool(result.rowcount)

    async def cancel_requested(self, run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        if not run_ids:
            return set()
        rows = await self.conn.execute(_CANCEL_REQUESTED, {"ids": list(run_ids)})
        return set(rows.scalars())

    async def append_logs(self, entries: Sequence[RunLogEntry]) -> None:
        if not entries:
            return
        await insert_rows(self.conn, t.run_logs, [_LOG_ROWS.to_row(entry, self.box) for entry in entries])

    async def list_logs(self, run_id: uuid.UUID, query: LogQuery) -> Page[RunLogEntry]:
        logs = t.run_logs
        filters: list[sa.ColumnElement[bool]] = [logs.c.run_id == run_id]
        if query.q:
            filters.append(sa.func.lower(logs.c.message).like(_like(query.q), escape="\\"))
        rows = await self.conn.execute(
            sa.select(logs).where(*filters).order_by(logs.c.seq).limit(query.limit).offset(query.offset)
        )
        items = tuple(_LOG_ROWS.from_row(row, self.box) for row in rows)
        total = (
            await self.conn.execute(sa.select(sa.func.count()).select_from(logs).where(*filters))
        ).scalar_one()
        return Page(items=items, total=int(total), page=query.page, limit=query.limit)

    async def recent_statuses(self, run: Run, limit: int) -> list[RunStatus]:
        if run.finished_at is None:
            return []
        rows = await self.conn.execute(
            _RECENT_STATUSES,
            {
                "scenario_id_": run.scenario_id,
                "environment_id_": run.environment_id,
                "at_": run.finished_at,
                "run_id_": run.id,
                "limit_": limit,
            },
        )
        return [RunStatus(status) for status in rows.scalars()]

    async def stats(self, scenario_id: uuid.UUID, since: datetime) -> RunStats:
        runs = self.table
        window = [
            runs.c.scenario_id == scenario_id,
            runs.c.created_at >= sa.bindparam("since_", since, type_=t.UTCDateTime()),
            runs.c.status != RunStatus.IN_PROGRESS.value,
        ]
        passed = runs.c.status == RunStatus.PASS.value
        failed = runs.c.status == RunStatus.FAIL.value
        counts = (
            await self.conn.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.coalesce(sa.func.sum(sa.case((passed, 1), else_=0)), 0),
                    sa.func.coalesce(sa.func.sum(sa.case((failed, 1), else_=0)), 0),
                    sa.func.coalesce(sa.func.sum(sa.case((runs.c.flaky, 1), else_=0)), 0),
                ).where(*window)
            )
        ).one()
        p50, p95 = await self._duration_percentiles(window)
        last = (
            await self.conn.execute(
                sa.select(runs.c.id, runs.c.finished_at, runs.c.error)
                .where(*window, failed)
                .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
                .limit(1)
            )
        ).first()
        last_failure = None
        if last is not None:
            error = DOCUMENTS.structure(last.error, RunError) if last.error is not None else None
            last_failure = LastFailure(
                run_id=last.id, at=last.finished_at, message=error.message if error else ""
            )
        return RunStats(
            runs=int(counts[0]),
            passed=int(counts[1]),
            failed=int(counts[2]),
            flaky=int(counts[3]),
            p50_ms=p50,
            p95_ms=p95,
            last_failure=last_failure,
        )

    async def _duration_percentiles(
        self, window: list[sa.ColumnElement[bool]]
    ) -> tuple[int | None, int | None]:
        """The nearest-rank 50th and 95th percentile of run durations, in ms, in one query."""
        runs = self.table
        if self.conn.dialect.name == "postgresql":
            seconds = sa.func.extract("epoch", runs.c.finished_at - runs.c.started_at)
            duration = sa.func.round(seconds * 1000)
        else:  # SQLite keeps times as text: julianday reads them
            days = sa.func.julianday(runs.c.finished_at) - sa.func.julianday(runs.c.started_at)
            duration = sa.func.round(days * 86_400_000)
        ranked = (
            sa.select(
                duration.label("ms"),
                sa.func.row_number().over(order_by=duration).label("rank"),
                sa.func.count().over().label("n"),
            )
            .where(*window, runs.c.started_at.is_not(None), runs.c.finished_at.is_not(None))
            .subquery()
        )

        # nearest rank: the ceil(p * n)-th duration, in integer arithmetic every database shares
        def at(percent: int) -> sa.ColumnElement[Any]:
            rank = (ranked.c.n * percent + 99) // 100
            return sa.func.max(sa.case((ranked.c.rank == rank, ranked.c.ms)))

        row = (await self.conn.execute(sa.select(at(50), at(95)))).one()
        return (None if row[0] is None else int(row[0]), None if row[1] is None else int(row[1]))

    async def rename_scenario(self, scenario_id: uuid.UUID, name: str) -> None:
        await self.conn.execute(
            sa.update(self.table).where(self.table.c.scenario_id == scenario_id).values(scenario_name=name)
        )

    async def last_passes(
        self, scenario_ids: Sequence[uuid.UUID], *, before: datetime | None = None
    ) -> dict[uuid.UUID, LastPass]:
        runs = self.table
        ids = list(dict.fromkeys(scenario_ids))
        found: dict[uuid.UUID, LastPass] = {}
        for scenario_id in ids:  # each an index seek (scenario_id, status, finished_at): a page has few
            where = [runs.c.scenario_id == scenario_id, runs.c.status == RunStatus.PASS.value]
            if before is not None:
                where.append(runs.c.finished_at < sa.bindparam("before_", before, type_=t.UTCDateTime()))
            row = (
                await self.conn.execute(
                    sa.select(runs.c.id, runs.c.finished_at, runs.c.scenario_revision)
                    .where(*where)
                    .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
                    .limit(1)
                )
            ).first()
            if row is not None:
                found[scenario_id] = LastPass(
                    run_id=row.id, at=row.finished_at, revision=row.scenario_revision
                )
        return found

    # last in the class: after it, ``list`` in this class's annotations would name this method
    async def list(self, query: RunQuery, *, timings: bool = True) -> Page[Run]:
        if timings:
            return await super().list(query)

        async def load(rows: Sequence[sa.Row[Any]]) -> list[Run]:
            return [self._WITHOUT_TIMINGS.from_row(row, self.box) for row in rows]

        return await self._page(query, self._COLUMNS_WITHOUT_TIMINGS, load)


_REVISION_ROWS = RowMap(RevisionInfo, t.scenario_revisions)
#: a stored step body: a step without its order (its place in each revision that holds it)
_BODY_ROWS = RowMap(Step, t.revision_steps, columns={"id": "step_id"}, elsewhere=("order",))
_restore_content = DOCUMENTS.get_structure_hook(ScenarioContent)
#: a revision with its fields, and step bodies by ``seq``: statements built once, their values parameters
_REVISION_OF = (
    sa.select(t.scenario_revisions, t.revision_fields.c.fields)
    .join(t.revision_fields, t.revision_fields.c.seq == t.scenario_revisions.c.fields_seq)
    .where(
        t.scenario_revisions.c.scenario_id == sa.bindparam("scenario_id_"),
        t.scenario_revisions.c.number == sa.bindparam("number_"),
    )
)
_FIELDS_SEQ_OF = sa.select(t.revision_fields.c.seq).where(
    t.revision_fields.c.scenario_id == sa.bindparam("scenario_id_"),
    t.revision_fields.c.hash == sa.bindparam("hash_"),
)
_BODIES_OF = sa.select(t.revision_steps).where(
    t.revision_steps.c.seq.in_(sa.bindparam("seqs", expanding=True))
)


class RevisionRepository(ports.RevisionRepository):
    """Revisions: a row each, their step bodies stored once per scenario and content."""

    def __init__(self, conn: AsyncConnection, box: SecretBox) -> None:
        self.conn = conn
        self.box = box

    async def _body_seqs(self, scenario_id: uuid.UUID, steps: Sequence[Step], *, first: bool) -> list[int]:
        """The ``seq`` of each step's body, storing the bodies not stored yet (``first``: none is)."""
        bodies = t.revision_steps
        hashes = [step_hash(step) for step in steps]
        found: dict[str, int] = {}
        wanted = [] if first else list(dict.fromkeys(hashes))
        for start in range(0, len(wanted), 500):  # bounded IN lists
            rows = await self.conn.execute(
                sa.select(bodies.c.hash, bodies.c.seq).where(
                    bodies.c.scenario_id == scenario_id, bodies.c.hash.in_(wanted[start : start + 500])
                )
            )
            found.update({row.hash: row.seq for row in rows})
        missing = {
            digest: {**_BODY_ROWS.to_row(step, self.box), "scenario_id": scenario_id, "hash": digest}
            for step, digest in zip(steps, hashes, strict=True)
            if digest not in found
        }
        numbers = await insert_numbered(self.conn, bodies, list(missing.values()))
        found.update(zip(missing, numbers, strict=True))
        return [found[digest] for digest in hashes]

    async def _fields_seq(self, scenario_id: uuid.UUID, content: ScenarioContent, *, first: bool) -> int:
        """The ``seq`` of the content's fields, storing them when not stored yet (``first``: they are not)."""
        digest = fields_hash(content)
        if not first:
            found = (
                await self.conn.execute(_FIELDS_SEQ_OF, {"scenario_id_": scenario_id, "hash_": digest})
            ).scalar_one_or_none()
            if found is not None:
                return int(found)
        row = {"scenario_id": scenario_id, "hash": digest, "fields": fields_document(content)}
        [seq] = await insert_numbered(self.conn, t.revision_fields, [row])
        return seq

    async def add(self, revision: Revision) -> None:
        info = revision.info
        # Revision 1 is a new scenario's first: nothing of that scenario is stored yet (its fields and
        # bodies come and go with its revisions), so nothing is looked up before they are inserted.
        first = info.number == 1
        row = {
            **_REVISION_ROWS.to_row(info, self.box),
            "fields_seq": await self._fields_seq(info.scenario_id, revision.content, first=first),
            "steps": await self._body_seqs(info.scenario_id, revision.content.steps, first=first),
        }
        await insert_rows(self.conn, t.scenario_revisions, [row])

    async def get(self, scenario_id: uuid.UUID, number: int) -> Revision | None:
        row = (
            await self.conn.execute(_REVISION_OF, {"scenario_id_": scenario_id, "number_": number})
        ).first()
        if row is None:
            return None
        seqs = [int(seq) for seq in row.steps]
        stored: dict[int, sa.Row[Any]] = {}
        unique = list(dict.fromkeys(seqs))
        for start in range(0, len(unique), 500):  # bounded IN lists
            rows = await self.conn.execute(_BODIES_OF, {"seqs": unique[start : start + 500]})
            stored.update({body.seq: body for body in rows})
        steps = tuple(
            _BODY_ROWS.from_row(stored[seq], self.box, order=order) for order, seq in enumerate(seqs, start=1)
        )
        # ScenarioContent has no validators: evolve checks nothing the read would not
        content = attrs.evolve(_restore_content(row.fields, ScenarioContent), steps=steps)
        return Revision(info=_REVISION_ROWS.from_row(row, self.box), content=content)

    async def list(self, scenario_id: uuid.UUID, query: RevisionQuery) -> Page[RevisionInfo]:
        revisions = t.scenario_revisions
        direction = sa.desc if query.order_dir == "desc" else sa.asc
        columns = [
            revisions.c[name]
            for name in (
                "scenario_id",
                "number",
                "created_at",
                "source",
                "token_name",
                "message",
                "content_hash",
            )
        ]
        rows = await self.conn.execute(
            sa.select(*columns)
            .where(revisions.c.scenario_id == scenario_id)
            .order_by(direction(revisions.c.number))
            .limit(query.limit)
            .offset(query.offset)
        )
        items = tuple(_REVISION_ROWS.from_row(row, self.box) for row in rows)
        # Numbers run 1..n without a gap (a revision is never deleted alone): the highest is the count.
        total = await self.conn.execute(
            sa.select(sa.func.coalesce(sa.func.max(revisions.c.number), 0)).where(
                revisions.c.scenario_id == scenario_id
            )
        )
        return Page(items=items, total=int(total.scalar_one()), page=query.page, limit=query.limit)


class AuditRepository(_TableRepository[AuditEntry, AuditQuery], ports.AuditRepository):
    table = t.audit_log
    row_map = RowMap(AuditEntry, t.audit_log)
    order_columns = {"at": "at"}

    def _filters(self, query: AuditQuery) -> list[sa.ColumnElement[bool]]:
        filters: list[sa.ColumnElement[bool]] = []
        if query.resource is not None:
            filters.append(self.table.c.resource == query.resource)
        if query.token_name is not None:
            filters.append(self.table.c.token_name == query.token_name)
        if query.since is not None:
            filters.append(self.table.c.at >= sa.bindparam("since_", query.since, type_=t.UTCDateTime()))
        return filters

    async def kept_total(self, query: AuditQuery) -> int | None:
        """The sum of ``audit_counts`` (kept by triggers) over the query's resource and token name.

        ``since`` is not kept: its entries are counted apart, through the key's range or the filter's
        index, which ends with the key.
        """
        if query.since is not None:
            return await self._counted_apart(query)
        counts = t.audit_counts
        where: list[sa.ColumnElement[bool]] = []
        if query.resource is not None:
            where.append(counts.c.resource == query.resource)
        if query.token_name is not None:
            where.append(counts.c.token_name == query.token_name)
        return await self._summed(counts, where)


class ScheduleRepository(_TableRepository[Schedule, ScheduleQuery], ports.ScheduleRepository):
    table = t.schedules
    row_map = RowMap(Schedule, t.schedules)
    order_columns = {"createdAt": "created_at", "updatedAt": "updated_at", "nextFireAt": "next_fire_at"}

    def _filters(self, query: ScheduleQuery) -> list[sa.ColumnElement[bool]]:
        if query.scenario_id is None:
            return []
        return [self.table.c.scenario_id == query.scenario_id]

    async def due(self, now: datetime, limit: int) -> list[Schedule]:
        schedules = self.table
        rows = await self.conn.execute(
            sa.select(schedules)
            .where(
                schedules.c.enabled,
                schedules.c.next_fire_at <= sa.bindparam("now_", now, type_=t.UTCDateTime()),
            )
            .order_by(schedules.c.next_fire_at, schedules.c.id)
            .limit(limit)
        )
        return [self.from_row(row) for row in rows]

    async def claim_fire(
        self, ident: uuid.UUID, *, due_at: datetime, fired_at: datetime, next_fire_at: datetime
    ) -> bool:
        schedules = self.table
        result = await self.conn.execute(
            sa.update(schedules)
            .where(
                schedules.c.id == ident,
                schedules.c.enabled,
                schedules.c.next_fire_at == sa.bindparam("due_", due_at, type_=t.UTCDateTime()),
            )
            .values(last_fired_at=fired_at, next_fire_at=next_fire_at)
        )
        return bool(result.rowcount)

    async def next_due(self) -> datetime | None:
        schedules = self.table
        stmt = sa.select(sa.func.min(schedules.c.next_fire_at)).where(schedules.c.enabled)
        found: datetime | None = (await self.conn.execute(stmt)).scalar_one_or_none()  # min() keeps the type
        return found
