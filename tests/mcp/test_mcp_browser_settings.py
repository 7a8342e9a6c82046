"""Browser settings through MCP: the same shape, rules and answers as REST (docs/browser.md)."""

from __future__ import annotations

from mcp_support import Served, call, connect, fail, text_of

MOBILE = {"device": "Pixel 7", "locale": "de-DE", "colorScheme": "dark", "blockUrls": ["**/ads/**"]}


async def test_environments_and_scenarios_take_browser_settings(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="phone", browser=MOBILE)
        assert environment["browser"] == MOBILE
        changed = await call(
            mcp, "update_environment", environmentId=environment["id"], browser={"timezoneId": "Asia/Tokyo"}
        )
        assert changed["browser"] == {"timezoneId": "Asia/Tokyo"}
        scenario = await call(mcp, "create_scenario", name="s", browser={"video": "retain-on-failure"})
        assert scenario["browser"] == {"video": "retain-on-failure"}
        patched = await call(
            mcp,
            "update_scenario",
            scenarioId=scenario["id"],
            browser={"viewport": {"width": 390, "height": 844}},
        )
        assert patched["browser"] == {"viewport": {"width": 390, "height": 844}}
        tools = {tool.name: tool.input_schema for tool in (await mcp.list_tools()).tools}
        for name in ("create_environment", "update_environment", "create_scenario", "update_scenario"):
            assert "device" in tools[name]["properties"]["browser"]["description"], name


async def test_bad_settings_are_tool_errors_naming_the_field(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        refused = await fail(mcp, "create_environment", name="x", browser={"device": "Nokia 3310"})
        assert "browser.device" in text_of(refused) and "not a device Playwright knows" in text_of(refused)
        refused = await fail(mcp, "create_scenario", name="x", browser={"video": "sometimes"})
        assert "browser.video" in text_of(refused)
        assert (await call(mcp, "list_environments"))["total"] == 0
        assert (await call(mcp, "list_scenarios"))["total"] == 0
