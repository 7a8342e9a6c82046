"""SCENARIOKIT_BROWSER_WS: runs use a remote Playwright browser server instead of launching Chromium."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import playwright
import pytest

import scenariokit
from scenariokit.runner.worker.browser import discover_browser

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

DRIVER = Path(playwright.__file__).parent / "driver"
LAUNCH_SERVER = """
const { chromium } = require(process.argv[2]);
(async () => {
  const options = { executablePath: process.argv[3], args: process.argv.slice(4) };
  const server = await chromium.launchServer(options);
  console.log(server.wsEndpoint());
  process.stdin.on("end", async () => { await server.close(); process.exit(0); });
  process.stdin.resume();
})();
"""


@pytest.fixture
def browser_server(tmp_path: Path) -> Iterator[str]:
    """A Playwright browser server (Playwright's own Node driver) on 127.0.0.1; yields its ws:// URL."""
    local = discover_browser()
    assert local.executable, "a local Chromium is needed to host the browser server"
    script = tmp_path / "launch_server.js"
    script.write_text(LAUNCH_SERVER)
    server = subprocess.Popen(
        [str(DRIVER / "node"), str(script), str(DRIVER / "package"), local.executable, *local.launch_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    endpoint = server.stdout.readline().strip()
    assert endpoint.startswith("ws://127.0.0.1:"), endpoint
    try:
        yield endpoint
    finally:
        server.stdin.close()  # the script closes its browser when its input ends
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


async def test_runs_use_the_remote_browser_and_launch_none(
    browser_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, site: Any
) -> None:
    monkeypatch.setenv("SCENARIOKIT_BROWSER_WS", browser_server)
    # No local browser can be found: a run that passes used the remote one.
    monkeypatch.setenv("SCENARIOKIT_BROWSER_PATH", str(tmp_path / "no-such-browser"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    assert discover_browser(os.environ).ws_endpoint == browser_server
    async with scenariokit.open_kit(f"sqlite:///{tmp_path / 'remote.db'}", workers=1) as kit:
        env = await kit.environments.create({"name": "site", "data": {"url": site.url}})
        scenario = await kit.scenarios.create(
            {
                "name": "remote",
                "steps": [
                    {
                        "execCode": "await page.goto(helpers.getEnvUrl())\n"
                        "await expect(page.get_by_text('Hello')).to_be_visible()\nprint(browser.version)"
                    }
                ],
            }
        )
        result = await asyncio.wait_for(kit.run(scenario.id, environment_id=env.id, timeout=60), 90)
    assert result.run.status is scenariokit.RunStatus.PASS, result.run.error


async def test_browser_args_with_a_remote_browser_fail_each_run_saying_why(
    browser_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, site: Any
) -> None:
    """Switches for a browser the workers do not launch would be lost: runs fail naming the variable."""
    monkeypatch.setenv("SCENARIOKIT_BROWSER_WS", browser_server)
    monkeypatch.setenv("SCENARIOKIT_BROWSER_ARGS", "--disable-software-rasterizer")
    async with scenariokit.open_kit(f"sqlite:///{tmp_path / 'remote.db'}", workers=1) as kit:
        env = await kit.environments.create({"name": "site", "data": {"url": site.url}})
        scenario = await kit.scenarios.create({"name": "remote", "steps": [{"execCode": "print('never')"}]})
        result = await asyncio.wait_for(kit.run(scenario.id, environment_id=env.id, timeout=60), 90)
    assert result.run.status is scenariokit.RunStatus.FAIL
    assert result.run.error is not None
    said = "SCENARIOKIT_BROWSER_ARGS is set, but a remote browser (SCENARIOKIT_BROWSER_WS)"
    assert said in result.run.error.message
