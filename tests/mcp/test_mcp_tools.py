"""The tools through the official MCP client over real HTTP: their list, schemas and CRUD behaviour."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp
import pytest
from mcp.shared.exceptions import MCPError
from mcp_support import Served, ServerFactory, call, connect, fail, text_of

from mcp import Client
from scenariokit.domain.model import MAX_TIMEOUT_SECONDS

REQUIRED = {
    "list_scenarios": set(),
    "get_scenario": {"scenarioId"},
    "create_scenario": {"name"},
    "update_scenario": {"scenarioId"},
    "delete_scenario": {"scenarioId"},
    "create_step": {"scenarioId", "execCode"},
    "update_step": {"scenarioId", "stepId"},
    "delete_step": {"scenarioId", "stepId"},
    "list_revisions": {"scenarioId"},
    "diff_revisions": {"scenarioId", "from", "to"},
    "restore_revision": {"scenarioId", "revision"},
    "list_environments": set(),
    "create_environment": {"name"},
    "update_environment": {"environmentId"},
    "run_scenario": {"scenarioId"},  # and environmentId, or environmentIds for a batch
    "get_run": {"runId"},
    "list_schedules": set(),
    "create_schedule": {"scenarioId", "environmentIds"},
    "update_schedule": {"scheduleId"},
    "delete_schedule": {"scheduleId"},
    "authoring_start": {"environmentId"},
    "authoring_exec": {"authoringId", "code"},
    "authoring_snapshot": {"authoringId"},
    "authoring_save": {"authoringId"},
    "authoring_end": {"authoringId"},
    "list_runs": set(),
    "cancel_run": {"runId"},
    "get_scenario_stats": {"scenarioId"},
    "list_snippets": set(),
    "get_snippet": {"snippetId"},
    "list_credentials": set(),
    "list_sessions": set(),
    "delete_environment": {"environmentId"},
    "export_yaml": {"kind"},
    "import_yaml": {"kind", "yaml"},
    "get_health": set(),
}


async def test_every_tool_is_listed_with_its_required_fields(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
    assert set(tools) == set(REQUIRED)
    for name, tool in tools.items():
        assert tool.description and "\n    " not in tool.description, name
        assert set(tool.input_schema.get("required", [])) == REQUIRED[name], name


async def test_every_argument_is_documented_with_its_type_and_bounds(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        tools = {tool.name: tool.input_schema for tool in (await mcp.list_tools()).tools}
    for name, schema in tools.items():
        for argument, spec in schema["properties"].items():
            assert spec.get("description"), f"{name}.{argument} has no description"
            assert "type" in spec or "anyOf" in spec, f"{name}.{argument} has no type"
            if argument.endswith("Id"):
                assert spec["format"] == "uuid" and "UUID" in spec["description"], f"{name}.{argument}"
    for name in ("create_scenario", "update_scenario", "create_step", "update_step"):
        timeout = tools[name]["properties"]["timeoutSeconds"]
        assert timeout["type"] == ["number", "null"]  # null: no limit of its own, as the input says
        assert (timeout["exclusiveMinimum"], timeout["maximum"]) == (0, MAX_TIMEOUT_SECONDS)
    exec_code = tools["create_step"]["properties"]["execCode"]["description"]
    for name in ("await", "page", "expect", "helpers.env", "helpers.getEnvUrl()"):
        assert name in exec_code
    assert tools["create_environment"]["properties"]["data"]["type"] == "object"
    wait_seconds = tools["run_scenario"]["properties"]["waitSeconds"]
    assert wait_seconds["exclusiveMinimum"] == 0 and wait_seconds["maximum"] == 600


async def test_a_scenario_and_its_steps_are_created_changed_and_deleted(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        created = await call(
            mcp,
            "create_scenario",
            name="Checkout",
            description="buys one item",
            timeoutSeconds=90,
            steps=[
                {"execCode": "await page.goto(helpers.getEnvUrl())", "title": "open", "timeoutSeconds": 15},
                {"execCode": "print('second')"},
            ],
        )
        assert created["timeoutSeconds"] == 90 and created["description"] == "buys one item"
        assert [(s["order"], s["title"], s["timeoutSeconds"]) for s in created["steps"]] == [
            (1, "open", 15),
            (2, None, None),
        ]
        scenario_id = created["id"]
        assert created.pop("warnings") == []  # a write answers its step code's warnings too
        assert await call(mcp, "get_scenario", scenarioId=scenario_id) == created

        renamed = await call(mcp, "update_scenario", scenarioId=scenario_id, name="Checkout v2")
        assert renamed["name"] == "Checkout v2"
        assert (renamed["description"], renamed["timeoutSeconds"]) == ("buys one item", 90)
        cleared = await call(
            mcp, "update_scenario", scenarioId=scenario_id, timeoutSeconds=None, clear=["description"]
        )
        assert (cleared["description"], cleared["timeoutSeconds"]) == (None, 90)

        first = await call(
            mcp, "create_step", scenarioId=scenario_id, execCode="log('first')", order=1, timeoutSeconds=5
        )
        assert (first["order"], first["timeoutSeconds"]) == (1, 5)
        moved = await call(
            mcp, "update_step", scenarioId=scenario_id, stepId=first["id"], order=3, timeoutSeconds=2.5
        )
        assert (moved["order"], moved["execCode"], moved["timeoutSeconds"]) == (3, "log('first')", 2.5)
        untimed = await call(
            mcp, "update_step", scenarioId=scenario_id, stepId=first["id"], clear=["timeoutSeconds"]
        )
        assert untimed["timeoutSeconds"] is None

        removed = await call(mcp, "delete_step", scenarioId=scenario_id, stepId=created["steps"][0]["id"])
        assert removed == {"id": created["steps"][0]["id"], "deleted": True}
        steps = (await call(mcp, "get_scenario", scenarioId=scenario_id))["steps"]
        assert [(s["order"], s["execCode"]) for s in steps] == [(1, "print('second')"), (2, "log('first')")]

        await call(mcp, "create_scenario", name="Login")
        found = await call(mcp, "list_scenarios", q="checkout", orderBy="name", orderDir="asc", limit=5)
        assert (found["total"], found["page"], found["limit"]) == (1, 1, 5)
        assert [item["id"] for item in found["items"]] == [scenario_id]

        deleted = await call(mcp, "delete_scenario", scenarioId=scenario_id)
        assert deleted == {"id": scenario_id, "deleted": True}
        gone = await fail(mcp, "get_scenario", scenarioId=scenario_id)
        assert text_of(gone) == f"404 Not Found: scenario {scenario_id} not found"


async def test_environments_are_created_listed_and_changed(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        staging = await call(
            mcp,
            "create_environment",
            name="staging",
            description="the staging site",
            data={"url": "https://staging.example.com", "user": {"name": "ada"}},
        )
        await call(mcp, "create_environment", name="production")
        found = await call(mcp, "list_environments", q="STAG")
        assert [item["id"] for item in found["items"]] == [staging["id"]]
        assert found["items"][0]["data"] == {"url": "https://staging.example.com", "user": {"name": "ada"}}

        changed = await call(mcp, "update_environment", environmentId=staging["id"], data={"url": "http://x"})
        assert (changed["name"], changed["description"], changed["data"]) == (
            "staging",
            "the staging site",
            {"url": "http://x"},
        )
        cleared = await call(mcp, "update_environment", environmentId=staging["id"], clear=["description"])
        assert cleared["description"] is None and cleared["data"] == {"url": "http://x"}
        ordered = await call(mcp, "list_environments", orderBy="name", orderDir="asc")
        assert [item["name"] for item in ordered["items"]] == ["production", "staging"]


async def test_the_endpoint_answers_with_a_trailing_slash_too(server: Served) -> None:
    async with connect(server.mcp_url + "/") as mcp:
        assert (await call(mcp, "list_scenarios"))["total"] == 0


async def test_a_request_naming_a_foreign_host_is_refused(server: Served) -> None:
    """DNS-rebinding protection: a page on another name that resolves to 127.0.0.1 gets nothing."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    async with aiohttp.ClientSession() as http:
        foreign = await http.post(server.mcp_url, json=request, headers={**headers, "Host": "evil.example"})
        assert foreign.status == 421
        local = await http.post(server.mcp_url, json=request, headers={**headers, "Host": "localhost:1"})
        assert local.status == 200
        assert {tool["name"] for tool in (await local.json())["result"]["tools"]} == set(REQUIRED)
        elsewhere = await http.post(f"{server.url}/mcp/{uuid.uuid4()}", json=request, headers=headers)
        assert elsewhere.status == 404


async def test_a_client_of_the_2026_protocol_is_served_too(server: Served) -> None:
    """The SDK's high-level client negotiates the stateless 2026-07-28 protocol (``server/discover``)."""
    async with Client(server.mcp_url) as client:
        assert client.protocol_version == "2026-07-28"
        created = await client.call_tool("create_scenario", {"name": "modern", "timeoutSeconds": 30})
        assert not created.is_error and created.structured_content["timeoutSeconds"] == 30
        refused = await client.call_tool("get_scenario", {"scenarioId": str(uuid.uuid4())})
        assert refused.is_error and text_of(refused).startswith("404 Not Found: scenario")


async def test_a_listen_stream_is_refused_without_stalling_the_server(server_in_thread: str) -> None:
    """``subscriptions/listen`` waits for the client's disconnect: the endpoint must not spin on it."""
    async with Client(f"{server_in_thread}/mcp") as client, asyncio.timeout(10):
        with pytest.raises(MCPError, match="Method not found"):
            async with client.listen(tools_list_changed=True):
                pytest.fail("a stateless endpoint offers no listen stream")
        assert len((await client.list_tools()).tools) == len(REQUIRED)


async def test_other_methods_than_post_get_405(server: Served) -> None:
    async with aiohttp.ClientSession() as http:
        for method in ("GET", "DELETE", "PUT"):
            headers = {"Accept": "text/event-stream, application/json"}
            async with http.request(method, server.mcp_url, headers=headers) as response:
                assert response.status == 405
                # OPTIONS answers a loopback page's CORS preflight (on by default on a loopback bind)
                assert set(response.headers["Allow"].split(",")) == {"POST", "OPTIONS"}
                assert response.content_type == "application/problem+json"


async def test_a_body_over_the_size_limit_gets_413(start_server: ServerFactory) -> None:
    small = await start_server(max_body_bytes=2048)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x" * 4096}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(small.mcp_url, json=request, headers=headers) as response,
    ):
        assert response.status == 413


async def test_step_code_that_drops_a_playwright_coroutine_is_saved_with_a_warning(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        scenario = await call(
            mcp, "create_scenario", name="Careless", steps=[{"execCode": "page.goto(helpers.getEnvUrl())"}]
        )
        step = await call(
            mcp, "create_step", scenarioId=scenario["id"], execCode="expect(page).to_have_title('Demo')"
        )
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}

    first = scenario["steps"][0]
    assert scenario["warnings"] == [
        {
            "scenarioId": scenario["id"],
            "stepId": first["id"],
            "order": 1,
            "line": 1,
            "message": "line 1: page.goto(helpers.getEnvUrl()) is not awaited; add await",
        }
    ]
    assert [w["message"] for w in step["warnings"]] == [
        "line 1: expect(page).to_have_title('Demo') is not awaited; add await"
    ]
    for name in ("create_scenario", "update_scenario", "create_step", "update_step", "authoring_save"):
        assert "`warnings`" in (tools[name].description or ""), name
