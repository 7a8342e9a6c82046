"""The store's own SQLite INSERTs write each value exactly as SQLAlchemy's bind processors would.

A run's log lines, a scenario's rows and the audit log go to SQLite through the driver (``inserts``),
each value through its column's processor; a time takes one call there (``sqlite_time_text``) and a
row's values one ``itemgetter``. Both must write the very text SQLAlchemy writes, or a row written one
way would not be found, nor sorted, among rows written the other.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite

from scenariokit.storage.sqlalchemy import tables as t
from scenariokit.storage.sqlalchemy.inserts import _compiled, _row_values
from scenariokit.storage.sqlalchemy.tables import UTCDateTime, sqlite_time_text

DIALECT = sqlite.dialect()
#: what SQLAlchemy itself applies to a UTCDateTime value on SQLite: the decorator's, then DATETIME's
SQLALCHEMY_TIME = UTCDateTime().dialect_impl(DIALECT).bind_processor(DIALECT)

zones = st.one_of(
    st.none(),
    st.just(UTC),
    st.integers(min_value=-23 * 60, max_value=23 * 60).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    ),
)
times = st.builds(
    lambda naive, zone: naive.replace(tzinfo=zone),
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    zones,
)


@given(times)
def test_a_time_is_written_as_sqlalchemy_writes_it(value: datetime) -> None:
    assert SQLALCHEMY_TIME is not None
    assert sqlite_time_text(value) == SQLALCHEMY_TIME(value)


def test_no_time_is_none() -> None:
    assert sqlite_time_text(None) is None


log_rows = st.fixed_dictionaries(
    {
        "run_id": st.uuids(),
        "message": st.text(max_size=20),
        "level": st.sampled_from(["debug", "info", "warning", "error"]),
        "step_id": st.none() | st.uuids(),
        "at": times,
    }
)


def _through_sqlalchemy(table: sa.Table, keys: tuple[str, ...], row: dict[str, Any]) -> tuple[Any, ...]:
    """The row's parameters as SQLAlchemy's own processors make them, in ``keys``' order."""
    processed = []
    for key in keys:
        process = table.c[key].type.dialect_impl(DIALECT).bind_processor(DIALECT)
        processed.append(row[key] if process is None else process(row[key]))
    return tuple(processed)


@given(st.lists(log_rows, min_size=1, max_size=30))
def test_a_log_lines_values_are_sqlalchemys_in_the_statements_order(rows: list[dict[str, Any]]) -> None:
    _, keys, processors = _compiled(DIALECT, t.run_logs, tuple(rows[0]), ())

    values = _row_values(keys, processors, rows)

    assert [tuple(one) for one in values] == [_through_sqlalchemy(t.run_logs, keys, row) for row in rows]


def test_a_row_of_one_column_or_none_gives_its_values_as_a_tuple() -> None:
    table = t.run_logs
    one_id = uuid.uuid4()
    _, keys, processors = _compiled(DIALECT, table, ("run_id",), ())

    assert _row_values(keys, processors, [{"run_id": one_id}]) == [(one_id.hex,)]
    assert _row_values((), (), [{}, {}]) == [(), ()]


def test_a_log_line_written_through_the_driver_reads_back_through_sqlalchemy(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    t.metadata.create_all(engine, tables=[t.run_logs])
    at = datetime(2026, 11, 30, 18, 8, 27, 694000, tzinfo=timezone(timedelta(hours=1)))
    row = {"run_id": uuid.uuid4(), "message": "m", "level": "info", "step_id": None, "at": at}
    sql, keys, processors = _compiled(engine.dialect, t.run_logs, tuple(row), ())
    with engine.begin() as conn:
        conn.exec_driver_sql(sql, tuple(_row_values(keys, processors, [row])[0]))
        stored = conn.execute(sa.select(t.run_logs.c.at).where(t.run_logs.c.at == at)).scalar_one()
    engine.dispose()
    assert stored == at.astimezone(UTC)
