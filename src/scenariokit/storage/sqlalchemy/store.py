"""The SQLAlchemy store: engine, units of work and migrations, for SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import os
import re
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, urlencode, urlsplit

import aiosqlite
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from scenariokit.domain.errors import ScenarioKitError
from scenariokit.storage import ports
from scenariokit.storage.secrets import (
    KeyRing,
    KeyRotation,
    SecretBox,
    SecretKeyError,
    describe_fingerprints,
    split_keys,
)

from . import repositories as r
from . import tables as t
from .inserts import hold_inserts_until_the_next_statement, send_held, write_conflict
from .rows import read_json, write_json

log = logging.getLogger(__name__)
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


#: How JSON columns are written and read: strict JSON (no NaN), numbers as they were written.
_JSON_CODEC: dict[str, Any] = {"json_serializer": write_json, "json_deserializer": read_json}


#: The ``sqlite_begin`` of a reading unit of work: no BEGIN, each statement in its own snapshot.
READ_STATEMENTS = "statements"


class _RunAtOnce:
    """Stands in for aiosqlite's queue to its thread: a call put on it runs at once, on this thread."""

    @staticmethod
    def put_nowait(item: tuple[asyncio.Future[Any] | None, Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as exc:
            if future is None:
                raise
            future.set_exception(exc)
        else:
            if future is not None:
                future.set_result(result)


class InlineSqliteConnection(aiosqlite.Connection):
    """An aiosqlite connection whose calls run on the event loop's own thread.

    aiosqlite hands every call (execute, fetch, close) to a thread of its own and back: a dozen thread
    switches for one page, which cost more than the page's query — and on a busy loop each switch back
    waits for its turn behind every request in flight. Nothing an inline connection does may wait on a
    lock: a read in WAL mode never waits for the writer; a write begins (``BEGIN IMMEDIATE``) without
    a busy timeout, and when another process holds the write lock the unit of work takes a threaded
    connection instead, whose wait does not stop the loop. Having begun, a WAL writer waits for
    nothing. SQLAlchemy's adapter puts some calls on the queue itself, so the queue is what is replaced.
    """

    def __init__(self, connector: Callable[[], sqlite3.Connection]) -> None:
        super().__init__(connector, iter_chunk_size=64)
        self._tx = _RunAtOnce()  # type: ignore[assignment]

    def __await__(self) -> Generator[Any, None, aiosqlite.Connection]:
        return self._connect().__await__()  # no thread to start

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a call at once (aiosqlite's own ``execute_fetchall``, ``executemany``, ``commit``…): what
        its queue would do here, without the future and the partial each call made to go through it."""
        if not self._running or not self._connection:
            raise ValueError("Connection closed")
        return fn(*args, **kwargs)


#: How long an inline read may wait for a lock (only a WAL recovery holds one): it waits on the loop.
READ_BUSY_TIMEOUT_MS = 250
#: Inline writers do not checkpoint as they commit (a checkpoint syncs the file, on the loop): every this
#: many inline write transactions, a passive checkpoint runs on a threaded connection instead.
CHECKPOINT_EVERY_WRITES = 500
#: How many connections a store keeps open between reading units of work (:class:`KeptReads`).
KEPT_READS = 4


def _make_engine(
    async_url: str, schema: str | None, *, inline: str | None = None, reading: bool = False
) -> AsyncEngine:
    """The engine of a store; ``inline`` (``"read"``, ``"write"``): a SQLite file's inline connections;
    ``reading``: PostgreSQL's connections of reading units of work (autocommit)."""
    if async_url.startswith("sqlite"):
        memory = sqlite_path(async_url) is None
        # A file: a small pool, so reads (WAL: never blocked by the writer) run beside the one writer.
        # Every unit of work ends its transaction before the connection goes back, so the pool's own
        # rollback on return (a round trip to aiosqlite's thread) has nothing to do.
        pool: dict[str, Any] = (
            {"poolclass": StaticPool}
            if memory
            else {"pool_size": 4, "max_overflow": 4, "pool_reset_on_return": None}
        )
        extra: dict[str, Any] = {}
        if inline is not None:
            path = str(sqlite_path(async_url))

            async def connect_inline() -> aiosqlite.Connection:
                return await InlineSqliteConnection(
                    functools.partial(sqlite3.connect, path, check_same_thread=False)
                )

            extra["async_creator"] = connect_inline
        engine = create_async_engine(
            async_url,
            **_JSON_CODEC,
            connect_args={"check_same_thread": False, "timeout": 30},
            # the inline read engine serves reading units of work only: none of its connections begins
            execution_options={"sqlite_begin": READ_STATEMENTS} if inline == "read" else {},
            **pool,
            **extra,
        )
        busy_timeout = {"read": READ_BUSY_TIMEOUT_MS, "write": 0}.get(inline or "", 30000)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _: Any) -> None:
            # Transactions are begun by hand below, so pysqlite's own BEGIN handling is switched off.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            if not memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={busy_timeout}")
            if inline == "write":
                cursor.execute("PRAGMA wal_autocheckpoint=0")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            # A writer takes the lock at BEGIN, so two writers wait in turn instead of deadlocking
            # when each tries to upgrade a read lock.
            mode = conn.get_execution_options().get("sqlite_begin", "")
            if mode != READ_STATEMENTS:
                conn.exec_driver_sql(f"BEGIN {mode}".strip())

        return engine
    connect_args: dict[str, Any] = {}
    if schema:
        connect_args["server_settings"] = {"search_path": schema}
    # Reads run outside a transaction on connections kept in autocommit: switching a pooled connection
    # to it and back for each read cost more than the read's own statement, in CPU and round trips.
    # Ten connections each, and no overflow: an overflow connection is closed as it comes back, so under
    # a dashboard's 32 connections the pools started and ended hundreds of PostgreSQL backends a minute
    # (a third of the database's CPU, and the slowest answers while each connected). A unit of work
    # past the ten waits its turn for one instead.
    kept: dict[str, Any] = {"pool_size": 10, "max_overflow": 0}
    if reading:
        kept["isolation_level"] = "AUTOCOMMIT"
    engine = create_async_engine(async_url, connect_args=connect_args, **kept, **_JSON_CODEC)
    _ping_when_idle(engine)
    if not reading:
        hold_inserts_until_the_next_statement(engine)
    return engine


#: A pooled connection unused this long is pinged before it is handed out again.
IDLE_PING_SECONDS = 10.0


def _ping_when_idle(engine: AsyncEngine) -> None:
    """Hand out no connection a database restart has broken, without a ping on every checkout.

    ``pool_pre_ping`` costs three round trips per checkout on asyncpg (BEGIN, the ping, ROLLBACK): more
    than the queries of a page. A connection that was in use a moment ago is alive; one idle for
    :data:`IDLE_PING_SECONDS` is pinged, and replaced by a fresh one when the ping fails. A disconnect
    met later still invalidates the whole pool, as SQLAlchemy does.
    """

    @event.listens_for(engine.sync_engine, "checkin")
    def _checked_in(_: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, _: Any) -> None:
        since = record.info.pop("idle_since", None)
        if since is not None and time.monotonic() - since > IDLE_PING_SECONDS:
            try:
                dbapi_connection.ping()
            except Exception as exc:  # any failure: the pool retries with a new connection
                raise sa.exc.DisconnectionError(f"idle connection is gone: {exc}") from exc


class KeptReads:
    """Reading units of work's connections, kept open for the next one rather than given back.

    Taking a connection from SQLAlchemy's pool and closing it again (two greenlet hops, the pool's
    checkout, checkin and reset) cost more than a page's own statements: an empty reading unit of work
    took 116 µs, 6 µs with a kept connection. Up to :data:`KEPT_READS` are kept, the last kept taken
    first; one that ended in an error is closed instead. A kept connection reads in autocommit (SQLite's
    inline reads, PostgreSQL's reading engine), so each statement reads the latest commit. On
    PostgreSQL one kept longer than :data:`IDLE_PING_SECONDS` is pinged before it is handed out, as the
    pool pings its own; and once any connection of the engine is found broken (a database restart), the
    ones kept before are closed, not handed out.
    """

    def __init__(self, engine: AsyncEngine, *, ping_when_idle: bool) -> None:
        self._kept: list[tuple[AsyncConnection, float, int]] = []
        self._ping_when_idle = ping_when_idle
        self._broken_seen = 0  # how many times a connection of the engine was found broken
        self._closed = False

        @event.listens_for(engine.sync_engine, "invalidate")
        def _found_broken(*_: Any) -> None:
            self._broken_seen += 1

    @property
    def connections(self) -> list[AsyncConnection]:
        """The kept connections, the next one to be handed out last."""
        return [conn for conn, _, _ in self._kept]

    async def take(self) -> AsyncConnection | None:
        """A kept connection that is alive, or None (the caller connects)."""
        while self._kept:
            conn, since, broken_seen = self._kept.pop()
            if broken_seen != self._broken_seen:
                await _close_quietly(conn)
                continue
            if self._ping_when_idle and time.monotonic() - since > IDLE_PING_SECONDS:
                try:
                    await conn.exec_driver_sql("SELECT 1")
                except Exception:  # any failure: gone, as the pool's own ping would find
                    await _close_quietly(conn)
                    continue
            return conn
        return None

    def keep(self, conn: AsyncConnection) -> bool:
        """Keep ``conn``, which ended its unit of work cleanly; False: not kept (the caller closes it)."""
        sync = conn.sync_connection
        if self._closed or sync is None or sync.closed or sync.invalidated or len(self._kept) >= KEPT_READS:
            return False
        self._kept.append((conn, time.monotonic(), self._broken_seen))
        return True

    async def close(self) -> None:
        """Close the kept connections and keep no more (a read ending later closes its own)."""
        self._closed = True
        kept, self._kept = self._kept, []
        for conn, _, _ in kept:
            await _close_quietly(conn)


async def _close_quietly(conn: AsyncConnection) -> None:
    """Give ``conn`` back to its pool; a broken one may fail to reset there, which changes nothing."""
    with contextlib.suppress(Exception):
        await conn.close()


class SqlUnitOfWork(ports.UnitOfWork):
    """A transaction on one pooled connection, with every repository bound to it."""

    def __init__(self, store: SqlStore, *, readonly: bool) -> None:
        self._store = store
        self._engine = store.read_engine if readonly else store.engine
        self._readonly = readonly
        self._serial = store._serial or (None if readonly else store._writer)
        self._conn: AsyncConnection | None = None

    async def __aenter__(self) -> Self:
        box = await self._store.secret_box()
        activity = self._store.activity
        if self._readonly:
            activity.reads += 1
        else:
            activity.writes += 1
        if self._serial is not None:
            await self._serial.acquire()
        try:
            conn = await self._begin()
        except BaseException:
            if self._serial is not None:
                self._serial.release()
            raise
        self._conn = conn
        self.scenarios = r.ScenarioRepository(conn, box)
        self.environments = r.EnvironmentRepository(conn, box)
        self.credentials = r.CredentialRepository(conn, box)
        self.snippets = r.SnippetRepository(conn, box)
        self.sessions = r.SessionRepository(conn, box)
        self.runs = r.RunRepository(conn, box)
        self.schedules = r.ScheduleRepository(conn, box)
        self.audit = r.AuditRepository(conn, box)
        self.revisions = r.RevisionRepository(conn, box)
        return self

    async def _begin(self) -> AsyncConnection:
        """A connection with its transaction begun: inline where nothing can make it wait."""
        if self._readonly and self._store.kept_reads is not None:
            kept = await self._store.kept_reads.take()
            if kept is not None:
                return kept
        inline = self._store.write_engine if not self._readonly else None
        if inline is not None:
            try:
                conn = await self._connect(inline)
            except sa.exc.OperationalError as exc:
                if not _locked(exc):  # another process holds SQLite's write lock: wait on a thread
                    raise
            else:
                self._store.count_inline_write()
                return conn
        return await self._connect(self._engine)

    async def _connect(self, engine: AsyncEngine) -> AsyncConnection:
        """Connect and begin the unit of work's transaction."""
        conn = await engine.connect()
        try:
            # A reading unit of work sends no BEGIN: each statement reads a snapshot of its own, as
            # under PostgreSQL's READ COMMITTED in a transaction or not (on SQLite: three hops to
            # aiosqlite's thread less; on PostgreSQL: BEGIN and ROLLBACK, two round trips less).
            if conn.dialect.name == "sqlite":
                begin = READ_STATEMENTS if self._readonly else "IMMEDIATE"
                given = conn.sync_connection.get_execution_options()  # type: ignore[union-attr]
                if given.get("sqlite_begin") != begin:  # the inline read engine gives its own
                    conn = await conn.execution_options(sqlite_begin=begin)
                if self._readonly:
                    # Nothing to send: SQLAlchemy's own bookkeeping begins with a first statement
                    # through it, and a page read straight from the driver needs none.
                    return conn
            elif self._readonly:
                return conn  # the read engine's connections are in autocommit: nothing to begin
            await conn.begin()
        except BaseException:
            await conn.close()
            raise
        return conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        kept = False
        try:
            if conn.in_transaction():
                await conn.rollback()
            reads = self._store.kept_reads
            kept = exc_type is None and self._readonly and reads is not None and reads.keep(conn)
        finally:
            if not kept:
                await conn.close()
            if self._serial is not None:
                self._serial.release()

    async def commit(self) -> None:
        if self._conn is None:
            raise RuntimeError("commit() outside 'async with'")
        try:
            await send_held(self._conn)  # (the commit's own event would send them too, but unmapped)
            await self._conn.commit()
        except sa.exc.IntegrityError as exc:
            raise _conflict(exc) from None
        self._store.activity.commits += 1
        # A statement after the commit begins the next transaction itself (SQLAlchemy's autobegin, with
        # the same BEGIN): none is begun here only to be rolled back, holding SQLite's write lock.

    async def rollback(self) -> None:
        if self._conn is not None and self._conn.in_transaction():
            await self._conn.rollback()


def _locked(exc: sa.exc.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds the lock (``SQLITE_BUSY``)."""
    return isinstance(exc.orig, sqlite3.OperationalError) and "locked" in str(exc.orig)


def _conflict(exc: sa.exc.IntegrityError) -> ScenarioKitError:
    return write_conflict(exc.orig or exc)


class SqlStore(ports.Store):
    """SQLite or PostgreSQL through SQLAlchemy's async engine.

    ``secret_key`` is the ``SCENARIOKIT_SECRET_KEY`` value: one or more keys, comma-separated. They
    are checked against the store's key fingerprints before the first unit of work (or by
    :meth:`check_keys`, which ``open_store`` calls), so keys that cannot read the store stop it there.
    """

    def __init__(self, url: str, *, secret_key: str) -> None:
        split_keys(secret_key)  # a setting with no key at all is refused before any connection
        self.url = url
        async_url, self.schema = normalize_url(url)
        self.dialect = "sqlite" if async_url.startswith("sqlite") else "postgresql"
        path = sqlite_path(async_url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.engine = _make_engine(async_url, self.schema)
        #: reading units of work connect here: inline connections for a SQLite file, autocommit ones for
        #: PostgreSQL, else (an in-memory SQLite database) the one engine
        inline = self.dialect == "sqlite" and path is not None
        self.read_engine = self.engine
        if inline:
            self.read_engine = _make_engine(async_url, self.schema, inline="read")
        elif self.dialect == "postgresql":
            self.read_engine = _make_engine(async_url, self.schema, reading=True)
        #: writing units of work try an inline connection first (SQLite file only)
        self.write_engine = _make_engine(async_url, self.schema, inline="write") if inline else None
        self._inline_writes = 0
        #: reading units of work's connections kept open for the next (not for an in-memory SQLite
        #: database, whose one connection its units of work take in turn)
        self.kept_reads = (
            KeptReads(self.read_engine, ping_when_idle=self.dialect == "postgresql")
            if self.read_engine is not self.engine
            else None
        )
        self.activity = ports.StoreActivity()
        self._checkpoint: asyncio.Task[None] | None = None
        self._secret_key = secret_key
        self._box: SecretBox | None = None
        self._keys_checked = asyncio.Lock()
        # An in-memory SQLite database lives on one shared connection: its units of work take turns.
        in_memory = self.dialect == "sqlite" and path is None
        self._serial = asyncio.Lock() if in_memory else None
        # A SQLite file has one writer at a time: this process's writers queue here, in order, rather
        # than in SQLite's busy handler, which sleeps and retries (seconds of p99 under a burst of writes).
        # Readers take no turn: in WAL mode they never wait for the writer.
        self._writer = asyncio.Lock() if self.dialect == "sqlite" and not in_memory else None

    def unit_of_work(self, *, readonly: bool = False) -> SqlUnitOfWork:
        return SqlUnitOfWork(self, readonly=readonly)

    def count_inline_write(self) -> None:
        """Count an inline write; every :data:`CHECKPOINT_EVERY_WRITES`, checkpoint off the loop."""
        self._inline_writes += 1
        if self._inline_writes % CHECKPOINT_EVERY_WRITES == 0 and (
            self._checkpoint is None or self._checkpoint.done()
        ):
            self._checkpoint = asyncio.create_task(self.checkpoint())

    async def checkpoint(self) -> None:
        """Copy the WAL into the database file (``PASSIVE``: waits for nobody), on aiosqlite's thread."""
        try:
            async with self.engine.connect() as conn:
                await conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception as exc:  # the next one will try again; a failed checkpoint loses nothing
            log.warning("a WAL checkpoint failed: %s", exc)

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction outside the units of work (keys, rotation); committed by the caller."""
        async with contextlib.AsyncExitStack() as stack:
            turn = self._serial or self._writer
            if turn is not None:
                await stack.enter_async_context(turn)
            conn = await stack.enter_async_context(self.engine.connect())
            if self.dialect == "sqlite":
                conn = await conn.execution_options(sqlite_begin="IMMEDIATE")
            await conn.begin()
            yield conn

    async def secret_box(self) -> SecretBox:
        """The keys of this store, checked against it on first use (see :meth:`check_keys`)."""
        if self._box is None:
            await self.check_keys()
        if self._box is None:
            raise ScenarioKitError("the database has no scenariokit schema yet: run `scenariokit db upgrade`")
        return self._box

    async def check_keys(self) -> None:
        """Bind the configured keys to this store, or refuse them with :class:`SecretKeyError`.

        Passphrases are derived with the store's salt (made on first use). Every key fingerprint the
        store records must belong to a configured key, else something stored could not be decrypted;
        the encrypting key's fingerprint is recorded before it writes anything. A store from before
        fingerprints is checked by decrypting what it holds. An unmigrated database is left alone.
        """
        async with self._keys_checked:
            if self._box is not None:
                return
            ring: KeyRing | None = None
            for attempt in range(3):
                try:
                    async with self._writing() as conn:
                        ring = await self._bind_keys(conn)
                        await conn.commit()
                    break
                except sa.exc.IntegrityError:  # another process recorded its salt or keys first
                    if attempt == 2:
                        raise
            if ring is not None:
                self._box = SecretBox(ring)

    async def _bind_keys(self, conn: AsyncConnection) -> KeyRing | None:
        if not await conn.run_sync(lambda sync: sa.inspect(sync).has_table(t.store_metadata.name)):
            return None
        meta = t.store_metadata
        stored = {row.name: row.value for row in await conn.execute(sa.select(meta))}
        if "key_salt" in stored:
            salt = base64.b64decode(stored["key_salt"])
        else:
            salt = os.urandom(16)
            await conn.execute(sa.insert(meta).values(name="key_salt", value=base64.b64encode(salt).decode()))
        ring = KeyRing.from_setting(self._secret_key, salt=salt)
        if "key_fingerprints" in stored:
            known = set(filter(None, stored["key_fingerprints"].split(",")))
            missing = known - ring.fingerprints
            if missing:
                raise SecretKeyError(
                    "SCENARIOKIT_SECRET_KEY cannot decrypt this store: it holds secrets written with the "
                    f"key(s) fingerprinted {describe_fingerprints(missing)}, which are not among the "
                    f"configured keys ({describe_fingerprints(ring.fingerprints)}). Give every key the store "
                    "was written with (the new key first, the old ones after a comma, while rotating); "
                    'see docs/deployment.md, "Keys and rotation"'
                )
            if ring.primary not in known:
                await conn.execute(
                    sa.update(meta)
                    .where(meta.c.name == "key_fingerprints")
                    .values(value=",".join(sorted(known | {ring.primary})))
                )
            return ring
        used = await self._fingerprints_in_use(conn, ring)
        value = ",".join(sorted(used | {ring.primary}))
        await conn.execute(sa.insert(meta).values(name="key_fingerprints", value=value))
        return ring

    @staticmethod
    async def _fingerprints_in_use(conn: AsyncConnection, ring: KeyRing) -> set[str]:
        """Which keys encrypted the secrets stored so far; refuses when one of them is not configured."""
        used: set[str] = set()
        unreadable = 0
        for table, column in t.ENCRYPTED_COLUMNS:
            rows = await conn.execute(sa.select(table.c[column]).where(table.c[column].is_not(None)))
            for (token,) in rows:
                found = ring.fingerprint_of(token)
                if found is None:
                    unreadable += 1
                else:
                    used.add(found)
        if unreadable:
            raise SecretKeyError(
                f"SCENARIOKIT_SECRET_KEY cannot decrypt this store: {unreadable} stored secret(s) were "
                'written with another key; see docs/deployment.md, "Keys and rotation"'
            )
        return used

    async def rotate_keys(self) -> KeyRotation:
        """Re-encrypt every stored secret with the first key, in one transaction; counts per column.

        Afterwards the store records only the first key's fingerprint, so the others can be dropped.
        Nothing changes when any secret cannot be decrypted.
        """
        box = await self.secret_box()
        counts: dict[str, int] = {}
        async with self._writing() as conn:
            for table, column in t.ENCRYPTED_COLUMNS:
                rows = (
                    await conn.execute(
                        sa.select(table.c.id, table.c[column]).where(table.c[column].is_not(None))
                    )
                ).all()
                for ident, token in rows:
                    await conn.execute(
                        sa.update(table).where(table.c.id == ident).values({column: box.rotate(token)})
                    )
                counts[f"{table.name}.{column}"] = len(rows)
            await conn.execute(
                sa.update(t.store_metadata)
                .where(t.store_metadata.c.name == "key_fingerprints")
                .values(value=box.ring.primary)
            )
            await conn.commit()
        return KeyRotation(counts=counts, fingerprint=box.ring.primary)

    async def ping(self) -> None:
        async with self.read_engine.connect() as conn:
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
        from scenariokit.storage.migrations import upgrade_connection

        await self.create_schema()
        async with self.engine.begin() as conn:
            await conn.run_sync(upgrade_connection)

    async def current_revision(self) -> str | None:
        """The migration revision the database is at, or None before the first one."""
        from scenariokit.storage.migrations import current_revision

        async with self.engine.connect() as conn:
            return await conn.run_sync(current_revision)

    async def close(self) -> None:
        if self.kept_reads is not None:
            await self.kept_reads.close()
        if self._checkpoint is not None:
            await asyncio.gather(self._checkpoint, return_exceptions=True)
        if self.write_engine is not None:
            await self.write_engine.dispose()
            await self.checkpoint()
        if self.read_engine is not self.engine:
            await self.read_engine.dispose()
        await self.engine.dispose()


def unique_schema(prefix: str = "sk") -> str:
    """A fresh schema name, for isolating a test run on a shared PostgreSQL."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"
