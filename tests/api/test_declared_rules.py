"""What the OpenAPI document declares, the server enforces (found by schemathesis; see schemathesis.toml)."""

from __future__ import annotations

import re

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


async def test_a_revision_number_is_declared_as_the_server_reads_it(client: Client) -> None:
    """Declared as an integer of at least 1 (and at most nine digits); 0 and ten digits are refused."""
    document = await (await client.get("/docs/openapi.json")).json()
    scenario = await created(client, f"{API}/scenarios", {"name": "s"})
    for template, names in (
        ("/api/v1/scenarios/{id}/revisions/{number}", ("number",)),
        ("/api/v1/scenarios/{id}/revisions/{from}/diff/{to}", ("from", "to")),
        ("/api/v1/scenarios/{id}/revisions/{number}/restore", ("number",)),
    ):
        for operation in document["paths"][template].values():
            declared = {p["name"]: p["schema"] for p in operation["parameters"] if p["in"] == "path"}
            for name in names:
                assert declared[name] == {"type": "integer", "minimum": 1, "maximum": 999_999_999}
    base = f"{API}/scenarios/{scenario['id']}/revisions"
    for path, field in (
        (f"{base}/0", "number"),
        (f"{base}/0/diff/1", "from"),
        (f"{base}/1/diff/1234567890", "to"),
    ):
        problem = await problem_of(await client.get(path), 400)
        assert field in problem["errors"]
    assert (await client.get(f"{base}/1")).status == 200


@pytest.mark.parametrize("name", [" ", "\t\n", "\u00a0\u2003"])
async def test_a_blank_name_is_refused_by_the_server_and_the_declared_pattern(
    client: Client, name: str
) -> None:
    document = await (await client.get("/docs/openapi.json")).json()
    pattern = document["components"]["schemas"]["CredentialInput"]["properties"]["name"]["pattern"]
    assert re.search(pattern, name) is None
    assert re.search(pattern, f"{name}x{name}") is not None
    for path, body in (
        (f"{API}/credentials", {"name": name, "secret": "s"}),
        (f"{API}/scenarios", {"name": name}),
        (f"{API}/environments", {"name": name, "data": {}}),
    ):
        problem = await problem_of(await client.post(path, json=body), 400)
        assert "name" in problem["errors"]
        assert (await (await client.get(path)).json())["total"] == 0
