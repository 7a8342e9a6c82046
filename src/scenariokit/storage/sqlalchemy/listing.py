"""A page of scenarios with its steps and links, read straight from the driver.

The list a dashboard polls. On PostgreSQL one statement per page (the page's rows read through the
order's index, their total as a count of the table beside them, or for a search a window count of its
matches, then every step and link of the page, ``UNION
ALL``, found through the steps' and links' scenario index by ``= ANY`` of the page's ids, whatever
the planner guesses of a join: a hash join read every step of the store, 0.3 ms a page at 2,000): one
round trip. On SQLite, where a statement costs no round trip, two: the page's rows with
their total, in order, then the steps and links of the page's ids, put in order here (SQLite's window
function and the sorts of one combined statement cost twice the two). The SQL text is written once
per dialect and order and run on the unit of work's own connection through the driver (aiosqlite,
asyncpg): no SQLAlchemy statement, result or type processing per call, and no domain value per row.
Ids and times come out as canonical text (PostgreSQL's SQL writes it; SQLite's stored text is recut
in Python, cheaper than in SQLite's string functions), so the rows become
:mod:`scenariokit.formats.records` with a few tuple reads (see that module for what a record
guarantees). Floats travel as the database's own doubles, never through text, so they come back
exactly (SQLite's JSON functions would write them with 15 digits: no ``json_group_array`` here).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar

import attrs
from sqlalchemy.ext.asyncio import AsyncConnection

from scenariokit.domain.browser import NO_BROWSER_SETTINGS, BrowserSettings
from scenariokit.domain.model import Retries
from scenariokit.formats.queries import Page, ScenarioQuery
from scenariokit.formats.records import LinkRecord, ScenarioRecord, StepRecord

from .inserts import driver_of, send_held
from .rows import DOCUMENTS, format_time, parse_time, read_json

Dialect = Literal["sqlite", "postgresql"]

#: The sortable columns of a scenario list (the query checked ``order_by`` against the same names).
ORDER_COLUMNS = {"name": "name", "createdAt": "created_at", "updatedAt": "updated_at"}


@attrs.frozen
class _Spelling:
    """How one dialect writes what the statement needs: canonical text of ids, times and JSON."""

    uuid: Callable[[str], str]
    time: Callable[[str], str]
    text: Callable[[str], str]
    limit: str
    like: str


_SQL = {
    # SQLite's ids and times are read as they are kept (32 hex digits, 'YYYY-MM-DD HH:MM:SS.ffffff') and
    # spelled out in Python: cheaper there than in SQLite's string functions
    "sqlite": _Spelling(
        uuid=lambda column: column,
        time=lambda column: column,
        text=lambda column: column,
        limit="LIMIT ?1 OFFSET ?2",
        like="lower(name) LIKE ?3 ESCAPE '\\'",
    ),
    "postgresql": _Spelling(
        uuid=lambda column: f"{column}::text",
        time=lambda column: f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
        text=lambda column: f"{column}::text",
        limit="LIMIT $1 OFFSET $2",
        like="lower(name) LIKE $3 ESCAPE '\\'",
    ),
}


def _page_total(searched: bool) -> str:
    """A page's total beside its rows: a search's matches counted by a window as it reads them (it reads
    every name anyway), else a count of the table, which reads no row outside the count."""
    return "count(*) OVER ()" if searched else "(SELECT count(*) FROM scenarios)"


def _page_order(order_by: str, order_dir: str) -> str:
    direction = "DESC" if order_dir == "desc" else "ASC"
    return f"{ORDER_COLUMNS[order_by]} {direction}, id {direction}"


@functools.cache
def sqlite_page_sql(order_by: str, order_dir: str, searched: bool) -> tuple[str, str]:
    """SQLite's two statements of one page: its scenarios' rows, then their steps and links.

    The first gives rows shaped as :func:`page_sql`'s scenario rows, in the page's order (parameters:
    limit, offset, then the search pattern when ``searched``); the second the step and link rows of
    the page in no particular order (:func:`scenario_page` orders them as :func:`page_sql` does).
    Unsearched, the total is a count of the table (SQLite counts a B-tree's entries without reading
    its rows), and the second statement finds the page again through the order's index (parameters:
    limit, offset): cheaper than handing it the ids. A search reads every name: it counts its matches
    with a window as it reads them, and the second statement takes the page's ids (as stored) as one
    JSON array, its one parameter, instead of searching twice more.
    """
    sql = _SQL["sqlite"]
    order = _page_order(order_by, order_dir)
    where = f"WHERE {sql.like}" if searched else ""
    total = _page_total(searched)
    heads = f"""
SELECT 0 AS kind, 0 AS rank, NULL AS owner, id, name AS a, description AS b, timeout_seconds AS seconds,
       environment_id AS environment, created_at AS created, updated_at AS updated, retries, browser,
       {total} AS total, revision
FROM scenarios {where} ORDER BY {order} {sql.limit}
"""
    page = f"SELECT id FROM scenarios ORDER BY {order} {sql.limit}"
    page_ids = "SELECT value FROM json_each(?1)" if searched else page
    children = f"""
SELECT 1 AS kind, position, scenario_id, id, title, exec_code, timeout_seconds
FROM steps WHERE scenario_id IN ({page_ids})
UNION ALL
SELECT 2, position, scenario_id, credential_id, alias, NULL, NULL
FROM scenario_credentials WHERE scenario_id IN ({page_ids})
"""
    return heads, children


def _child_order(row: Sequence[Any]) -> tuple[Any, ...]:
    """Where a step or link row goes: ``ORDER BY kind, rank, a`` as SQLite sorts (NULL first)."""
    return (row[0], row[1], row[4] is not None, row[4] or "")


@functools.cache
def page_sql(dialect: Dialect, order_by: str, order_dir: str, searched: bool) -> str:
    """The statement of one page, for a checked order (``order_by`` a key of :data:`ORDER_COLUMNS`).

    Its rows: ``(kind, rank, owner, id, a, b, seconds, environment, created, updated, retries, browser,
    total, revision)``,
    kind 0 a scenario (``a`` its name, ``b`` its description, ``rank`` its place on the page), 1 a
    step (``rank`` its position, ``a`` its title, ``b`` its code), 2 a link (``a`` its alias); in that
    order, each kind by rank. Parameters: limit, offset, then the search pattern when ``searched``.
    """
    sql = _SQL[dialect]
    uuid_text, time_text, text = sql.uuid, sql.time, sql.text
    order = _page_order(order_by, order_dir)
    where = f"WHERE {sql.like}" if searched else ""
    total = _page_total(searched)
    return f"""
WITH page AS MATERIALIZED (
  SELECT id, name, description, environment_id, timeout_seconds, created_at, updated_at, retries,
         browser, revision, {total} AS total
  FROM scenarios {where} ORDER BY {order} {sql.limit}
)
SELECT 0 AS kind, row_number() OVER (ORDER BY {order}) AS rank, NULL AS owner, {uuid_text("id")} AS id,
       {text("name")} AS a, description AS b, timeout_seconds AS seconds,
       {uuid_text("environment_id")} AS environment, {time_text("created_at")} AS created,
       {time_text("updated_at")} AS updated, {text("retries")} AS retries,
       {text("browser")} AS browser, total, revision
FROM page
UNION ALL
SELECT 1, steps.position, {uuid_text("steps.scenario_id")}, {uuid_text("steps.id")}, steps.title,
       steps.exec_code, steps.timeout_seconds, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM steps WHERE steps.scenario_id = ANY(ARRAY(SELECT id FROM page))
UNION ALL
SELECT 2, links.position, {uuid_text("links.scenario_id")}, {uuid_text("links.credential_id")},
       links.alias, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM scenario_credentials AS links WHERE links.scenario_id = ANY(ARRAY(SELECT id FROM page))
ORDER BY kind, rank, a
"""


@functools.cache
def _count_sql(dialect: Dialect, searched: bool) -> str:
    like = _SQL[dialect].like.replace("$3", "$1").replace("?3", "?1")
    return f"SELECT count(*) FROM scenarios {'WHERE ' + like if searched else ''}"


def _uuid_text(value: str) -> str:
    """An id as canonical text: PostgreSQL's ``uuid::text`` as it is, SQLite's 32 hex digits spelled out."""
    if len(value) == 36:
        return value
    if len(value) == 32:
        value = value.lower()
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    return str(uuid.UUID(value))


def _time_text(value: str) -> str:
    """A time as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: PostgreSQL's ``to_char`` as it is, SQLite's text recut."""
    if len(value) == 27 and value[10] == "T" and value[26] == "Z":
        return value
    if len(value) == 26 and value[10] == " ":
        return f"{value[:10]}T{value[11:]}Z"
    return format_time(parse_time(value))


def _seconds(value: float | int | None) -> float | None:
    return None if value is None else float(value)  # the domain's ``seconds``: 120 reads as 120.0


T = TypeVar("T")


class _DocumentColumn(Generic[T]):
    """A JSON column's value read by the storage rules, once per distinct text (frozen values: shared).

    A page repeats the same few texts row after row (most scenarios keep the defaults), so each is
    structured once and kept; the cache is emptied past 1024 texts.
    """

    def __init__(self, cls: type[T], default: T) -> None:
        self._cls, self._default = cls, default
        self._restore = DOCUMENTS.get_structure_hook(cls)
        self._read: dict[str, T] = {}

    def __call__(self, text: str | None) -> T:
        if text is None:
            return self._default
        found = self._read.get(text)
        if found is None:
            document = read_json(text)
            found = self._default if document is None else self._restore(document, self._cls)
            if len(self._read) >= 1024:
                self._read.clear()
            self._read[text] = found
        return found


_retries = _DocumentColumn(Retries, Retries())
_browser = _DocumentColumn(BrowserSettings, NO_BROWSER_SETTINGS)


async def _fetch(conn: AsyncConnection, sql: str, params: Sequence[Any]) -> Sequence[Sequence[Any]]:
    """The rows of ``sql`` run on ``conn``'s own driver connection, inside its current transaction."""
    if conn.dialect.name == "postgresql":
        await send_held(conn)  # rows this unit of work inserted go first: it reads what it wrote
    driver: Any = await driver_of(conn)
    if conn.dialect.name == "postgresql":
        rows: Sequence[Sequence[Any]] = await driver.fetch(sql, *params)
        return rows
    return list(await driver.execute_fetchall(sql, tuple(params)))


async def scenario_page(
    conn: AsyncConnection, query: ScenarioQuery, pattern: str | None
) -> Page[ScenarioRecord]:
    """One page of scenarios as records: one statement (a second, a count, only past the last page).

    ``pattern`` is the LIKE pattern of ``query.q`` (escaped), None without a search.
    """
    dialect: Dialect = "postgresql" if conn.dialect.name == "postgresql" else "sqlite"
    searched = pattern is not None
    params: list[Any] = [query.limit, query.offset] + ([pattern] if searched else [])
    rows: list[Sequence[Any]]
    if dialect == "sqlite":
        heads_sql, children_sql = sqlite_page_sql(query.order_by, query.order_dir, searched)
        rows = list(await _fetch(conn, heads_sql, params))
        if rows:
            page = [json.dumps([row[3] for row in rows])] if searched else params
            rows.extend(sorted(await _fetch(conn, children_sql, page), key=_child_order))
    else:
        rows = list(await _fetch(conn, page_sql(dialect, query.order_by, query.order_dir, searched), params))
    heads: list[Sequence[Any]] = []
    steps: dict[str, list[StepRecord]] = {}
    links: dict[str, list[LinkRecord]] = {}
    total = 0
    for row in rows:
        kind = row[0]
        if kind == 0:
            heads.append(row)
            steps[row[3]] = []
            links[row[3]] = []
            total = row[12]
        elif kind == 1:
            steps[row[2]].append(StepRecord(row[5], row[1], row[4], _seconds(row[6]), _uuid_text(row[3])))
        else:
            links[row[2]].append(LinkRecord(_uuid_text(row[3]), row[4]))
    items = tuple(
        ScenarioRecord(
            name=row[4],
            description=row[5],
            environment_id=None if row[7] is None else _uuid_text(row[7]),
            timeout_seconds=_seconds(row[6]),
            credentials=links[row[3]],
            steps=steps[row[3]],
            id=_uuid_text(row[3]),
            created_at=_time_text(row[8]),
            updated_at=_time_text(row[9]),
            retries=_retries(row[10]),
            browser=_browser(row[11]),
            revision=int(row[13]),
        )
        for row in heads
    )
    if not heads and query.page > 1:  # past the last page: no row carries the total
        counted = await _fetch(conn, _count_sql(dialect, searched), [pattern] if searched else [])
        total = counted[0][0]
    # else the total rides on the page's rows, and a first page without rows has none
    return Page(items=items, total=int(total), page=query.page, limit=query.limit)
