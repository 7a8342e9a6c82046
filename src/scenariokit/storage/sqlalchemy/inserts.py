"""Rows inserted by the repositories: on SQLite through the driver, on PostgreSQL held for the next statement.

A create (a quarter of the dashboard load, docs/performance.md "The API under load") inserts a
scenario, its steps, its revision's fields, step bodies and row, and its audit entry. Through
SQLAlchemy each INSERT cost eight times what SQLite spends on it (0.2 against 0.025 ms of CPU), for
work done once per table and columns: compiling, keying, processing. So on SQLite the statement is
compiled once per table and set of columns, by SQLAlchemy for the store's own dialect; each row's
values go through the columns' own bind processors (the engine's, JSON serializer included), exactly
what SQLAlchemy would send, and the driver runs it on the unit of work's connection, inside its
transaction.

On PostgreSQL a statement is a round trip, which costs more than SQLAlchemy's work: a create was
eight (BEGIN, six INSERTs, COMMIT), each a wait for the server and a turn of the event loop. So the
rows are held, per connection, and go as one statement just before the connection's next statement
or its commit, the last table's INSERT with the others as its ``WITH`` clauses
(:func:`hold_inserts_until_the_next_statement` hooks the engine's events; :func:`send_held` sends them
by hand before the driver is used straight). PostgreSQL runs the data-modifying ``WITH`` clauses of a
statement with it, foreign keys checked at its end, so a unit of work sees what it wrote. A table's
rows go as one part, whatever number of ``insert_rows`` held them: a few as a ``VALUES`` list, more
as one array a column, so that no number of rows (an import of thousands of scenarios, a step's
100,000 lines of output) takes a statement past PostgreSQL's 32,767 parameters (:func:`_statement`).
A row that breaks a constraint is refused by the statement that carries it: at the latest by the commit, which
the unit of work turns into a conflict as before.

A row whose number the database gives (a revision's fields and step bodies, numbered by ``seq``) would
have to answer it, and an INSERT that answers is a round trip of its own. So on PostgreSQL
:func:`insert_numbered` draws the numbers ahead from the column's own sequence, :data:`DRAW_BLOCK` at a
time per engine and table (one ``nextval`` statement per block, sent as any statement is), and inserts
the rows with them like any row that answers nothing: a create is three round trips (BEGIN, all its
rows as one statement, COMMIT). Numbers drawn and not used are skipped, as a rolled-back insert skips
them: they name rows, they never count them or order them.
"""

from __future__ import annotations

import functools
import operator
import sqlite3
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from scenariokit.domain.errors import Conflict
from scenariokit.storage.sqlalchemy.tables import UTCDateTime, sqlite_time_text

Processor = Callable[[Any], Any] | None


@functools.cache
def insert_statement(table: sa.Table, returning: tuple[str, ...] = ()) -> sa.Insert:
    """The INSERT of a table, its values given as parameters; ``returning`` names columns it answers."""
    statement = sa.insert(table)
    return statement.returning(*(table.c[name] for name in returning)) if returning else statement


def _processor(dialect: Dialect, table: sa.Table, column: str) -> Processor:
    """The bind processor of ``table``'s ``column`` for ``dialect``: what SQLAlchemy applies to its values
    (a time on SQLite: the same text, written in one call)."""
    kind = table.c[column].type
    if isinstance(kind, UTCDateTime) and dialect.name == "sqlite":
        return sqlite_time_text
    return kind.dialect_impl(dialect).bind_processor(dialect)


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


async def insert_rows(conn: AsyncConnection, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (each naming the same columns) in ``conn``'s transaction: at once on SQLite, with
    the connection's next statement on PostgreSQL."""
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        await _insert_on_sqlite(conn, table, rows)
        return
    sync = conn.sync_connection
    assert sync is not None
    _HELD.setdefault(sync, []).append((table, list(rows)))


#: How many numbers of a sequence a PostgreSQL engine draws at once for :func:`insert_numbered`.
DRAW_BLOCK = 100

#: The numbers each PostgreSQL engine has drawn and not used yet, by table and column.
_DRAWN: weakref.WeakKeyDictionary[sa.Engine, dict[tuple[str, str], list[int]]] = weakref.WeakKeyDictionary()

#: ``count_`` numbers of the sequence behind ``table_``'s ``column_`` (serial or identity)
_NEXTVAL = sa.text(
    "SELECT nextval(pg_get_serial_sequence(:table_, :column_))"
    " FROM generate_series(1, CAST(:count_ AS integer))"
)


async def insert_numbered(
    conn: AsyncConnection, table: sa.Table, rows: Sequence[Mapping[str, Any]], *, column: str = "seq"
) -> list[int]:
    """Insert ``rows`` into ``table``, whose ``column`` the database numbers, and answer each row's number,
    in the order the rows were given.

    SQLite numbers them as it inserts them (RETURNING, in the process: no round trip to save). On
    PostgreSQL the numbers are drawn ahead from the column's sequence and the rows held with them, as
    :func:`insert_rows` holds any row.
    """
    if not rows:
        return []
    if conn.dialect.name == "sqlite":
        return [int(number) for (number,) in await _insert_on_sqlite(conn, table, rows, returning=(column,))]
    numbers = await _draw(conn, table, column, len(rows))
    await insert_rows(
        conn, table, [{**row, column: number} for row, number in zip(rows, numbers, strict=True)]
    )
    return numbers


async def _draw(conn: AsyncConnection, table: sa.Table, column: str, count: int) -> list[int]:
    """``count`` unused numbers of ``table``'s ``column``: the engine's drawn ones, more drawn when short."""
    drawn = _DRAWN.setdefault(conn.sync_engine, {}).setdefault((table.name, column), [])
    while len(drawn) < count:  # another task may take some while this one draws
        result = await conn.execute(
            _NEXTVAL, {"table_": table.name, "column_": column, "count_": max(count - len(drawn), DRAW_BLOCK)}
        )
        drawn.extend(int(number) for number in result.scalars())
    taken = drawn[:count]
    del drawn[:count]
    return taken


async def _insert_on_sqlite(
    conn: AsyncConnection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    returning: tuple[str, ...] = (),
) -> list[Sequence[Any]]:
    """Insert ``rows`` through the driver, in ``conn``'s transaction; with ``returning``, each row's values
    of those columns, in the order the rows were given."""
    if not conn.in_transaction():  # after a commit: begin as a statement through SQLAlchemy would
        await conn.begin()
    sql, keys, processors = _compiled(conn.dialect, table, tuple(rows[0]), returning)
    values = _row_values(keys, processors, rows)
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


def _row_values(
    keys: tuple[str, ...], processors: tuple[Processor, ...], rows: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """Each row's parameters in ``keys``' order, each through its column's processor where it has one.

    A row's values are taken by one ``itemgetter`` and only the processed ones replaced: a loud step's
    log lines come thousands to a write (7.9 against 9.9 µs a row, looping over every key).
    """
    if len(keys) < 2:  # an itemgetter of one key gives the value, not a tuple of it
        pairs = tuple(zip(keys, processors, strict=True))
        return [tuple(row[k] if p is None else p(row[k]) for k, p in pairs) for row in rows]
    take = operator.itemgetter(*keys)
    processed = [(at, process) for at, process in enumerate(processors) if process is not None]
    values: list[Any] = []
    for row in rows:
        one = list(take(row))
        for at, process in processed:
            one[at] = process(one[at])
        values.append(one)
    return values


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

#: The most rows a part of a held statement carries as a ``VALUES`` list; a part with more takes them as
#: arrays (see :func:`_statement`).
VALUES_ROWS = 16

#: One held table's part of a statement: the table, the columns its rows name, and how many rows as a
#: ``VALUES`` list (None: any number, as arrays).
Part = tuple[sa.Table, tuple[str, ...], int | None]

#: Where one parameter of a held statement comes from: part, row (None: the column's values of every
#: row, as an array), column, and the column's processor.
Source = tuple[int, int | None, str, Processor]


def _grouped(held: Sequence[tuple[sa.Table, Sequence[Mapping[str, Any]]]]) -> list[tuple[Part, list[Any]]]:
    """The held rows by table and columns, each group where its first rows were, its rows in order.

    A statement's foreign keys are checked at its end, so the order of its parts does not matter;
    inside a table the rows keep the order they were held in (a log's lines are numbered by it).
    """
    groups: dict[tuple[sa.Table, tuple[str, ...]], list[Any]] = {}
    for table, rows in held:
        groups.setdefault((table, tuple(rows[0])), []).extend(rows)
    return [
        ((table, columns, len(rows) if len(rows) <= VALUES_ROWS else None), rows)
        for (table, columns), rows in groups.items()
    ]


def _array_type(column: sa.Column[Any]) -> sa.ARRAY[Any]:
    """The array a column's values travel in: of the column's own type, a ``VARCHAR`` without its length.

    Cast to ``VARCHAR(n)[]``, an over-long value would be cut to ``n`` without a word (an explicit
    cast truncates); cast to ``VARCHAR[]`` it reaches the column, whose assignment refuses it.
    """
    element = column.type
    if type(element) is sa.String:
        element = sa.String()
    return postgresql.ARRAY(element)


def _part_insert(dialect: Dialect, part: int, shape: Part, sources: dict[str, Source]) -> sa.Insert:
    """The INSERT of one part of a held statement, its parameters' sources added to ``sources``."""
    table, columns, count = shape
    if count is None:
        arrays = []
        for column in columns:
            name = f"p{len(sources)}"
            sources[name] = (part, None, column, _processor(dialect, table, column))
            arrays.append(sa.bindparam(name, type_=_array_type(table.c[column])))
        unnested = sa.func.unnest(*arrays).table_valued(*columns, with_ordinality="held_order")
        rows = unnested.render_derived("held")
        ordered = sa.select(*(rows.c[column] for column in columns)).order_by(rows.c.held_order)
        return sa.insert(table).from_select(list(columns), ordered)
    values = []
    for row in range(count):
        one = {}
        for column in columns:
            name = f"p{len(sources)}"
            sources[name] = (part, row, column, _processor(dialect, table, column))
            one[column] = sa.bindparam(name, type_=table.c[column].type)
        values.append(one)
    return sa.insert(table).values(values)


@functools.lru_cache(maxsize=256)  # a shape counts rows up to VALUES_ROWS: a bounded few, but more than one
def _statement(dialect: Dialect, shape: tuple[Part, ...]) -> tuple[str, tuple[Source, ...]]:
    """One statement inserting every part of ``shape``: the last as the statement, the others as its
    ``WITH`` clauses; its SQL for ``dialect`` and where each of its parameters comes from, in order.

    A part of a few rows (a create's scenario, steps and audit entry) is a ``VALUES`` list, a parameter a
    value; a part of more takes each column's values as one array, unnested in order (``WITH
    ORDINALITY``), so its parameters are as many as its columns however many rows it carries: a step's
    100,000 lines of output in one write, where a ``VALUES`` list of them passed PostgreSQL's 32,767
    parameters and was refused (and took longer to compile than the step to print them). The arrays
    cost a create about a tenth more of its CPU, so the few rows stay a list. Compiled once per shape.
    """
    sources: dict[str, Source] = {}
    inserts = [_part_insert(dialect, part, one, sources) for part, one in enumerate(shape)]
    statement = inserts[-1].add_cte(*(insert.cte(f"held_{i}") for i, insert in enumerate(inserts[:-1])))
    compiled = statement.compile(dialect=dialect)
    return str(compiled), tuple(sources[name] for name in compiled.positiontup or ())


def _values(
    groups: Sequence[tuple[Part, Sequence[Mapping[str, Any]]]], sources: tuple[Source, ...]
) -> tuple[Any, ...]:
    """The parameters of a :func:`_statement`, in its order, each processed as its column's."""
    values: list[Any] = []
    for part, row, column, process in sources:
        rows = groups[part][1]
        if row is None:
            values.append(
                [one[column] for one in rows] if process is None else [process(one[column]) for one in rows]
            )
        else:
            value = rows[row][column]
            values.append(value if process is None else process(value))
    return tuple(values)


def _send(sync: sa.Connection, held: list[tuple[sa.Table, list[Mapping[str, Any]]]]) -> None:
    """Run the ``held`` rows' statement on ``sync`` (SQLAlchemy's synchronous side of the connection)."""
    groups = _grouped(held)
    sql, sources = _statement(sync.dialect, tuple(part for part, _ in groups))
    sync.exec_driver_sql(sql, _values(groups, sources))


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
