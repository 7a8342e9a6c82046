"""Rows inserted by the repositories: on SQLite through the driver, on PostgreSQL held for the next statement.

A create (a quarter of the dashboard load, docs/deployment.md "Performance under load") inserts a
scenario, its steps, its revision's fields, step bodies and row, and its audit entry. Through
SQLAlchemy each INSERT cost eight times what SQLite spends on it (0.2 against 0.025 ms of CPU), for
work done once per table and columns: compiling, keying, processing. So on SQLite the statement is
compiled once per table and set of columns, by SQLAlchemy for the store's own dialect; each row's
values go through the columns' own bind processors (the engine's, JSON serializer included), exactly
what SQLAlchemy would send, and the driver runs it on the unit of work's connection, inside its
transaction.

On PostgreSQL a statement is a round trip, which costs more than SQLAlchemy's work: a create was
eight (BEGIN, six INSERTs, COMMIT), each a wait for the server and a turn of the event loop. So rows
that answer nothing are held, per connection, and go with the connection's next statement: as
``WITH`` clauses of the next INSERT that answers something (one row of it), else as one statement of
their own just before any other statement or the commit (:func:`hold_inserts_until_the_next_statement`
hooks the engine's events; :func:`send_held` sends them by hand before the driver is used straight).
PostgreSQL runs the data-modifying ``WITH`` clauses of a statement with it, foreign keys checked at
its end, so a create is five round trips and sees what it wrote. A row that breaks a constraint is
refused by the statement that carries it: at the latest by the commit, which the unit of work turns
into a conflict as before.
"""

from __future__ import annotations

import functools
import sqlite3
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scenariokit.domain.errors import Conflict

Processor = Callable[[Any], Any] | None


@functools.cache
def insert_statement(table: sa.Table, returning: tuple[str, ...] = ()) -> sa.Insert:
    """The INSERT of a table, its values given as parameters; ``returning`` names columns it answers."""
    statement = sa.insert(table)
    return statement.returning(*(table.c[name] for name in returning)) if returning else statement


def _processor(dialect: Dialect, table: sa.Table, column: str) -> Processor:
    """The bind processor of ``table``'s ``column`` for ``dialect``: what SQLAlchemy applies to its values."""
    return table.c[column].type.dialect_impl(dialect).bind_processor(dialect)


@functools.cache
def _compiled(
    dialect: Dialect, table: sa.Table, columns: tuple[str, ...], returning: tuple[str, ...]
) -> tuple[str, tuple[str, ...], tuple[Processor, ...]]:
    """SQLite: the INSERT of ``columns`` as SQL text, its parameters' keys in order, and each one's bind
    processor for ``dialect`` (the engine's own: its JSON serializer is the store's)."""
    compiled = insert_statement(table, returning).compile(dialect=dialect, column_keys=list(columns))
    keys = tuple(compiled.positiontup or ())
    processors = tuple(_processor(dialect, table, key) for key in keys)
    return str(compiled), keys, processors


async def insert_rows(
    conn: AsyncConnection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    returning: tuple[str, ...] = (),
) -> list[Sequence[Any]]:
    """Insert ``rows`` (each naming the same columns) in ``conn``'s transaction; with ``returning``,
    each row's values of those columns, in the order the rows were given."""
    if not rows:
        return []
    if conn.dialect.name != "sqlite":
        return await _insert_on_postgresql(conn, table, rows, returning)
    if not conn.in_transaction():  # after a commit: begin as a statement through SQLAlchemy would
        await conn.begin()
    sql, keys, processors = _compiled(conn.dialect, table, tuple(rows[0]), returning)
    values = [
        tuple(
            row[key] if process is None else process(row[key])
            for key, process in zip(keys, processors, strict=True)
        )
        for row in rows
    ]
    driver: Any = await driver_of(conn)
    try:
        if returning:  # SQLite answers RETURNING only to one row's execute
            answered: list[Sequence[Any]] = []
            for one in values:
                answered.extend(await driver.execute_fetchall(sql, one))
            return answered
        if len(values) == 1:
            await driver.execute_fetchall(sql, values[0])
        else:
            cursor = await driver.executemany(sql, values)
            await cursor.close()
    except sqlite3.IntegrityError as exc:  # past SQLAlchemy, which would have wrapped it
        raise write_conflict(exc) from None
    return []


async def driver_of(conn: AsyncConnection) -> Any:
    """The driver's connection under ``conn``: read straight off a live one (SQLAlchemy's async getter
    hops through a greenlet for it); only one that must reconnect takes the getter."""
    sync = conn.sync_connection
    if sync is not None and not (sync.closed or sync.invalidated):
        return sync.connection.driver_connection
    return (await conn.get_raw_connection()).driver_connection


def write_conflict(refusal: BaseException) -> Conflict:
    """The conflict a write the database refused for a constraint (``refusal``: the driver's error) is."""
    return Conflict(f"the write conflicts with stored data ({type(refusal).__name__})")


#: The rows each PostgreSQL connection holds for its next statement: (table, rows) in insertion order.
_HELD: weakref.WeakKeyDictionary[sa.Connection, list[tuple[sa.Table, list[Mapping[str, Any]]]]] = (
    weakref.WeakKeyDictionary()
)

#: One held table's part of a statement: the table, its columns, and how many rows.
Part = tuple[sa.Table, tuple[str, ...], int]


async def _insert_on_postgresql(
    conn: AsyncConnection, table: sa.Table, rows: Sequence[Mapping[str, Any]], returning: tuple[str, ...]
) -> list[Sequence[Any]]:
    sync = conn.sync_connection
    assert sync is not None
    if not returning:
        _HELD.setdefault(sync, []).append((table, list(rows)))
        return []
    held = _HELD.pop(sync, [])
    if len(rows) != 1:  # RETURNING of several rows: SQLAlchemy's own statement, which answers in order
        if held:
            await conn.run_sync(_send, held)
        result = await conn.execute(insert_statement(table, returning), list(rows))
        return list(result.all())
    parts = [*held, (table, list(rows))]
    sql, sources = _statement(conn.dialect, _shape(parts), returning)
    result = await conn.exec_driver_sql(sql, _values(parts, sources))
    return list(result.all())


def _shape(parts: Sequence[tuple[sa.Table, Sequence[Mapping[str, Any]]]]) -> tuple[Part, ...]:
    return tuple((table, tuple(rows[0]), len(rows)) for table, rows in parts)


#: Where one parameter of a held statement comes from: part, row, column, and the column's processor.
Source = tuple[int, int, str, Processor]


def _values(
    parts: Sequence[tuple[sa.Table, Sequence[Mapping[str, Any]]]], sources: tuple[Source, ...]
) -> tuple[Any, ...]:
    """The parameters of a :func:`_statement`, in its order, each processed as its column's."""
    values = []
    for part, row, column, process in sources:
        value = parts[part][1][row][column]
        values.append(value if process is None else process(value))
    return tuple(values)


@functools.lru_cache(maxsize=256)  # a shape counts rows: scenarios of every length would grow it unbounded
def _statement(
    dialect: Dialect, shape: tuple[Part, ...], returning: tuple[str, ...] = ()
) -> tuple[str, tuple[Source, ...]]:
    """One statement inserting every part of ``shape``: the last as the statement, the others as its
    ``WITH`` clauses; its SQL for ``dialect`` and where each of its parameters comes from, in order.
    Compiled once per shape (tables, columns, numbers of rows)."""
    inserts = []
    sources: dict[str, Source] = {}
    for part, (table, columns, count) in enumerate(shape):
        values = []
        for row in range(count):
            one = {}
            for column in columns:
                name = f"p{len(sources)}"
                sources[name] = (part, row, column, _processor(dialect, table, column))
                one[column] = sa.bindparam(name, type_=table.c[column].type)
            values.append(one)
        inserts.append(sa.insert(table).values(values))
    last = inserts[-1]
    if returning:
        last = last.returning(*(shape[-1][0].c[name] for name in returning))
    statement = last.add_cte(*(insert.cte(f"held_{i}") for i, insert in enumerate(inserts[:-1])))
    compiled = statement.compile(dialect=dialect)
    return str(compiled), tuple(sources[name] for name in compiled.positiontup or ())


def _send(sync: sa.Connection, held: list[tuple[sa.Table, list[Mapping[str, Any]]]]) -> None:
    """Run the ``held`` rows' statement on ``sync`` (SQLAlchemy's synchronous side of the connection)."""
    sql, sources = _statement(sync.dialect, _shape(held))
    sync.exec_driver_sql(sql, _values(held, sources))


def _send_held(sync: sa.Connection, *_: Any) -> None:
    held = _HELD.pop(sync, None)
    if held:
        _send(sync, held)


async def send_held(conn: AsyncConnection) -> None:
    """Send the rows ``conn`` holds now: before its driver is used straight, past SQLAlchemy's events."""
    sync = conn.sync_connection
    if sync is not None and sync in _HELD:
        await conn.run_sync(_send_held)


def hold_inserts_until_the_next_statement(engine: AsyncEngine) -> None:
    """Send a PostgreSQL connection's held rows before its next statement or commit; drop them on rollback."""
    event.listen(engine.sync_engine, "before_execute", _send_held)
    event.listen(engine.sync_engine, "commit", _send_held)
    event.listen(engine.sync_engine, "rollback", lambda sync: _HELD.pop(sync, None))
