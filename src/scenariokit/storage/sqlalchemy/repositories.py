"""Repositories over SQLAlchemy Core: rows in, domain objects out.

Sort keys reach SQL only through the column maps below, after the query object checked them; every
sort ends with the primary key so pages never skip or repeat a row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from scenariokit.domain.model import (
    Credential,
    CredentialLink,
    Environment,
    Run,
    RunError,
    RunLogEntry,
    RunStatus,
    RunTimings,
    Scenario,
    Session,
    SessionStatus,
    Snippet,
    Step,
    StepResult,
)
from scenariokit.formats.convert import make_converter
from scenariokit.formats.queries import (
    CredentialQuery,
    EnvironmentQuery,
    ListQuery,
    LogQuery,
    Page,
    RunQuery,
    ScenarioQuery,
    SessionQuery,
    SnippetQuery,
)
from scenariokit.storage import ports
from scenariokit.storage.secrets import SecretBox

from . import tables as t

T = TypeVar("T")
Q = TypeVar("Q", bound=ListQuery)
_converter = None


def _json() -> Any:
    global _converter  # built on first use, never at import
    if _converter is None:
        _converter = make_converter()
    return _converter


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class _TableRepository(Generic[T, Q]):
    """What every repository shares: get, list with paging, add, update, delete by id."""

    table: ClassVar[sa.Table]
    order_columns: ClassVar[Mapping[str, str]]
    search_columns: ClassVar[tuple[str, ...]] = ("name",)

    def __init__(self, conn: AsyncConnection, box: SecretBox) -> None:
        self.conn = conn
        self.box = box

    # translation, per table
    def to_row(self, item: T) -> dict[str, Any]:
        raise NotImplementedError

    def from_row(self, row: sa.Row[Any]) -> T:
        raise NotImplementedError

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
        stmt = sa.select(self.table).where(self.table.c.id == ident)
        if lock and self.conn.dialect.name == "postgresql":
            # SQLite needs no row lock: a writing unit of work holds the database lock from BEGIN IMMEDIATE.
            stmt = stmt.with_for_update()
        rows = (await self.conn.execute(stmt)).all()
        loaded = await self._load(rows)
        return loaded[0] if loaded else None

    async def get_many(self, idents: Sequence[uuid.UUID]) -> list[T]:
        if not idents:
            return []
        rows = (await self.conn.execute(sa.select(self.table).where(self.table.c.id.in_(list(idents))))).all()
        return await self._load(rows)

    async def kept_total(self, query: Q) -> int | None:
        """The total of the query's rows from counts the store keeps, or None where it keeps none."""
        return None

    async def list(self, query: Q) -> Page[T]:
        filters = self._filters(query)
        column = self.table.c[self.order_columns[query.order_by]]
        direction = sa.desc if query.order_dir == "desc" else sa.asc
        kept = await self.kept_total(query)
        # Else the total rides on the page's rows (a window count): one query for the page, not two. A
        # window count reads every matching row, so a large table (runs) keeps its counts instead.
        columns = [self.table] if kept is not None else [self.table, sa.func.count().over().label("_total")]
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
            total = (
                await self.conn.execute(sa.select(sa.func.count()).select_from(self.table).where(*filters))
            ).scalar_one()
        return Page(items=tuple(await self._load(rows)), total=total, page=query.page, limit=query.limit)

    async def add(self, item: T) -> None:
        await self.conn.execute(sa.insert(self.table).values(self.to_row(item)))

    async def update(self, item: T) -> None:
        row = self.to_row(item)
        await self.conn.execute(sa.update(self.table).where(self.table.c.id == row["id"]).values(row))

    async def delete(self, ident: uuid.UUID) -> bool:
        result = await self.conn.execute(sa.delete(self.table).where(self.table.c.id == ident))
        return bool(result.rowcount)


_NAMED_ORDER = {"name": "name", "createdAt": "created_at", "updatedAt": "updated_at"}


class EnvironmentRepository(_TableRepository[Environment, EnvironmentQuery], ports.EnvironmentRepository):
    table = t.environments
    order_columns = _NAMED_ORDER

    def to_row(self, item: Environment) -> dict[str, Any]:
        return {
            "id": item.id,
            "name": item.name,
            "description": item.description,
            "data": item.data,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }

    def from_row(self, row: sa.Row[Any]) -> Environment:
        return Environment(
            id=row.id,
            name=row.name,
            description=row.description,
            data=dict(row.data or {}),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    async def in_use(self, ident: uuid.UUID) -> bool:
        stmt = sa.select(sa.literal(1)).where(t.scenarios.c.environment_id == ident).limit(1)
        return (await self.conn.execute(stmt)).first() is not None


class CredentialRepository(_TableRepository[Credential, CredentialQuery], ports.CredentialRepository):
    table = t.credentials
    order_columns = _NAMED_ORDER

    def to_row(self, item: Credential) -> dict[str, Any]:
        return {
            "id": item.id,
            "name": item.name,
            "description": item.description,
            "username": item.username,
            "secret_encrypted": self.box.encrypt(item.secret) if item.secret else None,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }

    def from_row(self, row: sa.Row[Any]) -> Credential:
        return Credential(
            id=row.id,
            name=row.name,
            description=row.description,
            username=row.username,
            secret=(
                self.box.decrypt(
                    row.secret_encrypted, what=f"the secret of credential {row.id} ({row.name!r})"
                )
                if row.secret_encrypted
                else None
            ),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    async def linked_scenarios(self, ident: uuid.UUID) -> int:
        stmt = sa.select(sa.func.count()).where(t.scenario_credentials.c.credential_id == ident)
        return int((await self.conn.execute(stmt)).scalar_one())


class SnippetRepository(_TableRepository[Snippet, SnippetQuery], ports.SnippetRepository):
    table = t.snippets
    order_columns = {"alias": "alias", "title": "title", "createdAt": "created_at", "updatedAt": "updated_at"}
    search_columns = ("alias", "title")

    def to_row(self, item: Snippet) -> dict[str, Any]:
        return {
            "id": item.id,
            "alias": item.alias,
            "title": item.title,
            "description": item.description,
            "code": item.code,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }

    def from_row(self, row: sa.Row[Any]) -> Snippet:
        return Snippet(
            id=row.id,
            alias=row.alias,
            title=row.title,
            description=row.description,
            code=row.code,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    async def get_by_alias(self, alias: str) -> Snippet | None:
        row = (await self.conn.execute(sa.select(self.table).where(self.table.c.alias == alias))).first()
        return self.from_row(row) if row else None

    async def all(self) -> list[Snippet]:
        rows = (await self.conn.execute(sa.select(self.table).order_by(self.table.c.alias))).all()
        return [self.from_row(row) for row in rows]


class SessionRepository(_TableRepository[Session, SessionQuery], ports.SessionRepository):
    table = t.sessions
    order_columns = {"name": "name", "status": "status", "createdAt": "created_at"}

    def to_row(self, item: Session) -> dict[str, Any]:
        state = json.dumps(item.storage_state) if item.storage_state is not None else None
        return {
            "id": item.id,
            "name": item.name,
            "status": item.status.value,
            "token_encrypted": self.box.encrypt(item.token) if item.token else None,
            "storage_state_encrypted": self.box.encrypt(state) if state is not None else None,
            "run_id": item.run_id,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }

    def from_row(self, row: sa.Row[Any]) -> Session:
        state = row.storage_state_encrypted
        return Session(
            id=row.id,
            name=row.name,
            status=SessionStatus(row.status),
            token=self.box.decrypt(row.token_encrypted, what=f"the token of session {row.id}")
            if row.token_encrypted
            else None,
            storage_state=json.loads(self.box.decrypt(state, what=f"the storage state of session {row.id}"))
            if state
            else None,
            run_id=row.run_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

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


class ScenarioRepository(_TableRepository[Scenario, ScenarioQuery], ports.ScenarioRepository):
    """Scenarios are written with their steps and links; lists load both in two batched queries."""

    table = t.scenarios
    order_columns = _NAMED_ORDER

    def to_row(self, item: Scenario) -> dict[str, Any]:
        return {
            "id": item.id,
            "name": item.name,
            "description": item.description,
            "environment_id": item.environment_id,
            "timeout_seconds": item.timeout_seconds,
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }

    async def _load(self, rows: Sequence[sa.Row[Any]]) -> list[Scenario]:
        if not rows:
            return []
        ids = [row.id for row in rows]
        steps: dict[uuid.UUID, list[Step]] = {ident: [] for ident in ids}
        links: dict[uuid.UUID, list[CredentialLink]] = {ident: [] for ident in ids}
        step_rows = await self.conn.execute(
            sa.select(t.steps).where(t.steps.c.scenario_id.in_(ids)).order_by(t.steps.c.position)
        )
        for s in step_rows:
            steps[s.scenario_id].append(
                Step(
                    id=s.id,
                    order=s.position,
                    title=s.title,
                    exec_code=s.exec_code,
                    timeout_seconds=s.timeout_seconds,
                )
            )
        link_rows = await self.conn.execute(
            sa.select(t.scenario_credentials)
            .where(t.scenario_credentials.c.scenario_id.in_(ids))
            .order_by(t.scenario_credentials.c.position, t.scenario_credentials.c.alias)
        )
        for link in link_rows:
            links[link.scenario_id].append(CredentialLink(credential_id=link.credential_id, alias=link.alias))
        return [
            Scenario(
                id=row.id,
                name=row.name,
                description=row.description,
                environment_id=row.environment_id,
                timeout_seconds=row.timeout_seconds,
                steps=tuple(steps[row.id]),
                credentials=tuple(links[row.id]),
                created_at=row.created_at,
                updated_at=row.updated_at,
            )
            for row in rows
        ]

    async def _write_children(self, item: Scenario) -> None:
        await self.conn.execute(sa.delete(t.steps).where(t.steps.c.scenario_id == item.id))
        await self.conn.execute(
            sa.delete(t.scenario_credentials).where(t.scenario_credentials.c.scenario_id == item.id)
        )
        if item.steps:
            await self.conn.execute(
                sa.insert(t.steps),
                [
                    {
                        "id": step.id,
                        "scenario_id": item.id,
                        "position": step.order,
                        "title": step.title,
                        "exec_code": step.exec_code,
                        "timeout_seconds": step.timeout_seconds,
                    }
                    for step in item.steps
                ],
            )
        if item.credentials:
            await self.conn.execute(
                sa.insert(t.scenario_credentials),
                [
                    {
                        "scenario_id": item.id,
                        "credential_id": link.credential_id,
                        "alias": link.alias,
                        "position": i,
                    }
                    for i, link in enumerate(item.credentials)
                ],
            )

    async def add(self, item: Scenario) -> None:
        await super().add(item)
        await self._write_children(item)

    async def update(self, item: Scenario) -> None:
        await super().update(item)
        await self._write_children(item)

    async def all_ids(self) -> list[uuid.UUID]:
        stmt = sa.select(self.table.c.id).order_by(self.table.c.created_at, self.table.c.id)
        return list((await self.conn.execute(stmt)).scalars())

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


class RunRepository(_TableRepository[Run, RunQuery], ports.RunRepository):
    table = t.runs
    order_columns = {"createdAt": "created_at", "status": "status", "scenario.name": "scenario_name"}

    def _filters(self, query: RunQuery) -> list[sa.ColumnElement[bool]]:
        filters: list[sa.ColumnElement[bool]] = []
        if query.status is not None:
            filters.append(self.table.c.status == query.status.value)
        if query.scenario_id is not None:
            filters.append(self.table.c.scenario_id == query.scenario_id)
        return filters

    async def kept_total(self, query: RunQuery) -> int | None:
        """The sum of ``run_counts`` (kept by triggers) over the query's status and scenario.

        A filter the counts do not cover must return None here, so the total is counted instead.
        """
        counts = t.run_counts
        where: list[sa.ColumnElement[bool]] = []
        if query.status is not None:
            where.append(counts.c.status == query.status.value)
        if query.scenario_id is not None:
            where.append(counts.c.scenario_id == query.scenario_id)
        total = await self.conn.execute(sa.select(sa.func.coalesce(sa.func.sum(counts.c.n), 0)).where(*where))
        return int(total.scalar_one())

    def to_row(self, item: Run) -> dict[str, Any]:
        conv = _json()
        return {
            "id": item.id,
            "scenario_id": item.scenario_id,
            "scenario_name": item.scenario_name,
            "environment_id": item.environment_id,
            "save_session": item.save_session,
            "session_id": item.session_id,
            "source_session_id": item.source_session_id,
            "status": item.status.value,
            "error": conv.unstructure(item.error) if item.error else None,
            "step_results": [conv.unstructure(result) for result in item.step_results],
            "artifacts": list(item.artifacts),
            "created_at": item.created_at,
            "started_at": item.started_at,
            "finished_at": item.finished_at,
            "timings": conv.unstructure(item.timings) if item.timings else None,
        }

    def from_row(self, row: sa.Row[Any]) -> Run:
        conv = _json()
        return Run(
            id=row.id,
            scenario_id=row.scenario_id,
            scenario_name=row.scenario_name,
            environment_id=row.environment_id,
            save_session=row.save_session,
            session_id=row.session_id,
            source_session_id=row.source_session_id,
            status=RunStatus(row.status),
            error=conv.structure(row.error, RunError) if row.error else None,
            step_results=tuple(conv.structure(result, StepResult) for result in row.step_results or ()),
            artifacts=tuple(row.artifacts or ()),
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            timings=conv.structure(row.timings, RunTimings) if row.timings else None,
        )

    async def update(self, item: Run) -> None:
        row = self.to_row(item)
        values = {key: value for key, value in row.items() if key not in {"id", "created_at"}}
        if item.finished:
            values.update(lease_owner=None, lease_expires_at=None)
        await self.conn.execute(sa.update(self.table).where(self.table.c.id == item.id).values(values))

    async def claim_next(self, owner: str, now: datetime, expires_at: datetime) -> Run | None:
        runs = self.table
        pick = (
            sa.select(runs.c.id)
            .where(runs.c.status == RunStatus.IN_PROGRESS.value, runs.c.lease_owner.is_(None))
            .order_by(runs.c.created_at, runs.c.id)
            .limit(1)
        )
        if self.conn.dialect.name == "postgresql":
            pick = pick.with_for_update(skip_locked=True)
        stmt = (
            sa.update(runs)
            .where(runs.c.id == pick.scalar_subquery(), runs.c.lease_owner.is_(None))
            .values(
                lease_owner=owner,
                lease_expires_at=expires_at,
                started_at=sa.func.coalesce(
                    runs.c.started_at, sa.bindparam("now_", now, type_=t.UTCDateTime())
                ),
            )
            .returning(runs.c.id)
        )
        claimed = (await self.conn.execute(stmt)).scalar_one_or_none()
        return await self.get(claimed) if claimed is not None else None

    async def renew_lease(self, run_id: uuid.UUID, owner: str, expires_at: datetime) -> bool:
        result = await self.conn.execute(
            sa.update(self.table)
            .where(
                self.table.c.id == run_id,
                self.table.c.lease_owner == owner,
                self.table.c.status == RunStatus.IN_PROGRESS.value,
            )
            .values(lease_expires_at=expires_at)
        )
        return bool(result.rowcount)

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
        rows = await self.conn.execute(
            sa.select(self.table.c.id).where(
                self.table.c.id.in_(list(run_ids)), self.table.c.cancel_requested
            )
        )
        return set(rows.scalars())

    async def append_logs(self, entries: Sequence[RunLogEntry]) -> None:
        if not entries:
            return
        await self.conn.execute(
            sa.insert(t.run_logs),
            [
                {"run_id": e.run_id, "at": e.at, "level": e.level, "step_id": e.step_id, "message": e.message}
                for e in entries
            ],
        )

    async def list_logs(self, run_id: uuid.UUID, query: LogQuery) -> Page[RunLogEntry]:
        logs = t.run_logs
        filters: list[sa.ColumnElement[bool]] = [logs.c.run_id == run_id]
        if query.q:
            filters.append(sa.func.lower(logs.c.message).like(_like(query.q), escape="\\"))
        rows = await self.conn.execute(
            sa.select(logs).where(*filters).order_by(logs.c.seq).limit(query.limit).offset(query.offset)
        )
        items = tuple(
            RunLogEntry(
                run_id=r.run_id, message=r.message, level=r.level, step_id=r.step_id, at=r.at, seq=r.seq
            )
            for r in rows
        )
        total = (
            await self.conn.execute(sa.select(sa.func.count()).select_from(logs).where(*filters))
        ).scalar_one()
        return Page(items=items, total=int(total), page=query.page, limit=query.limit)

    async def rename_scenario(self, scenario_id: uuid.UUID, name: str) -> None:
        await self.conn.execute(
            sa.update(self.table).where(self.table.c.scenario_id == scenario_id).values(scenario_name=name)
        )
