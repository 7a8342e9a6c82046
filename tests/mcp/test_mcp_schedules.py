"""The schedule tools: list_schedules, create_schedule, update_schedule, delete_schedule."""

from __future__ import annotations

from mcp_support import Served, call, connect, fail, text_of


async def test_schedules_are_created_paused_switched_listed_and_deleted(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        scenario = await call(mcp, "create_scenario", name="ping")
        env = await call(mcp, "create_environment", name="site", data={"url": "http://127.0.0.1:9"})
        created = await call(
            mcp,
            "create_schedule",
            scenarioId=scenario["id"],
            environmentIds=[env["id"]],
            cron="0 9 * * 1-5",
            timezone="America/New_York",
        )
        assert created["cron"] == "0 9 * * 1-5" and created["nextFireAt"] is not None
        paused = await call(mcp, "update_schedule", scheduleId=created["id"], enabled=False)
        assert paused["nextFireAt"] is None and paused["cron"] == "0 9 * * 1-5"
        switched = await call(
            mcp,
            "update_schedule",
            scheduleId=created["id"],
            intervalSeconds=300,
            enabled=True,
            clear=["cron"],
        )
        assert (switched["cron"], switched["intervalSeconds"]) == (None, 300) and switched["nextFireAt"]
        listed = await call(mcp, "list_schedules", scenarioId=scenario["id"])
        assert [item["id"] for item in listed["items"]] == [created["id"]]

        refused = await fail(mcp, "update_schedule", scheduleId=created["id"], cron="0 * * * *")
        assert "cron" in refused.structured_content["errors"]
        bad = await fail(
            mcp, "create_schedule", scenarioId=scenario["id"], environmentIds=[env["id"]], cron="99 * * * *"
        )
        assert "cron" in bad.structured_content["errors"]
        assert (await call(mcp, "list_schedules"))["total"] == 1

        assert await call(mcp, "delete_schedule", scheduleId=created["id"]) == {
            "id": created["id"],
            "deleted": True,
        }
        gone = await fail(mcp, "delete_schedule", scheduleId=created["id"])
        assert "404" in text_of(gone)
