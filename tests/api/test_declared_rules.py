"""What the OpenAPI document declares, the server enforces (found by schemathesis; see schemathesis.toml)."""

from __future__ import annotations

import pytest
from api_support import API, Client, created, problem_of


@pytest.mark.parametrize(
    "query",
    [
        "scenarios?orderBy=",
        "scenarios?orderDir=",
        "scenarios?page=",
        "scenarios?limit=",
        "run?status=",
        "run?scenarioId=",
        "scenarios/export?includeEnvironment=",
    ],
)
async def test_a_parameter_given_empty_is_refused(client: Client, query: str) -> None:
    problem = await problem_of(await client.get(f"{API}/{query}"), 400)
    assert query.split("?")[1].rstrip("=") in problem["errors"]


async def test_an_empty_text_filter_is_no_filter(client: Client) -> None:
    assert (await client.get(f"{API}/scenarios?q=")).status == 200


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PATCH", "scenarios/{scenario}/steps/order", "PUT"),
        ("GET", "scenarios/{scenario}/steps/order", "PUT"),
        ("PUT", "credentials/import", "POST"),
        ("DELETE", "environments/import", "POST"),
        ("DELETE", "scenarios/export", "GET"),
    ],
)
async def test_fixed_segments_are_never_taken_for_ids(
    client: Client, method: str, path: str, allow: str
) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "s", "steps": [{"execCode": "pass"}]})
    response = await client.request(
        method, f"{API}/{path.format(scenario=scenario['id'])}", json={"stepIds": []}
    )
    await problem_of(response, 405)
    assert allow in response.headers["Allow"]


async def test_lists_must_be_lists(client: Client) -> None:
    for body, field in (
        ({"name": "s", "credentials": {}}, "credentials"),
        ({"name": "s", "steps": "pass"}, "steps"),
        ({"name": "s", "steps": {"execCode": "pass"}}, "steps"),
    ):
        problem = await problem_of(await client.post(f"{API}/scenarios", json=body), 400)
        assert field in problem["errors"]
    assert (await (await client.get(f"{API}/scenarios")).json())["total"] == 0


async def test_an_echoed_id_must_be_an_id(client: Client) -> None:
    scenario = await created(client, f"{API}/scenarios", {"name": "s"})
    steps = f"{API}/scenarios/{scenario['id']}/steps"
    problem = await problem_of(await client.post(steps, json={"execCode": "pass", "id": "AAA"}), 400)
    assert "id" in problem["errors"]
    echoed = await client.post(steps, json={"execCode": "pass", "id": scenario["id"]})
    assert echoed.status == 201  # a read-only field sent back is ignored
    assert len(await (await client.get(steps)).json()) == 1


async def test_scenario_and_scenario_id_must_agree(client: Client) -> None:
    environment = await created(client, f"{API}/environments", {"name": "e", "data": {}})
    first = await created(client, f"{API}/scenarios", {"name": "a"})
    second = await created(client, f"{API}/scenarios", {"name": "b"})
    body = {"scenarioId": first["id"], "scenario": {"id": second["id"]}, "environmentId": environment["id"]}
    problem = await problem_of(await client.post(f"{API}/run", json=body), 400)
    assert "scenario" in problem["errors"]
    agreeing = {**body, "scenario": {"id": first["id"], "name": "a"}}
    assert (await client.post(f"{API}/run", json=agreeing)).status == 201
