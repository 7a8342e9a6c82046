"""The agent's loop, end to end, through real clients over real HTTP: find the failing run, see its
screenshot, read what changed, fix the step, run it, see it pass (docs/mcp.md, "Repairing a failing
check"). Once with the official MCP client, once with the MCP Inspector's CLI."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from loop_support import FIXED_CLICK, NEW_LABEL, OLD_LABEL, WAIT_SECONDS, Shop, red_nightly_check, shop_site
from mcp_support import Served, Transcript, connect
from mcp_types import ImageContent, ResourceLink, TextContent

from scenariokit.runner.parent.scheduler import Scheduler

pytestmark = pytest.mark.browser

#: How long one CLI request waits for a run (under the 60 s the CLI's client waits for an answer).
CLI_WAIT_SECONDS = 40
#: The Inspector release the CLI test installs (later ones need Node 22).
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
#: Where the CLI test keeps its install between runs (override: SCENARIOKIT_INSPECTOR_DIR).
INSPECTOR_DIR = Path(
    os.environ.get("SCENARIOKIT_INSPECTOR_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "scenariokit-tests"
    / "mcp-inspector"
)


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    async with shop_site() as served:
        yield served


async def test_an_agent_repairs_a_failing_check_with_the_official_client(
    server: Served, scheduler: Scheduler, shop: Shop
) -> None:
    check = await red_nightly_check(server.services, shop)
    transcript = Transcript()
    async with connect(server.mcp_url) as mcp:
        tools = {tool.name for tool in (await mcp.list_tools()).tools}

        # 1. Which checks are red?
        failing = await transcript.call(mcp, "list_runs", status="fail", limit=5)
        (red,) = failing["items"]
        assert (red["id"], red["scenario"]["name"]) == (str(check.failed_run_id), "Cart button")

        # 2. Look at the failure: the error, the step, and the screenshot of the page as it failed.
        seen = await transcript.call_full(mcp, "get_run", runId=red["id"], includeScreenshots=True)
        run = seen.structured_content
        assert run["error"]["kind"] == "assertion" and OLD_LABEL in run["error"]["message"]
        assert [step["status"] for step in run["stepResults"]] == ["pass", "fail"]
        images = [block for block in seen.content if isinstance(block, ImageContent)]
        assert [image.mime_type for image in images] == ["image/png"]
        assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")
        assert [artifact["name"] for artifact in run["artifacts"]] == ["step-2.png"]
        assert not any(isinstance(block, ResourceLink) for block in seen.content)  # no other file
        last = seen.content[-1]
        assert isinstance(last, TextContent) and json.loads(last.text) == run

        # 3. What changed since the last pass? (Scenario revisions, where the server has them.)
        if {"list_revisions", "diff_revisions"} <= tools:
            stats = await transcript.call(mcp, "get_scenario_stats", scenarioId=red["scenarioId"])
            scenario = await transcript.call(mcp, "get_scenario", scenarioId=red["scenarioId"])
            diff = await transcript.call(
                mcp,
                "diff_revisions",
                scenarioId=red["scenarioId"],
                **{"from": stats["lastPass"]["revision"], "to": scenario["revision"]},
            )
            assert diff["steps"] == []  # the check did not change: the shop did

        # 4. Fix the failing step, as the screenshot shows the page now.
        scenario = await transcript.call(mcp, "get_scenario", scenarioId=red["scenarioId"])
        failed_step = next(step for step in scenario["steps"] if step["id"] == run["error"]["stepId"])
        assert OLD_LABEL in failed_step["execCode"]
        fixed = await transcript.call(
            mcp,
            "update_step",
            scenarioId=scenario["id"],
            stepId=failed_step["id"],
            execCode=failed_step["execCode"].replace(OLD_LABEL, NEW_LABEL),
        )
        assert fixed["execCode"] == FIXED_CLICK

        # 5. Run it, and see it pass.
        rerun = await transcript.call(
            mcp,
            "run_scenario",
            scenarioId=scenario["id"],
            environmentId=red["environmentId"],
            wait=True,
            waitSeconds=WAIT_SECONDS,
        )
        assert (rerun["status"], rerun["error"]) == ("pass", None)
        passing = await transcript.call(mcp, "list_runs", scenarioId=scenario["id"], status="pass")
        assert {item["id"] for item in passing["items"]} == {str(check.passed_run_id), rerun["id"]}
    transcript.save()


# --- the same loop through the MCP Inspector's CLI ------------------------------------------------


def _inspector() -> Path:
    """The installed Inspector's package directory, installed once into :data:`INSPECTOR_DIR`.

    Skips (with the reason) where npm is missing or the registry cannot be reached.
    """
    npm, npx = shutil.which("npm"), shutil.which("npx")
    if npm is None or npx is None:
        pytest.skip("npm/npx are not installed: the MCP Inspector CLI cannot be run")
    package = INSPECTOR_DIR / "node_modules" / "@modelcontextprotocol" / "inspector"
    if not (package / "package.json").is_file():
        INSPECTOR_DIR.mkdir(parents=True, exist_ok=True)
        import subprocess

        installed = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(INSPECTOR_DIR),
             INSPECTOR],
            capture_output=True,
            text=True,
            timeout=900,
        )  # fmt: skip
        if installed.returncode != 0:
            pytest.skip(
                f"npm could not install {INSPECTOR} (is the registry reachable?): {installed.stderr[-500:]}"
            )
    return INSPECTOR_DIR


class InspectorCli:
    """Tool calls through ``npx @modelcontextprotocol/inspector --cli <url> --method tools/call …``."""

    def __init__(self, home: Path, url: str) -> None:
        self.home = home
        self.url = url

    async def run(self, *arguments: str) -> dict[str, Any]:
        """The CLI's JSON answer to one request."""
        process = await asyncio.create_subprocess_exec(
            "npx", "--no-install", "@modelcontextprotocol/inspector",
            "--cli", self.url, "--transport", "http", *arguments,
            cwd=self.home,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        answer: dict[str, Any] = json.loads(out)
        return answer

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """``tools/call``; each argument as ``--tool-arg name=value`` (the CLI converts by the schema)."""
        pairs = [
            f"{name}={value if isinstance(value, str) else json.dumps(value)}"
            for name, value in arguments.items()
        ]
        flags = ["--tool-arg", *pairs] if pairs else []
        result = await self.run("--method", "tools/call", "--tool-name", tool, *flags)
        assert not result.get("isError"), result
        return result


async def test_the_same_loop_runs_through_the_mcp_inspector_cli(
    server: Served, scheduler: Scheduler, shop: Shop
) -> None:
    cli = InspectorCli(await asyncio.to_thread(_inspector), server.mcp_url)
    check = await red_nightly_check(server.services, shop)

    listed = await cli.run("--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert "outputSchema" in tools["get_run"] and "anyOf" in tools["run_scenario"]["inputSchema"]

    failing = (await cli.call("list_runs", status="fail"))["structuredContent"]
    assert [item["id"] for item in failing["items"]] == [str(check.failed_run_id)]
    seen = await cli.call("get_run", runId=str(check.failed_run_id), includeScreenshots=True)
    assert [block["mimeType"] for block in seen["content"] if block["type"] == "image"] == ["image/png"]
    run = seen["structuredContent"]
    if "diff_revisions" in tools:
        scenario = (await cli.call("get_scenario", scenarioId=run["scenarioId"]))["structuredContent"]
        stats = (await cli.call("get_scenario_stats", scenarioId=run["scenarioId"]))["structuredContent"]
        diff = await cli.call(
            "diff_revisions",
            scenarioId=run["scenarioId"],
            **{"from": stats["lastPass"]["revision"], "to": scenario["revision"]},
        )
        assert diff["structuredContent"]["steps"] == []
    await cli.call(
        "update_step", scenarioId=run["scenarioId"], stepId=run["error"]["stepId"], execCode=FIXED_CLICK
    )
    # The CLI gives up on a request after 60 s: wait less, then follow the run with get_run.
    rerun = await cli.call(
        "run_scenario",
        scenarioId=run["scenarioId"],
        environmentId=str(check.environment_id),
        wait=True,
        waitSeconds=CLI_WAIT_SECONDS,
    )
    status = rerun["structuredContent"]["status"]
    for _ in range(WAIT_SECONDS // CLI_WAIT_SECONDS):
        if status != "in_progress":
            break
        status = (await cli.call("get_run", runId=rerun["structuredContent"]["id"]))["structuredContent"][
            "status"
        ]
        await asyncio.sleep(1)
    assert status == "pass"
