"""What one interface writes, the other reads back identically: MCP and REST share one service layer."""

from __future__ import annotations

from typing import Any

import aiohttp
from mcp_support import API, Served, call, connect


async def rest(server: Served, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON REST answers a successful request with."""
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.url + API + path, json=body) as response,
    ):
        assert response.status < 300, await response.text()
        return await response.json()


async def test_values_written_through_mcp_read_back_identically_through_rest(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(
            mcp,
            "create_environment",
            name="staging",
            description="shared staging",
            data={"url": "https://staging.example.com", "retries": 2, "flags": [True, None]},
        )
        scenario = await call(
            mcp,
            "create_scenario",
            name="Search",
            description="finds a product",
            environmentId=environment["id"],
            timeoutSeconds=120.5,
            steps=[{"execCode": "await page.goto(helpers.getEnvUrl())", "timeoutSeconds": 12}],
        )
        step = await call(
            mcp, "create_step", scenarioId=scenario["id"], execCode="log('x')", timeoutSeconds=3
        )
        scenario = await call(mcp, "update_scenario", scenarioId=scenario["id"], timeoutSeconds=300)
        environment = await call(
            mcp, "update_environment", environmentId=environment["id"], data={"url": "http://127.0.0.1:1"}
        )

    # a write answers its step code's warnings besides the record, which a read gives as stored
    assert scenario.pop("warnings") == [] and step.pop("warnings") == []
    assert await rest(server, "GET", f"/scenarios/{scenario['id']}") == scenario
    assert await rest(server, "GET", f"/scenarios/{scenario['id']}/steps/{step['id']}") == step
    assert await rest(server, "GET", f"/environments/{environment['id']}") == environment
    assert (scenario["timeoutSeconds"], scenario["environmentId"], scenario["description"]) == (
        300,
        environment["id"],
        "finds a product",
    )
    assert [s["timeoutSeconds"] for s in scenario["steps"]] == [12, 3]
    assert environment["data"] == {"url": "http://127.0.0.1:1"}


async def test_values_written_through_rest_read_back_identically_through_mcp(server: Served) -> None:
    environment = await rest(
        server, "POST", "/environments", {"name": "qa", "description": "QA", "data": {"baseUrl": "http://qa"}}
    )
    environment = await rest(
        server, "PATCH", f"/environments/{environment['id']}", {"data": {"url": "http://q"}}
    )
    scenario = await rest(
        server,
        "POST",
        "/scenarios",
        {
            "name": "Login",
            "description": "signs in",
            "environmentId": environment["id"],
            "timeoutSeconds": 45,
            "steps": [{"execCode": "pass", "timeoutSeconds": 7.5}],
        },
    )
    scenario = await rest(server, "PATCH", f"/scenarios/{scenario['id']}", {"timeoutSeconds": 60})
    assert scenario.pop("warnings") == []

    async with connect(server.mcp_url) as mcp:
        assert await call(mcp, "get_scenario", scenarioId=scenario["id"]) == scenario
        listed = await call(mcp, "list_scenarios")
        assert listed == await rest(server, "GET", "/scenarios")
        environments = await call(mcp, "list_environments")
        assert environments["items"] == [environment]
        assert environments == await rest(server, "GET", "/environments")
    assert (scenario["timeoutSeconds"], scenario["steps"][0]["timeoutSeconds"]) == (60, 7.5)
