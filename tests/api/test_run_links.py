"""A run's links: lists embed environment and session, `scenario` as an object, deleting a session unlinks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import sqlalchemy as sa
from api_support import API, Client, both_backends, created, problem_of, seed_session

from scenariokit.services import Services


@contextmanager
def counted_queries(services: Services) -> Iterator[list[str]]:
    """The SQL statements the store runs inside the block."""
    statements: list[str] = []
    engine = services.store.engine.sync_engine  # type: ignore[attr-defined]

    def record(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


async def _targets(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    environment = await created(client, f"{API}/environments", {"name": "env", "data": {"url": "http://x"}})
    scenario = await created(client, f"{API}/scenarios", {"name": "sc"})
    return scenario, environment


async def _link_session(services: Services, run_id: str) -> str:
    """Give the run a saved session, as a finished run with ``saveSession`` has."""
    session = await seed_session(services, name=f"run-{run_id}")
    async with services.store.unit_of_work() as uow:
        run = await uow.runs.get(uuid.UUID(run_id))
        assert run is not None
        await uow.runs.update(attrs.evolve(run, session_id=session.id))
        await uow.commit()
    return str(session.id)


@both_backends
async def test_run_lists_embed_environment_and_session_in_one_query_per_page(
    client: Client, services: Services
) -> None:
    scenario, environment = await _targets(client)
    body = {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    first = await created(client, f"{API}/run", body)
    session_id = await _link_session(services, first["id"])
    for path in (f"{API}/run", f"{API}/scenarios/{scenario['id']}/runs"):
        page = await (await client.get(path)).json()
        (item,) = page["items"]
        assert item["environment"] == environment
        assert item["session"]["id"] == session_id and item["sessionId"] == session_id
        assert "cookie-secret" not in str(item["session"])  # the list masks as the detail does
        detail = await (await client.get(f"{API}/run/{first['id']}")).json()
        assert {key: detail[key] for key in item} == item

    with counted_queries(services) as one_run:
        assert (await client.get(f"{API}/run")).status == 200
    for _ in range(5):
        await created(client, f"{API}/run", body)
    with counted_queries(services) as six_runs:
        page = await (await client.get(f"{API}/run")).json()
    assert len(page["items"]) == 6 and all(item["environment"] == environment for item in page["items"])
    assert len(six_runs) <= len(one_run)


async def test_a_run_takes_the_scenario_object_it_answers(client: Client) -> None:
    scenario, environment = await _targets(client)
    run = await created(
        client, f"{API}/run", {"scenario": {"id": scenario["id"]}, "environmentId": environment["id"]}
    )
    assert run["scenarioId"] == scenario["id"]
    again = await created(
        client, f"{API}/run", {"scenario": run["scenario"], "environmentId": environment["id"]}
    )
    assert again["scenario"] == {"id": scenario["id"], "name": "sc"}
    by_id = await created(
        client, f"{API}/run", {"scenario": scenario["id"], "environmentId": environment["id"]}
    )
    assert by_id["scenarioId"] == scenario["id"]
    for bad, field in (
        ({}, "scenario.id"),
        ({"id": scenario["id"], "other": 1}, "scenario.other"),
        ({"id": "nope"}, "scenarioId"),
    ):
        problem = await problem_of(
            await client.post(f"{API}/run", json={"scenario": bad, "environmentId": environment["id"]}), 400
        )
        assert field in problem["errors"], problem
    assert (await (await client.get(f"{API}/run")).json())["total"] == 3


@both_backends
async def test_deleting_a_session_unlinks_its_runs(client: Client, services: Services) -> None:
    scenario, environment = await _targets(client)
    run = await created(
        client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    )
    session_id = await _link_session(services, run["id"])
    assert (await client.delete(f"{API}/sessions/{session_id}")).status == 204
    detail = await (await client.get(f"{API}/run/{run['id']}")).json()
    assert detail["sessionId"] is None and detail["session"] is None
    (item,) = (await (await client.get(f"{API}/run")).json())["items"]
    assert item["sessionId"] is None and item["session"] is None
    await problem_of(await client.get(f"{API}/sessions/{session_id}"), 404)
