"""``retries`` over MCP: create_scenario and update_scenario take it with REST's schema and rules."""

from __future__ import annotations

from mcp_support import Served, call, connect, fail

from scenariokit.domain.model import MAX_BACKOFF_SECONDS, MAX_RETRIES


async def test_create_and_update_scenario_take_retries_with_the_rest_schema(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        for name in ("create_scenario", "update_scenario"):
            schema = tools[name].input_schema["properties"]["retries"]
            shape = schema
            assert shape["properties"]["count"]["maximum"] == MAX_RETRIES
            assert shape["properties"]["backoffSeconds"]["maximum"] == MAX_BACKOFF_SECONDS
            assert shape["properties"]["backoff"]["enum"] == ["fixed", "linear", "exponential"]
            assert "fresh browser" in schema["description"]

        created = await call(
            mcp,
            "create_scenario",
            name="ping",
            retries={"count": 2, "backoff": "linear", "backoffSeconds": 3},
        )
        assert created["retries"] == {"count": 2, "backoff": "linear", "backoffSeconds": 3.0}
        renamed = await call(mcp, "update_scenario", scenarioId=created["id"], name="ping v2")
        assert renamed["retries"] == created["retries"]
        changed = await call(mcp, "update_scenario", scenarioId=created["id"], retries={"count": 0})
        assert changed["retries"] == {"count": 0, "backoff": "fixed", "backoffSeconds": 0.0}


async def test_bad_retries_over_mcp_are_refused_naming_the_field_and_store_nothing(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "create_scenario", name="x", retries={"count": 9})
        assert refused.structured_content["errors"] == {"retries.count": "must be a whole number from 0 to 5"}
        assert (await call(mcp, "list_scenarios"))["total"] == 0
        kept = await call(mcp, "create_scenario", name="kept", retries={"count": 1})
        refused = await fail(
            mcp, "update_scenario", scenarioId=kept["id"], retries={"count": 1, "backoff": "later"}
        )
        assert "retries.backoff" in refused.structured_content["errors"]
        read = await call(mcp, "get_scenario", scenarioId=kept["id"])
        assert read["retries"]["count"] == 1 and read["retries"]["backoff"] == "fixed"
