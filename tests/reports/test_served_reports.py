"""The run page, the index and the trace viewer, served by the real app and looked at in real Chromium.

What a person sees is checked in the browser: the failing step and its error, the screenshot loaded,
the log filter narrowing the lines, the trace viewer listing the run's actions; every request the
pages make stays on 127.0.0.1. Screenshots of the pages are saved in the test's temporary folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from report_support import API, Api, ServerFactory, Watch

from browser_checks import loaded_image_width

pytestmark = pytest.mark.browser


@pytest.mark.platform
async def test_the_run_page_of_a_failed_run_shows_step_error_screenshot_and_a_log_filter(
    server: ServerFactory,
    site: str,
    http: aiohttp.ClientSession,
    launch_options: dict[str, Any],
    tmp_path: Path,
) -> None:
    from playwright.async_api import async_playwright

    with server() as base:
        api = Api(http, base)
        run = await api.failed_run(site)
        assert run["status"] == "fail" and [a["name"] for a in run["artifacts"]] == [
            "step-2.png",
            "trace.zip",
        ]
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options)
            try:
                context = await browser.new_context()
                watch = Watch()
                await watch.attach(context)
                page = await context.new_page()
                dialogs: list[str] = []
                page.on("dialog", lambda dialog: dialogs.append(dialog.message))
                await page.goto(f"{base}/report/runs/{run['id']}")

                assert await page.locator("#scenario-name").inner_text() == "checkout"
                assert await page.locator("#run-status").inner_text() == "fail"
                assert await page.locator("#failed-step").inner_text() == 'step 2 "Check the title"'
                assert "to_have_title" in await page.locator("#error-message").inner_text() or (
                    "Shop" in await page.locator("#error-message").inner_text()
                )
                rows = page.locator("#steps tbody tr")
                assert await rows.count() == 2
                assert "fail" in (await rows.nth(1).get_attribute("class") or "")
                shot = page.locator("#screenshot")
                await shot.wait_for()
                assert await loaded_image_width(shot) > 0

                lines = page.locator("#log li")
                every = await lines.count()
                assert every == 100, "the first page of the log"
                await page.locator("#log-q").fill("opened the")
                visible = page.locator("#log li:not([hidden])")
                assert await visible.count() == 1
                assert "opened the page" in await visible.first.inner_text()
                assert "1 of" in await page.locator("#log-count").inner_text()
                await page.locator("#log-q").fill("")
                assert await visible.count() == every
                await page.get_by_role("link", name="next →").click()
                assert "page 2 of 2" in await page.locator(".pager").inner_text()
                assert "checking the title" in await page.locator("#log").inner_text()
                # Enter asks the server for the matching lines of the whole log.
                await page.locator("#log-q").fill("filler line 11")
                await page.locator("#log-q").press("Enter")
                await page.wait_for_url("**q=filler+line+11*")
                found = await page.locator("#log li").all_inner_texts()
                assert [text.split(None, 1)[1] for text in found] == [
                    "filler line 11",
                    *(f"filler line {n}" for n in range(110, 120)),
                ]
                await page.screenshot(path=tmp_path / "run-page.png", full_page=True)

                # The index lists it; the status filter keeps only failed runs.
                await page.goto(f"{base}/report/?status=pass")
                assert await page.locator("#runs").count() == 0
                await page.goto(f"{base}/report/")
                await page.get_by_role("link", name="fail", exact=True).click()
                assert await page.locator("#runs tbody tr").count() == 1
                await page.screenshot(path=tmp_path / "index-page.png", full_page=True)
                await page.get_by_role("link", name="checkout").click()
                await page.wait_for_url(f"**/report/runs/{run['id']}")
                assert not dialogs
            finally:
                await browser.close()
    assert watch.urls and not watch.outside, watch.outside
    assert (tmp_path / "run-page.png").stat().st_size > 0


async def test_trace_viewer_url_opens_the_trace_and_lists_the_runs_actions(
    server: ServerFactory,
    site: str,
    http: aiohttp.ClientSession,
    launch_options: dict[str, Any],
    tmp_path: Path,
) -> None:
    from playwright.async_api import async_playwright

    with server() as base:
        run = await Api(http, base).failed_run(site)
        viewer = run["traceViewerUrl"]
        assert viewer.startswith("/trace/index.html?trace=")
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options)
            try:
                context = await browser.new_context()
                watch = Watch()
                await watch.attach(context)
                page = await context.new_page()
                await page.goto(base + viewer)
                actions = page.locator(".action-title")
                await actions.first.wait_for(timeout=30_000)
                titles = " | ".join(await actions.all_inner_texts())
                await page.screenshot(path=tmp_path / "trace-viewer.png")
            finally:
                await browser.close()
    assert "Navigate" in titles or "goto" in titles, titles
    assert "to_have_title" in titles.replace("toHaveTitle", "to_have_title") or "Expect" in titles, titles
    assert not watch.outside, watch.outside
    assert any(f"{API}/run/{run['id']}/artifacts/trace.zip" in url for url in watch.urls)
