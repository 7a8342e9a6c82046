"""A unit of work writes any number of rows: a step's 100,000 lines of output, an import of thousands of
scenarios, on SQLite and PostgreSQL alike.

On PostgreSQL the rows a unit of work inserts are held and sent as one statement
(:mod:`scenariokit.storage.sqlalchemy.inserts`). As a ``VALUES`` list of parameters, a statement of more
than 32,767 values was refused by the driver: a step that printed 10,000 lines within one write of its
progress lost them, and the run timed out while the scheduler compiled statements of ever more rows.
A table's many rows now go as arrays, in order; a few rows stay a ``VALUES`` list.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from scenariokit.domain.errors import Conflict
from scenariokit.domain.model import RunLogEntry, Scenario, Step
from scenariokit.formats.queries import LogQuery, ScenarioQuery
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t
from scenariokit.storage.sqlalchemy.inserts import VALUES_ROWS


async def _queued_run(services: Any) -> uuid.UUID:
    env = await services.environments.create({"name": "env"})
    scenario = await services.scenarios.create({"name": "loud", "steps": [{"execCode": "print(1)"}]})
    run = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
    return run.id


async def _messages(store: SqlStore, run_id: uuid.UUID, page: int, limit: int) -> tuple[int, list[str]]:
    async with store.unit_of_work(readonly=True) as uow:
        logs = await uow.runs.list_logs(run_id, LogQuery(page=page, limit=limit))
    return logs.total, [entry.message for entry in logs.items]


async def _refused_with_nothing_kept(
    services: Any,
    store: SqlStore,
    rows: int,
    last: Callable[[uuid.UUID], RunLogEntry],
    refusal: type[BaseException],
    match: str | None = None,
) -> None:
    """``rows`` lines of a run, then ``last(run_id)``, written in one unit of work, are refused with
    ``refusal``, and the run's log is as it was."""
    run_id = await _queued_run(services)
    lines = [RunLogEntry(run_id=run_id, message=f"line {i}") for i in range(rows)] + [last(run_id)]
    total, _ = await _messages(store, run_id, 1, 1)
    with pytest.raises(refusal, match=match):
        async with store.unit_of_work() as uow:
            await uow.runs.append_logs(lines)
            await uow.commit()
    assert (await _messages(store, run_id, 1, 1))[0] == total


async def test_a_hundred_thousand_log_lines_in_one_write_are_all_stored_in_order(
    services: Any, store: SqlStore
) -> None:
    run_id = await _queued_run(services)
    async with store.unit_of_work(readonly=True) as uow:
        before = (await uow.runs.list_logs(run_id, LogQuery())).total  # the queued run's own lines
    lines = [RunLogEntry(run_id=run_id, message=f"line {i}") for i in range(100_000)]
    async with store.unit_of_work() as uow:
        await uow.runs.append_logs(lines)
        for i in range(3):  # a few more rows of the same table in the same statement, after the many
            await uow.runs.append_logs([RunLogEntry(run_id=run_id, message=f"late {i}")])
        await uow.commit()

    total, first = await _messages(store, run_id, 1, 5)
    assert total == before + 100_003
    assert first[before:] == [f"line {i}" for i in range(5 - before)]
    last = [(await _messages(store, run_id, page, 1))[1][0] for page in range(total - 3, total + 1)]
    assert last == ["line 99999", "late 0", "late 1", "late 2"]


async def test_thousands_of_scenarios_added_in_one_unit_of_work_are_all_stored(store: SqlStore) -> None:
    scenarios = [
        Scenario(name=f"s{i:04d}", steps=(Step(exec_code="a = 1"), Step(exec_code=f"b = {i}")))
        for i in range(4000)
    ]
    async with store.unit_of_work() as uow:
        for scenario in scenarios:  # each add holds its row and its steps: 8,000 parts before merging
            await uow.scenarios.add(scenario)
        await uow.commit()

    async with store.unit_of_work(readonly=True) as uow:
        page = await uow.scenarios.list_records(ScenarioQuery(limit=3, order_by="name", order_dir="desc"))
        last = await uow.scenarios.get(scenarios[-1].id)
    assert page.total == 4000 and [item.name for item in page.items] == ["s3999", "s3998", "s3997"]
    async with store.engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(t.steps))).scalar_one() == 8000
    assert last is not None and [step.exec_code for step in last.steps] == ["a = 1", "b = 3999"]


@pytest.mark.parametrize("rows", [2, VALUES_ROWS + 1], ids=["as a list of values", "as arrays"])
async def test_a_broken_row_among_many_is_refused_at_the_commit_and_nothing_is_kept(
    services: Any, store: SqlStore, rows: int
) -> None:
    def of_no_run(_: uuid.UUID) -> RunLogEntry:  # its foreign key is broken
        return RunLogEntry(run_id=uuid.uuid4(), message="a line of no run")

    await _refused_with_nothing_kept(services, store, rows, of_no_run, Conflict)


# PostgreSQL only: SQLite keeps a VARCHAR of any length
@pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
@pytest.mark.parametrize("rows", [2, VALUES_ROWS + 1], ids=["as a list of values", "as arrays"])
async def test_an_over_long_value_is_refused_never_cut_to_its_column(
    services: Any, store: SqlStore, rows: int
) -> None:
    def too_long_a_level(run_id: uuid.UUID) -> RunLogEntry:  # the column is VARCHAR(16)
        return RunLogEntry(run_id=run_id, message="too long a level", level="x" * 17)

    await _refused_with_nothing_kept(services, store, rows, too_long_a_level, sa.exc.DBAPIError, "too long")
