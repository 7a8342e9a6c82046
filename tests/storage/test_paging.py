"""Paging returns every row exactly once in every allowed sort; a bad query never reaches SQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from scenariokit.domain.errors import InvalidQuery
from scenariokit.domain.model import (
    Credential,
    Environment,
    Run,
    RunStatus,
    Scenario,
    Session,
    SessionStatus,
    Snippet,
)
from scenariokit.formats.queries import (
    CredentialQuery,
    EnvironmentQuery,
    ListQuery,
    RunQuery,
    ScenarioQuery,
    SessionQuery,
    SnippetQuery,
)
from scenariokit.storage.sqlalchemy import SqlStore

BASE = datetime(2026, 1, 1, tzinfo=UTC)
COUNT = 23  # not a multiple of the page size, with ties in every sort key


def _time(i: int) -> datetime:
    return BASE + timedelta(minutes=i % 5)  # many rows share a time: the id must break ties


async def _seed(store: SqlStore) -> dict[str, list[uuid.UUID]]:
    env = Environment(name="env")
    ids: dict[str, list[uuid.UUID]] = {
        k: [] for k in ("scenarios", "environments", "credentials", "snippets", "sessions", "runs")
    }
    async with store.unit_of_work() as uow:
        await uow.environments.add(env)
        ids["environments"].append(env.id)
        scenario_ids = []
        for i in range(COUNT):
            name = f"name-{i % 4}"
            scenario = Scenario(name=name, created_at=_time(i), updated_at=_time(i + 1))
            await uow.scenarios.add(scenario)
            scenario_ids.append(scenario.id)
            ids["scenarios"].append(scenario.id)
            environment = Environment(name=name, created_at=_time(i), updated_at=_time(i))
            await uow.environments.add(environment)
            ids["environments"].append(environment.id)
            credential = Credential(name=name, secret="s", created_at=_time(i), updated_at=_time(i))
            await uow.credentials.add(credential)
            ids["credentials"].append(credential.id)
            snippet = Snippet(alias=f"a{i}", title=name, created_at=_time(i), updated_at=_time(i))
            await uow.snippets.add(snippet)
            ids["snippets"].append(snippet.id)
            session = Session(
                name=name, status=SessionStatus.OPEN if i % 2 else SessionStatus.CLOSED, created_at=_time(i)
            )
            await uow.sessions.add(session)
            ids["sessions"].append(session.id)
        for i in range(COUNT):
            run = Run(
                scenario_id=scenario_ids[i % 3],
                environment_id=env.id,
                scenario_name=f"name-{i % 4}",
                status=list(RunStatus)[i % 3],
                created_at=_time(i),
            )
            await uow.runs.add(run)
            ids["runs"].append(run.id)
        await uow.commit()
    return ids


CASES: list[tuple[str, type[ListQuery]]] = [
    ("scenarios", ScenarioQuery),
    ("environments", EnvironmentQuery),
    ("credentials", CredentialQuery),
    ("snippets", SnippetQuery),
    ("sessions", SessionQuery),
    ("runs", RunQuery),
]


async def test_every_row_appears_exactly_once_across_pages_in_every_allowed_sort(store: SqlStore) -> None:
    ids = await _seed(store)
    for repo_name, query_type in CASES:
        for order_by in query_type.ORDER_BY:
            for order_dir in ("asc", "desc"):
                seen: list[uuid.UUID] = []
                page = 1
                while True:
                    query = query_type(page=page, limit=5, order_by=order_by, order_dir=order_dir)  # type: ignore[arg-type]
                    async with store.unit_of_work(readonly=True) as uow:
                        result = await getattr(uow, repo_name).list(query)
                    assert result.total == len(ids[repo_name]), (repo_name, order_by)
                    seen.extend(item.id for item in result.items)
                    if not result.items:
                        break
                    page += 1
                assert sorted(seen) == sorted(ids[repo_name]), (repo_name, order_by, order_dir)


async def test_sort_orders_follow_the_key(store: SqlStore) -> None:
    await _seed(store)
    async with store.unit_of_work(readonly=True) as uow:
        runs = await uow.runs.list(RunQuery(limit=200, order_by="scenario.name", order_dir="asc"))
        names = [run.scenario_name for run in runs.items]
        assert names == sorted(names)
        default = await uow.runs.list(RunQuery(limit=200))
        created = [run.created_at for run in default.items]
        assert created == sorted(created, reverse=True)
        scenarios = await uow.scenarios.list(ScenarioQuery(limit=200))
        updated = [s.updated_at for s in scenarios.items]
        assert updated == sorted(updated, reverse=True)


async def test_filters_by_name_status_and_scenario(store: SqlStore) -> None:
    ids = await _seed(store)
    async with store.unit_of_work(readonly=True) as uow:
        named = await uow.scenarios.list(ScenarioQuery(q="NAME-1", limit=200))
        assert named.total == 6 and all(s.name == "name-1" for s in named.items)
        passed = await uow.runs.list(RunQuery(status=RunStatus.PASS, limit=200))
        assert passed.total == 8 and all(r.status is RunStatus.PASS for r in passed.items)
        of_one = await uow.runs.list(RunQuery(scenario_id=ids["scenarios"][0], limit=200))
        assert of_one.total == 8
        snippets = await uow.snippets.list(SnippetQuery(q="a1", limit=200))
        assert {s.alias for s in snippets.items} == {"a1", *(f"a1{i}" for i in range(10))}


async def test_runs_filter_by_environment_and_since(store: SqlStore) -> None:
    ids = await _seed(store)
    (env, *_) = ids["environments"]
    late = [i for i in range(COUNT) if _time(i) >= _time(3)]  # runs are created at _time(i)
    async with store.unit_of_work(readonly=True) as uow:
        of_env = await uow.runs.list(RunQuery(environment_id=env, limit=200))
        assert of_env.total == COUNT and len(of_env.items) == COUNT
        assert (await uow.runs.list(RunQuery(environment_id=uuid.uuid4()))).total == 0
        recent = await uow.runs.list(RunQuery(since=_time(3), limit=200))
        assert recent.total == len(late) and all(run.created_at >= _time(3) for run in recent.items)
        both = await uow.runs.list(RunQuery(since=_time(3), status=RunStatus.PASS, environment_id=env))
        assert both.total == len([i for i in late if list(RunStatus)[i % 3] is RunStatus.PASS])
    naive = RunQuery.from_params({"since": _time(3).replace(tzinfo=None).isoformat()})
    assert naive.since == _time(3)


async def test_like_wildcards_in_q_are_taken_literally(store: SqlStore) -> None:
    async with store.unit_of_work() as uow:
        await uow.scenarios.add(Scenario(name="100% done"))
        await uow.scenarios.add(Scenario(name="1000 done"))
        await uow.scenarios.add(Scenario(name="a_b"))
        await uow.scenarios.add(Scenario(name="axb"))
        await uow.commit()
    async with store.unit_of_work(readonly=True) as uow:
        assert [s.name for s in (await uow.scenarios.list(ScenarioQuery(q="0%"))).items] == ["100% done"]
        assert [s.name for s in (await uow.scenarios.list(ScenarioQuery(q="a_b"))).items] == ["a_b"]


@pytest.mark.parametrize(
    ("query_type", "params", "field"),
    [
        (ScenarioQuery, {"orderBy": "name; DROP TABLE scenarios"}, "orderBy"),
        (RunQuery, {"orderBy": "scenario_name"}, "orderBy"),
        (SessionQuery, {"orderBy": "updatedAt"}, "orderBy"),
        (SnippetQuery, {"orderBy": "name"}, "orderBy"),
        (ScenarioQuery, {"orderDir": "sideways"}, "orderDir"),
        (ScenarioQuery, {"page": "0"}, "page"),
        (ScenarioQuery, {"limit": "201"}, "limit"),
        (ScenarioQuery, {"limit": "ten"}, "limit"),
        (RunQuery, {"status": "done"}, "status"),
        (RunQuery, {"scenarioId": "nope"}, "scenarioId"),
        (RunQuery, {"environmentId": "nope"}, "environmentId"),
        (RunQuery, {"since": "last tuesday"}, "since"),
        (ScenarioQuery, {"sort": "name"}, "sort"),
    ],
)
async def test_unknown_order_by_and_bad_params_are_refused_before_sql(
    store: SqlStore, query_type: type[ListQuery], params: dict[str, str], field: str
) -> None:
    statements: list[str] = []
    sa.event.listen(store.engine.sync_engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    with pytest.raises(InvalidQuery) as refused:
        query_type.from_params(params)
    assert field in refused.value.errors
    if field == "orderBy":
        for allowed in query_type.ORDER_BY:
            assert allowed in str(refused.value)
    assert statements == []
