"""Every tool answers structured content that its listed ``outputSchema`` validates (a JSON Schema
validator, beside the official client, which checks the same on each call)."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp.client.session import ClientSession
from mcp_support import Served, connect, text_of

from scenariokit.runner.parent.scheduler import Scheduler

pytestmark = pytest.mark.browser

GOTO = "await page.goto(helpers.getEnvUrl())\nawait expect(page.get_by_text('Hello')).to_be_visible()"
SNIPPET = "kind: snippet\nalias: greet\ntitle: Greet\ncode: |\n  log('hello ' + args[0])\n"


class Checked:
    """Tool calls whose answers are validated against the tools' listed output schemas."""

    def __init__(self, session: ClientSession, schemas: dict[str, dict[str, Any]]) -> None:
        self.session = session
        self.validators = {
            name: Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
            for name, schema in schemas.items()
        }
        self.called: set[str] = set()

    async def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        assert not result.is_error, text_of(result)
        data: dict[str, Any] = result.structured_content
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in self.validators[tool].iter_errors(data)
        ]
        assert errors == [], f"{tool}: {errors}"
        self.called.add(tool)
        return data


async def test_every_tool_answers_what_its_output_schema_says(
    server: Served, scheduler: Scheduler, hello_site: str
) -> None:
    async with connect(server.mcp_url) as mcp:
        listed = (await mcp.list_tools()).tools
        call = Checked(mcp, {tool.name: tool.output_schema for tool in listed if tool.output_schema})
        assert set(call.validators) == {tool.name for tool in listed}

        await call("get_health")
        env = await call("create_environment", name="hello", data={"url": hello_site})
        await call("update_environment", environmentId=env["id"], description="the hello page")
        await call("list_environments")
        scenario = await call(
            "create_scenario", name="greeting", environmentId=env["id"], steps=[{"execCode": GOTO}]
        )
        step = await call("create_step", scenarioId=scenario["id"], execCode="log('more')", title="more")
        await call("update_step", scenarioId=scenario["id"], stepId=step["id"], title="still more")
        await call("update_scenario", scenarioId=scenario["id"], description="says hello")
        await call("get_scenario", scenarioId=scenario["id"])
        await call("list_scenarios")
        run = await call(
            "run_scenario", scenarioId=scenario["id"], environmentId=env["id"], wait=True, waitSeconds=120
        )
        assert run["status"] == "pass", run
        await call("get_run", runId=run["id"], includeScreenshots=True, q="more")
        await call("delete_step", scenarioId=scenario["id"], stepId=step["id"])

        slow = await call(
            "create_scenario", name="slow", steps=[{"execCode": "await page.wait_for_timeout(60000)"}]
        )
        batch = await call("run_scenario", scenarioId=slow["id"], environmentIds=[env["id"]])
        await call("cancel_run", runId=batch["runs"][0]["id"])  # the worker stops it within a second
        await call("list_runs", status="fail")
        await call("get_scenario_stats", scenarioId=slow["id"])

        schedule = await call(
            "create_schedule",
            scenarioId=scenario["id"],
            environmentIds=[env["id"]],
            intervalSeconds=3600,
            enabled=False,
        )
        await call("update_schedule", scheduleId=schedule["id"], timezone="Europe/Berlin")
        await call("list_schedules")
        await call("delete_schedule", scheduleId=schedule["id"])

        imported = await call("import_yaml", kind="snippet", yaml=SNIPPET)
        await call("get_snippet", snippetId=imported["created"]["snippet"][0])
        await call("list_snippets")
        await call("list_credentials")
        await call("list_sessions")
        await call("export_yaml", kind="scenario", ids=[scenario["id"]])

        started = await call("authoring_start", environmentId=env["id"])
        await call("authoring_exec", authoringId=started["authoringId"], code=GOTO, screenshot=True)
        await call("authoring_snapshot", authoringId=started["authoringId"])
        saved = await call("authoring_save", authoringId=started["authoringId"], name="authored")
        await call("authoring_end", authoringId=started["authoringId"])

        tools = set(call.validators)
        if "list_revisions" in tools:  # scenario revisions (docs/mcp.md), where the server has them
            revisions = await call("list_revisions", scenarioId=scenario["id"])
            await call(
                "diff_revisions",
                scenarioId=scenario["id"],
                **{"from": 1, "to": revisions["items"][0]["number"]},
            )
            await call("restore_revision", scenarioId=scenario["id"], revision=1)

        await call("delete_scenario", scenarioId=saved["id"])
        gone = await call("create_environment", name="gone")
        await call("delete_environment", environmentId=gone["id"])
    assert call.called == tools, f"call these here too: {sorted(tools - call.called)}"
