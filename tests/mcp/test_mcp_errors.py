"""Errors come back as MCP tool errors (``isError``) carrying the very problem body REST answers."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp
import pytest
from mcp.client.session import ClientSession
from mcp_support import API, Served, call, connect, fail, text_of

MISSING = str(uuid.uuid4())


async def rest_problem(server: Served, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The problem body REST answers a request with."""
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.url + path, json=body) as response,
    ):
        assert response.status >= 400
        assert response.content_type == "application/problem+json"
        return await response.json(content_type=None)


async def seed(mcp: ClientSession) -> dict[str, str]:
    """A scenario with a step, and an environment: the ids the error cases refer to."""
    environment = await call(mcp, "create_environment", name="local", data={"url": "http://127.0.0.1:9"})
    scenario = await call(mcp, "create_scenario", name="seeded", steps=[{"execCode": "pass"}])
    return {"scenario": scenario["id"], "step": scenario["steps"][0]["id"], "environment": environment["id"]}


#: (tool, arguments, REST method, REST path, REST body); "{scenario}" … are filled from the seeded ids.
SAME_AS_REST = {
    "unknown scenario": ("get_scenario", {"scenarioId": MISSING}, "GET", f"/scenarios/{MISSING}", None),
    "unknown scenario on update": (
        "update_scenario",
        {"scenarioId": MISSING, "name": "x"},
        "PATCH",
        f"/scenarios/{MISSING}",
        {"name": "x"},
    ),
    "unknown step": (
        "update_step",
        {"scenarioId": "{scenario}", "stepId": MISSING, "title": "x"},
        "PATCH",
        "/scenarios/{scenario}/steps/" + MISSING,
        {"title": "x"},
    ),
    "unknown step on delete": (
        "delete_step",
        {"scenarioId": "{scenario}", "stepId": MISSING},
        "DELETE",
        "/scenarios/{scenario}/steps/" + MISSING,
        None,
    ),
    "unknown environment": (
        "update_environment",
        {"environmentId": MISSING, "name": "x"},
        "PATCH",
        f"/environments/{MISSING}",
        {"name": "x"},
    ),
    "unknown run": ("get_run", {"runId": MISSING}, "GET", f"/run/{MISSING}", None),
    "timeoutSeconds 0": (
        "create_scenario",
        {"name": "x", "timeoutSeconds": 0},
        "POST",
        "/scenarios",
        {"name": "x", "timeoutSeconds": 0},
    ),
    "timeoutSeconds 5000": (
        "update_scenario",
        {"scenarioId": "{scenario}", "timeoutSeconds": 5000},
        "PATCH",
        "/scenarios/{scenario}",
        {"timeoutSeconds": 5000},
    ),
    'timeoutSeconds "x"': (
        "create_step",
        {"scenarioId": "{scenario}", "execCode": "pass", "timeoutSeconds": "x"},
        "POST",
        "/scenarios/{scenario}/steps",
        {"execCode": "pass", "timeoutSeconds": "x"},
    ),
    "step timeoutSeconds in a scenario": (
        "create_scenario",
        {"name": "x", "steps": [{"execCode": "pass", "timeoutSeconds": -1}]},
        "POST",
        "/scenarios",
        {"name": "x", "steps": [{"execCode": "pass", "timeoutSeconds": -1}]},
    ),
    "step code that does not compile": (
        "update_step",
        {"scenarioId": "{scenario}", "stepId": "{step}", "execCode": "await page.goto("},
        "PATCH",
        "/scenarios/{scenario}/steps/{step}",
        {"execCode": "await page.goto("},
    ),
    "environmentId not a UUID": (
        "create_scenario",
        {"name": "x", "environmentId": "not-a-uuid"},
        "POST",
        "/scenarios",
        {"name": "x", "environmentId": "not-a-uuid"},
    ),
    "environmentId of no environment": (
        "update_scenario",
        {"scenarioId": "{scenario}", "environmentId": MISSING},
        "PATCH",
        "/scenarios/{scenario}",
        {"environmentId": MISSING},
    ),
    "run without environmentId": (
        "run_scenario",
        {"scenarioId": "{scenario}", "environmentId": None},
        "POST",
        "/run",
        {"scenarioId": "{scenario}"},
    ),
    "run of an unknown scenario": (
        "run_scenario",
        {"scenarioId": MISSING, "environmentId": "{environment}"},
        "POST",
        "/run",
        {"scenarioId": MISSING, "environmentId": "{environment}"},
    ),
    "data not an object": (
        "create_environment",
        {"name": "x", "data": [1, 2]},
        "POST",
        "/environments",
        {"name": "x", "data": [1, 2]},
    ),
    "orderBy not allowed": ("list_scenarios", {"orderBy": "id"}, "GET", "/scenarios?orderBy=id", None),
    "limit over the maximum": (
        "get_run",
        {"runId": MISSING, "limit": 5000},
        "GET",
        f"/run/{MISSING}?limit=5000",
        None,
    ),
}


def fill(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with ``{scenario}``, ``{step}`` and ``{environment}`` replaced by the seeded ids."""
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {key: fill(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, ids) for item in value]
    return value


@pytest.mark.parametrize("case", SAME_AS_REST)
async def test_a_tool_error_says_what_rest_says(server: Served, case: str) -> None:
    tool, arguments, method, path, body = SAME_AS_REST[case]
    async with connect(server.mcp_url) as mcp:
        ids = await seed(mcp)
        result = await fail(mcp, tool, **fill(arguments, ids))
    expected = await rest_problem(server, method, API + fill(path, ids), fill(body, ids))
    assert result.structured_content == expected
    assert expected["detail"] in text_of(result)
    for field, why in expected.get("errors", {}).items():
        assert f"{field}: {why}" in text_of(result)


async def test_an_id_that_is_not_a_uuid_is_refused_naming_the_argument(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        for tool, arguments in [
            ("get_scenario", {"scenarioId": "42"}),
            ("delete_scenario", {"scenarioId": "nope"}),
            ("update_step", {"scenarioId": MISSING, "stepId": "nope"}),
            ("update_environment", {"environmentId": "nope"}),
            ("get_run", {"runId": "nope"}),
        ]:
            result = await fail(mcp, tool, **arguments)
            (name,) = [key for key, value in arguments.items() if value != MISSING]
            assert result.structured_content["status"] == 400
            assert result.structured_content["errors"] == {name: f"{arguments[name]!r} is not a UUID"}
            assert text_of(result).startswith(f"400 Bad Request: {name} must be a UUID")


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("create_scenario", {"description": "no name"}, "name"),
        ("create_step", {"scenarioId": MISSING}, "execCode"),
        ("create_step", {"scenarioId": MISSING, "execCode": 5}, "execCode"),
        ("run_scenario", {"scenarioId": MISSING}, "environmentId"),
        ("run_scenario", {"scenarioId": MISSING, "environmentId": MISSING, "waitSeconds": 0}, "waitSeconds"),
        (
            "run_scenario",
            {"scenarioId": MISSING, "environmentId": MISSING, "waitSeconds": 601},
            "waitSeconds",
        ),
        ("run_scenario", {"scenarioId": MISSING, "environmentId": MISSING, "wait": "sometimes"}, "wait"),
        ("update_scenario", {"scenarioId": MISSING, "clear": ["name"]}, "clear"),
        ("get_scenario", {"scenarioId": 42}, "scenarioId"),
    ],
)
async def test_arguments_the_sdk_refuses_come_back_as_tool_errors_naming_the_field(
    server: Served, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with connect(server.mcp_url) as mcp:
        result = await fail(mcp, tool, **arguments)
    assert field in text_of(result)


async def test_a_field_both_given_and_cleared_is_refused(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        ids = await seed(mcp)
        result = await fail(
            mcp, "update_scenario", scenarioId=ids["scenario"], timeoutSeconds=5, clear=["timeoutSeconds"]
        )
        assert result.structured_content["errors"] == {"timeoutSeconds": "is given and listed in clear"}
        unchanged = await call(mcp, "get_scenario", scenarioId=ids["scenario"])
    assert unchanged["timeoutSeconds"] is None
