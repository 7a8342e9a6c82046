"""The SQLAlchemy store: engine, units of work and migrations, for SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, urlencode, urlsplit

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from scenariokit import ports
from scenariokit.domain.errors import ScenarioKitError
from scenariokit.domain.json_values import MAX_INT, MIN_INT
from scenariokit.secrets import SecretBox

from . import repositories as r

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def normalize_url(url: str) -> tuple[str, str | None]:
    """The SQLAlchemy async URL for a user's URL, and the PostgreSQL schema it names (``?schema=``).

    ``sqlite:///x.db`` becomes ``sqlite+aiosqlite:///x.db``; ``postgres://`` and ``postgresql://``
    become ``postgresql+asyncpg://``.
    """
    parts = urlsplit(url)
    scheme = parts.scheme
    if scheme in ("sqlite", "sqlite+aiosqlite"):
        scheme = "sqlite+aiosqlite"
    elif scheme in ("postgres", "postgresql", "postgresql+asyncpg"):
        scheme = "postgresql+asyncpg"
    else:
        raise ScenarioKitError(f"unsupported database URL scheme {parts.scheme!r}")
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in params if key == "schema"), None)
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise ScenarioKitError(f"invalid schema name {schema!r} in the database URL")
    query = urlencode([(key, value) for key, value in params if key != "schema"])
    # urlunsplit would drop the empty authority of "sqlite:///file.db"
    return f"{scheme}://{parts.netloc}{parts.path}" + (f"?{query}" if query else ""), schema


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL, or None for an in-memory database or another backend."""
    parts = urlsplit(url)
    if not parts.scheme.startswith("sqlite"):
        return None
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path or path == ":memory:":
        return None
    return Path(path)


def _stored_whole(text: str) -> int | float:
    # PostgreSQL writes a large float held in jsonb (1e300) as its digits: it was a float, so it reads back
    # as one; a whole number the JSON rule admits always fits 64 bits.
    if len(text) > 20:
        return float(text)
    value = int(text)
    return value if MIN_INT <= value <= MAX_INT else float(value)


#: How JSON columns are written and read: strict JSON (no NaN), numbers as they were written.
_JSON_CODEC: dict[str, Any] = {
    "json_serializer": functools.partial(json.dumps, allow_nan=False),
    "json_deserializer": functools.partial(json.loads, parse_int=_stored_whole),
}


def _make_engine(async_url: str, schema: str | None) -> AsyncEngine:
    if async_url.startswith("sqlite"):
        memory = sqlite_path(async_url) is None
        engine = create_async_engine(
            async_url,
            **_JSON_CODEC,
            connect_args={"check_same_thread": False, "timeout": 30},
            **({"poolclass": StaticPool} if memory else {}),
        )

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _: Any) -> None:
            # Transactions are begun by hand below, so pysqlite's own BEGIN handling is switched off.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            if not memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            # A writer takes the lock at BEGIN, so two writers wait in turn instead of deadlocking
            # when each tries to upgrade a read lock.
            mode = conn.get_execution_options().get("sqlite_begin", "")
            conn.exec_driver_sql(f"BEGIN {mode}".strip())

        return engine
    connect_args: dict[str, Any] = {}
    if schema:
        connect_args["server_settings"] = {"search_path": schema}
    return create_async_engine(
        async_url, pool_pre_ping=True, pool_size=10, connect_args=connect_args, **_JSON_CODEC
    )


class SqlUnitOfWork(ports.UnitOfWork):
    """A transaction on one pooled connection, with every repository bound to it."""

    def __init__(
        self, engine: AsyncEngine, box: SecretBox, *, readonly: bool, serial: asyncio.Lock | None = None
    ) -> None:
        self._engine = engine
        self._box = box
        self._readonly = readonly
        self._serial = serial
        self._conn: AsyncConnection | None = None

    async def __aenter__(self) -> Self:
        if self._serial is not None:
            await self._serial.acquire()
        try:
            conn = await self._engine.connect()
        except BaseException:
            if self._serial is not None:
                self._serial.release()
            raise
        if conn.dialect.name == "sqlite" and not self._readonly:
            conn = await conn.execution_options(sqlite_begin="IMMEDIATE")
        await conn.begin()
        self._conn = conn
        self.scenarios = r.ScenarioRepository(conn, self._box)
        self.environments = r.EnvironmentRepository(conn, self._box)
        self.credentials = r.CredentialRepository(conn, self._box)
        self.snippets = r.SnippetRepository(conn, self._box)
        self.sessions = r.SessionRepository(conn, self._box)
        self.runs = r.RunRepository(conn, self._box)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if conn.in_transaction():
                await conn.rollback()
        finally:
            await conn.close()
            if self._serial is not None:
                self._serial.release()

    async def commit(self) -> None:
        if self._conn is None:
            raise RuntimeError("commit() outside 'async with'")
        try:
            await self._conn.commit()
        except sa.exc.IntegrityError as exc:
            raise _conflict(exc) from None
        await self._conn.begin()

    async def rollback(self) -> None:
        if self._conn is not None and self._conn.in_transaction():
            await self._conn.rollback()


def _conflict(exc: sa.exc.IntegrityError) -> ScenarioKitError:
    from scenariokit.domain.errors import Conflict

    return Conflict(f"the write conflicts with stored data ({type(exc.orig).__name__})")


class SqlStore(ports.Store):
    """SQLite or PostgreSQL through SQLAlchemy's async engine."""

    def __init__(self, url: str, *, secret_key: str) -> None:
        self.url = url
        async_url, self.schema = normalize_url(url)
        self.dialect = "sqlite" if async_url.startswith("sqlite") else "postgresql"
        path = sqlite_path(async_url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.engine = _make_engine(async_url, self.schema)
        self.box = SecretBox(secret_key)
        # An in-memory SQLite database lives on one shared connection: its units of work take turns.
        in_memory = self.dialect == "sqlite" and path is None
        self._serial = asyncio.Lock() if in_memory else None

    def unit_of_work(self, *, readonly: bool = False) -> SqlUnitOfWork:
        return SqlUnitOfWork(self.engine, self.box, readonly=readonly, serial=self._serial)

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def create_schema(self) -> None:
        """Create the PostgreSQL schema named in the URL when it does not exist."""
        if self.schema and self.dialect == "postgresql":
            async with self.engine.begin() as conn:
                await conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'))

    async def drop_schema(self) -> None:
        """Drop the PostgreSQL schema named in the URL with everything in it (tests use this)."""
        if self.schema and self.dialect == "postgresql":
            async with self.engine.begin() as conn:
                await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))

    async def upgrade(self) -> None:
        """Apply every pending alembic migration."""
        from scenariokit.migrations import upgrade_connection

        await self.create_schema()
        async with self.engine.begin() as conn:
            await conn.run_sync(upgrade_connection)

    async def current_revision(self) -> str | None:
        """The migration revision the database is at, or None before the first one."""
        from scenariokit.migrations import current_revision

        async with self.engine.connect() as conn:
            return await conn.run_sync(current_revision)

    async def close(self) -> None:
        await self.engine.dispose()


def unique_schema(prefix: str = "sk") -> str:
    """A fresh schema name, for isolating a test run on a shared PostgreSQL."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"
