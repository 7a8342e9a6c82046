"""Runs through MCP: ``run_scenario`` executes in a real Chromium, ``get_run`` reads the outcome and log."""

from __future__ import annotations

import pytest
from mcp_support import Served, Transcript, call, connect, fail, text_of

from scenariokit.runner.parent.scheduler import Scheduler

OPEN_AND_CHECK = """\
await page.goto(helpers.getEnvUrl())
await expect(page.get_by_text("Hello")).to_be_visible()
print("saw the greeting on", await page.title())
"""


@pytest.mark.browser
@pytest.mark.platform
async def test_a_scenario_runs_to_pass_and_its_log_is_searchable(
    server: Served, scheduler: Scheduler, hello_site: str
) -> None:
    transcript = Transcript()
    async with connect(server.mcp_url) as mcp:
        environment = await transcript.call(
            mcp, "create_environment", name="local", data={"url": hello_site, "user": "ada"}
        )
        scenario = await transcript.call(
            mcp,
            "create_scenario",
            name="Greeting",
            description="The home page greets the visitor",
            environmentId=environment["id"],
            timeoutSeconds=60,
            steps=[{"title": "Open the home page", "execCode": OPEN_AND_CHECK, "timeoutSeconds": 20}],
        )
        step = await transcript.call(
            mcp,
            "create_step",
            scenarioId=scenario["id"],
            title="Say who ran it",
            execCode="log(f\"run by {helpers.env['user']}\")",
            timeoutSeconds=5,
        )
        await transcript.call(mcp, "update_scenario", scenarioId=scenario["id"], timeoutSeconds=45)
        run = await transcript.call(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=environment["id"], wait=True
        )
        assert run["status"] == "pass", run["error"]
        assert run["error"] is None and run["finishedAt"] and run["durationMs"] >= 0
        assert [(r["title"], r["status"]) for r in run["stepResults"]] == [
            ("Open the home page", "pass"),
            ("Say who ran it", "pass"),
        ]
        assert run["environment"] == environment and run["scenario"]["name"] == "Greeting"
        messages = [line["message"] for line in run["logs"]["items"]]
        assert any("saw the greeting on Hello page" in message for message in messages)

        timings = run["timings"]
        assert [t["stepId"] for t in timings["steps"]] == [r["stepId"] for r in run["stepResults"]]
        phases = {name: ms for name, ms in timings.items() if name not in ("steps", "browserCloseMs")}
        assert all(isinstance(ms, int) and ms >= 0 for ms in phases.values()), phases

        filtered = await transcript.call(mcp, "get_run", runId=run["id"], q="RUN BY")
        assert [line["message"] for line in filtered["logs"]["items"]] == ["run by ada"]
        assert filtered["logs"]["total"] == 1
        assert (filtered["status"], filtered["stepResults"]) == (run["status"], run["stepResults"])
        await call(mcp, "delete_step", scenarioId=scenario["id"], stepId=step["id"])
    transcript.save()


@pytest.mark.browser
async def test_a_failed_assertion_fails_the_run_with_its_message(
    server: Served, scheduler: Scheduler, hello_site: str
) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="local", data={"url": hello_site})
        scenario = await call(
            mcp,
            "create_scenario",
            name="Wrong greeting",
            steps=[
                {
                    "execCode": "await page.goto(helpers.getEnvUrl())\n"
                    "await expect(page.get_by_text('Goodbye')).to_be_visible(timeout=500)",
                    "timeoutSeconds": 10,
                },
                {"execCode": "print('never')"},
            ],
        )
        run = await call(
            mcp, "run_scenario", scenarioId=scenario["id"], environmentId=environment["id"], wait=True
        )
    assert run["status"] == "fail"
    assert run["error"]["kind"] == "assertion" and "Goodbye" in run["error"]["message"]
    assert [r["status"] for r in run["stepResults"]] == ["fail", "skipped"]
    # The same files and trace link as REST answers (no trace is recorded here: the default is off).
    shot = f"/api/v1/run/{run['id']}/artifacts/step-1.png"
    assert run["artifacts"] == [{"name": "step-1.png", "url": shot, "contentType": "image/png"}]
    assert run["traceViewerUrl"] is None


async def test_without_wait_the_run_is_returned_in_progress_at_once(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="nowhere")
        scenario = await call(mcp, "create_scenario", name="queued", steps=[{"execCode": "pass"}])
        result = await mcp.call_tool(
            "run_scenario",
            {"scenarioId": scenario["id"], "environmentId": environment["id"], "saveSession": True},
        )
        run = result.structured_content
        assert (run["status"], run["saveSession"], run["logs"]["items"]) == ("in_progress", True, [])
        assert len(result.content) == 1  # the JSON text alone: no note
        assert await call(mcp, "get_run", runId=run["id"]) == run


async def test_waiting_stops_at_wait_seconds_and_says_the_run_is_still_in_progress(server: Served) -> None:
    """No scheduler runs here, so the run stays queued past the bound."""
    async with connect(server.mcp_url) as mcp:
        environment = await call(mcp, "create_environment", name="nowhere")
        scenario = await call(mcp, "create_scenario", name="queued")
        result = await mcp.call_tool(
            "run_scenario",
            {
                "scenarioId": scenario["id"],
                "environmentId": environment["id"],
                "wait": True,
                "waitSeconds": 0.3,
            },
        )
        assert not result.is_error
        run = result.structured_content
        assert run["status"] == "in_progress"
        note = f"still in_progress after waiting 0.3 s; call get_run with runId {run['id']}"
        assert note in text_of(result)
        ids = {"scenarioId": scenario["id"], "environmentId": environment["id"]}
        refused = await fail(mcp, "run_scenario", **ids, wait=True, waitSeconds=600.5)
        assert "waitSeconds" in text_of(refused)
