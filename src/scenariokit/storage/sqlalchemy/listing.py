"""A page of scenarios with its steps and links in one statement, read straight from the driver.

The list a dashboard polls. One statement per page (the page's rows read through the order's index,
their total as a count beside them, then every step and link of the page, ``UNION ALL``), its SQL
text written once per dialect and order, run on the unit of work's own connection through the driver
(aiosqlite, asyncpg): no SQLAlchemy statement, result or type processing per call, and no domain
value per row. Ids and times come out as canonical text (PostgreSQL's SQL writes it; SQLite's stored
text is recut in Python, cheaper than in SQLite's string functions), so the rows become
:mod:`scenariokit.formats.records` with a few tuple reads (see that module for what a record
guarantees). Floats travel as the database's own doubles, never through text, so they come back
exactly (SQLite's JSON functions would write them with 15 digits: no ``json_group_array`` here).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar

import attrs
from sqlalchemy.ext.asyncio import AsyncConnection

from scenariokit.domain.browser import NO_BROWSER_SETTINGS, BrowserSettings
from scenariokit.domain.model import Retries
from scenariokit.formats.queries import Page, ScenarioQuery
from scenariokit.formats.records import LinkRecord, ScenarioRecord, StepRecord

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
    direction = "DESC" if order_dir == "desc" else "ASC"
    order = f"{ORDER_COLUMNS[order_by]} {direction}, id {direction}"
    where = f"WHERE {sql.like}" if searched else ""
    return f"""
WITH page AS MATERIALIZED (
  SELECT id, name, description, environment_id, timeout_seconds, created_at, updated_at, retries,
         browser, revision
  FROM scenarios {where} ORDER BY {order} {sql.limit}
)
SELECT 0 AS kind, row_number() OVER (ORDER BY {order}) AS rank, NULL AS owner, {uuid_text("id")} AS id,
       {text("name")} AS a, description AS b, timeout_seconds AS seconds,
       {uuid_text("environment_id")} AS environment, {time_text("created_at")} AS created,
       {time_text("updated_at")} AS updated, {text("retries")} AS retries,
       {text("browser")} AS browser, (SELECT count(*) FROM scenarios {where}) AS total, revision
FROM page
UNION ALL
SELECT 1, steps.position, {uuid_text("steps.scenario_id")}, {uuid_text("steps.id")}, steps.title,
       steps.exec_code, steps.timeout_seconds, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM steps JOIN page ON steps.scenario_id = page.id
UNION ALL
SELECT 2, links.position, {uuid_text("links.scenario_id")}, {uuid_text("links.credential_id")},
       links.alias, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM scenario_credentials AS links JOIN page ON links.scenario_id = page.id
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
    driver: Any = (await conn.get_raw_connection()).driver_connection
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
    rows = await _fetch(conn, page_sql(dialect, query.order_by, query.order_dir, searched), params)
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
