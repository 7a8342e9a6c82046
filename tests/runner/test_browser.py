"""Browser discovery: explicit choices first, then what is installed; errors name what was tried."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.runner.browser import (
    DEFAULT_ARGS,
    BrowserConfig,
    browser_status,
    discover_browser,
    playwright_chromium_path,
)


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_playwright_browser(tmp_path: Path) -> dict[str, str]:
    """An environment where Playwright has installed no browser and PATH holds nothing."""
    return {"PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "ms-playwright"), "PATH": str(tmp_path / "empty-bin")}


def test_remote_browser_server_wins_over_everything(no_playwright_browser: dict[str, str]) -> None:
    env = {**no_playwright_browser, "SCENARIOKIT_BROWSER_WS": "ws://127.0.0.1:3000/pw"}

    assert discover_browser(env) == BrowserConfig(ws_endpoint="ws://127.0.0.1:3000/pw")


def test_a_configured_path_wins_over_playwrights_own_chromium(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(playwright_chromium_path(no_playwright_browser))
    custom = executable(tmp_path / "custom" / "chrome")

    assert discover_browser(
        {**no_playwright_browser, "SCENARIOKIT_BROWSER_PATH": str(custom)}
    ).executable == str(custom)


def test_playwrights_own_chromium_comes_before_the_system_browser(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    own = executable(playwright_chromium_path(no_playwright_browser))
    executable(tmp_path / "empty-bin" / "chromium")

    assert discover_browser(no_playwright_browser).executable == str(own)
    assert str(own).startswith(no_playwright_browser["PLAYWRIGHT_BROWSERS_PATH"])


def test_system_chromium_on_path_is_the_last_resort(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    system = executable(tmp_path / "empty-bin" / "chromium-browser")

    assert discover_browser(no_playwright_browser).executable == str(system)


def test_a_configured_path_that_is_no_executable_is_refused_not_replaced(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(tmp_path / "empty-bin" / "chromium")
    env = {**no_playwright_browser, "SCENARIOKIT_BROWSER_PATH": "/nowhere/chrome"}

    refused = "SCENARIOKIT_BROWSER_PATH=/nowhere/chrome is not an executable"
    with pytest.raises(BrowserUnavailable, match=refused):
        discover_browser(env)
    assert browser_status(env) == "missing"


def test_no_browser_anywhere_names_every_place_tried(no_playwright_browser: dict[str, str]) -> None:
    with pytest.raises(BrowserUnavailable) as caught:
        discover_browser(no_playwright_browser)

    message = str(caught.value)
    assert "SCENARIOKIT_BROWSER_PATH (not set)" in message
    assert "Playwright's Chromium" in message
    assert "chromium, chromium-browser, google-chrome on PATH" in message
    assert browser_status(no_playwright_browser) == "missing"


def test_browser_status_is_ok_with_the_machines_browser() -> None:
    assert browser_status() == "ok"


def test_launch_flags_add_no_sandbox_for_root_and_keep_extra_args() -> None:
    config = BrowserConfig(executable="/usr/bin/chromium", args=("--lang=de",))

    options = config.launch_options()

    assert options["executable_path"] == "/usr/bin/chromium" and options["headless"] is True
    assert options["args"][-len(DEFAULT_ARGS) - 1 :] == [*DEFAULT_ARGS, "--lang=de"]
    assert ("--no-sandbox" in options["args"]) == (os.geteuid() == 0)
