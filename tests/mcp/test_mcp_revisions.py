"""The revision tools through the official MCP client: list, diff, restore, and ``message`` on writes."""

from __future__ import annotations

from mcp_support import Served, call, connect, fail, text_of


async def test_an_agent_finds_what_changed_and_restores_it(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        scenario = await call(
            mcp, "create_scenario", name="Checkout", steps=[{"execCode": "x = 1"}, {"execCode": "y = 1"}]
        )
        sid, (first, second) = scenario["id"], scenario["steps"]
        assert scenario["revision"] == 1
        await call(mcp, "update_step", scenarioId=sid, stepId=second["id"], execCode="y = 2", message="fix y")
        renamed = await call(mcp, "update_scenario", scenarioId=sid, name="Checkout 2", message="rename")
        assert renamed["revision"] == 3
        same = await call(mcp, "update_scenario", scenarioId=sid, name="Checkout 2")
        assert same["revision"] == 3

        listed = await call(mcp, "list_revisions", scenarioId=sid, limit=2)
        assert listed["total"] == 3
        assert [(i["number"], i["source"], i["message"]) for i in listed["items"]] == [
            (3, "mcp", "rename"),
            (2, "mcp", "fix y"),
        ]
        diff = await call(mcp, "diff_revisions", scenarioId=sid, **{"from": 1, "to": 3})
        assert (diff["from"], diff["to"]) == (1, 3)
        assert diff["fields"] == {"name": ["Checkout", "Checkout 2"]}
        [step] = diff["steps"]
        assert (step["stepId"], step["change"], step["order"]) == (second["id"], "changed", 2)
        assert "-  y = 1\n+  y = 2\n" in step["diff"]

        restored = await call(mcp, "restore_revision", scenarioId=sid, revision=1, message="back")
        assert restored["revision"] == 4 and restored["name"] == "Checkout"
        assert [s["execCode"] for s in restored["steps"]] == ["x = 1", "y = 1"]
        newest = (await call(mcp, "list_revisions", scenarioId=sid))["items"][0]
        assert (newest["source"], newest["message"]) == ("restore", "back")
        assert first["id"] == restored["steps"][0]["id"]


async def test_bad_revision_arguments_are_tool_errors(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        scenario = await call(mcp, "create_scenario", name="Checkout")
        sid = scenario["id"]
        missing = await fail(mcp, "diff_revisions", scenarioId=sid, **{"from": 1, "to": 5})
        assert "404" in text_of(missing)
        assert "404" in text_of(await fail(mcp, "restore_revision", scenarioId=sid, revision=9))
        assert "400" in text_of(await fail(mcp, "list_revisions", scenarioId="not-a-uuid"))
        await fail(mcp, "restore_revision", scenarioId=sid, revision=0)
        await fail(mcp, "update_scenario", scenarioId=sid, name="x", message="m" * 1001)
        assert (await call(mcp, "get_scenario", scenarioId=sid))["revision"] == 1
