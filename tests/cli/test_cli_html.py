"""``scenariokit run --html DIR``: the report pages of local runs, opened from disk in real Chromium."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from browser_checks import loaded_image_width
from scenariokit.cli import main
from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.runner.worker.browser import discover_browser


def _launch_options() -> dict[str, Any]:
    try:
        return dict(discover_browser().launch_options())
    except BrowserUnavailable as exc:
        pytest.skip(f"no Chromium: {exc}")


@pytest.mark.browser
async def test_html_writes_an_index_and_a_page_per_scenario_that_open_from_disk(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from playwright.async_api import async_playwright

    report = tmp_path / "report"
    args = ["run", str(files / "passing.scenario.yaml"), str(files / "mixed.scenario.yaml"),
            "--env", str(files / "local.env.yaml"), "--html", str(report),
            "--artifacts", str(files / "art"), "--workers", "1", "--trace", "on-failure"]  # fmt: skip
    status = await asyncio.to_thread(main, args)  # it runs its own event loop

    assert status == 1
    assert f"HTML report: {report / 'index.html'}" in capsys.readouterr().out
    assert sorted(p.name for p in (report / "assets").iterdir()) == ["report.css", "report.js"]
    pages = sorted((report / "runs").glob("*.html"))
    assert len(pages) == 3
    assert list((report / "files").glob("*/step-2.png")) and list((report / "files").glob("*/trace.zip"))

    moved = tmp_path / "published"  # the folder works wherever it goes: every link is relative
    shutil.move(report, moved)
    shutil.rmtree(files / "art")  # and needs nothing outside it
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**_launch_options())
        try:
            page = await browser.new_page()
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            await page.goto((moved / "index.html").as_uri())
            rows = page.locator("#runs tbody tr")
            assert await rows.count() == 3
            assert await page.locator("#runs .badge.fail").count() == 2
            await page.get_by_role("link", name="says goodbye").click()
            assert await page.locator("#scenario-name").inner_text() == "says goodbye"
            assert await page.locator("#failed-step").inner_text() == 'step 2 "look for the farewell"'
            assert "Goodbye" in await page.locator("#error-message").inner_text()
            assert await loaded_image_width(page.locator("#screenshot")) > 0
            assert "playwright show-trace" in await page.locator(".evidence").inner_text()
            every = await page.locator("#log li").count()
            await page.locator("#log-q").fill("LOOKING for")
            await page.locator("#log-q").press("Enter")  # from disk it only narrows, never submits
            shown = page.locator("#log li:not([hidden])")
            assert await shown.count() == 1 < every
            assert await shown.inner_text() == "info looking for the farewell"
            assert page.url.startswith(moved.as_uri())
            await page.screenshot(path=tmp_path / "local-run-page.png", full_page=True)
            await page.get_by_role("link", name="all runs").click()
            assert await page.locator("#runs").count() == 1
        finally:
            await browser.close()
    assert requested and all(url.startswith("file://") for url in requested), requested


def test_html_naming_a_file_is_a_usage_error_before_anything_runs(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = files / "taken.html"
    taken.write_text("not a folder")

    status = main(["run", str(files / "passing.scenario.yaml"), "--html", str(taken)])

    assert status == 2
    assert f"--html {taken}: not a folder" in capsys.readouterr().err
    assert taken.read_text() == "not a folder"
