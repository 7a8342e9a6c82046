"""The total of a page of runs comes from counts the database keeps, and they stay exact.

``run_counts`` is kept by triggers in the transaction that writes a run (migrations 0004 and 0011, by
scenario, environment and status). Every change a run can go through — insert, status change, a
rolled-back write, delete, its scenario's delete — is checked here against a real ``count(*)``, with
every filter of a listing, on SQLite and PostgreSQL; and a store migrated from 0003 or from 0010 with
runs in it starts with the right counts.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timedelta

import attrs
import sqlalchemy as sa
from alembic import command

from scenariokit.domain.model import Environment, Run, RunStatus, Scenario, utcnow
from scenariokit.formats.queries import RunQuery
from scenariokit.storage.migrations import alembic_config
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t


async def _counted(store: SqlStore, **filters: str) -> int:
    """The total of a run listing, as REST shows it."""
    query = RunQuery.from_params(filters)
    async with store.unit_of_work(readonly=True) as uow:
        return (await uow.runs.list(query)).total


async def _real(
    store: SqlStore,
    status: RunStatus | None = None,
    scenario: Scenario | None = None,
    environment: uuid.UUID | None = None,
    since: datetime | None = None,
) -> int:
    where: list[sa.ColumnElement[bool]] = []
    if status is not None:
        where.append(t.runs.c.status == status.value)
    if scenario is not None:
        where.append(t.runs.c.scenario_id == scenario.id)
    if environment is not None:
        where.append(t.runs.c.environment_id == environment)
    if since is not None:
        where.append(t.runs.c.created_at >= since)
    async with store.engine.connect() as conn:
        counted = await conn.execute(sa.select(sa.func.count()).select_from(t.runs).where(*where))
        return int(counted.scalar_one())


async def _check_every_total(
    store: SqlStore, scenarios: list[Scenario], environments: tuple[uuid.UUID, ...] = ()
) -> None:
    """Each listing's total, for every combination of status, scenario, environment and ``since`` (the
    creation time of the middle run: a range that leaves runs out)."""
    async with store.engine.connect() as conn:
        created = sorted((await conn.execute(sa.select(t.runs.c.created_at))).scalars())
    since = created[len(created) // 2] if created else utcnow() - timedelta(minutes=5)
    if created and created[0] < since:
        assert 0 < await _real(store, since=since) < len(created)  # the range leaves runs out
    for status, scenario, environment, after in itertools.product(
        (None, *RunStatus), (None, *scenarios), (None, *environments), (None, since)
    ):
        filters = {
            name: value
            for name, value in (
                ("status", status.value if status else None),
                ("scenarioId", str(scenario.id) if scenario else None),
                ("environmentId", str(environment) if environment else None),
                ("since", after.isoformat() if after else None),
            )
            if value is not None
        }
        expected = await _real(store, status, scenario, environment, after)
        assert await _counted(store, **filters) == expected, filters


async def test_totals_follow_every_change_of_a_run(store: SqlStore) -> None:
    env, staging = Environment(name="env"), Environment(name="staging")
    envs = (env.id, staging.id)
    scenarios = [Scenario(name="first"), Scenario(name="second")]
    runs = [
        Run(
            scenario_id=scenarios[i % 2].id,
            environment_id=envs[i % 3 == 0],
            scenario_name="x",
            created_at=utcnow() - timedelta(minutes=i),  # apart: the middle one's time as ``since`` cuts
        )
        for i in range(7)
    ]
    async with store.unit_of_work() as uow:
        await uow.environments.add(env)
        await uow.environments.add(staging)
        for scenario in scenarios:
            await uow.scenarios.add(scenario)
        for run in runs:
            await uow.runs.add(run)
        await uow.commit()
    assert await _counted(store) == 7
    await _check_every_total(store, scenarios, envs)

    async with store.unit_of_work() as uow:  # runs end: in_progress -> pass / fail
        for i, run in enumerate(runs[:5]):
            await uow.runs.update(attrs.evolve(run, status=RunStatus.PASS if i % 2 else RunStatus.FAIL))
        await uow.commit()
    await _check_every_total(store, scenarios, envs)
    assert await _counted(store, status="in_progress") == 2

    async with store.unit_of_work() as uow:  # a write rolled back changes no count
        await uow.runs.update(attrs.evolve(runs[5], status=RunStatus.PASS))
        await uow.runs.add(Run(scenario_id=scenarios[0].id, environment_id=env.id, scenario_name="x"))
    await _check_every_total(store, scenarios, envs)
    assert await _counted(store) == 7

    async with store.unit_of_work() as uow:  # deleting a scenario deletes its runs and their counts
        assert await uow.scenarios.delete(scenarios[0].id)
        await uow.commit()
    await _check_every_total(store, scenarios[1:], envs)
    assert await _counted(store) == 3
    async with store.engine.connect() as conn:
        kept = (await conn.execute(sa.select(t.run_counts.c.scenario_id).distinct())).scalars().all()
    assert set(kept) <= {scenarios[1].id}


async def test_a_store_migrated_with_runs_in_it_starts_with_their_counts(store: SqlStore) -> None:
    env = Environment(name="env")
    scenario = Scenario(name="old")
    async with store.unit_of_work() as uow:
        await uow.environments.add(env)
        await uow.scenarios.add(scenario)
        for status in (RunStatus.PASS, RunStatus.PASS, RunStatus.FAIL):
            await uow.runs.add(
                Run(scenario_id=scenario.id, environment_id=env.id, scenario_name="old", status=status)
            )
        await uow.commit()
    async with store.engine.begin() as conn:  # back to the schema before the counts
        await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0003_run_timings"))
    async with store.engine.begin() as conn:
        assert not await conn.run_sync(lambda sync: sa.inspect(sync).has_table("run_counts"))
    await store.upgrade()
    assert await _counted(store) == 3
    assert await _counted(store, status="pass") == 2
    assert await _counted(store, status="fail", scenarioId=str(scenario.id)) == 1


async def test_a_store_migrated_from_counts_by_scenario_counts_each_environment(store: SqlStore) -> None:
    envs = [Environment(name="prod"), Environment(name="staging")]
    scenarios = [Scenario(name="a"), Scenario(name="b")]
    async with store.unit_of_work() as uow:
        for item in envs:
            await uow.environments.add(item)
        for scenario in scenarios:
            await uow.scenarios.add(scenario)
        for i in range(9):
            status = (RunStatus.PASS, RunStatus.FAIL, RunStatus.IN_PROGRESS)[i % 3]
            run = Run(
                scenario_id=scenarios[i % 2].id,
                environment_id=envs[i % 4 == 0].id,
                scenario_name="x",
                created_at=utcnow() - timedelta(minutes=i),
            )
            await uow.runs.add(attrs.evolve(run, status=status))
        await uow.commit()
    async with store.engine.begin() as conn:  # back to the counts by scenario and status alone
        await conn.run_sync(
            lambda sync: command.downgrade(alembic_config(sync), "0010_audit_log_keyed_by_time")
        )
    async with store.engine.begin() as conn:
        columns = await conn.run_sync(
            lambda sync: [c["name"] for c in sa.inspect(sync).get_columns("run_counts")]
        )
    assert "environment_id" not in columns
    assert await _counted(store, status="pass") == 3  # the old counts still total a page
    await store.upgrade()
    await _check_every_total(store, scenarios, tuple(item.id for item in envs))
    assert await _counted(store, environmentId=str(envs[1].id)) == 3
