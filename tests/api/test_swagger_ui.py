"""Swagger UI at ``/docs``, opened in a real headless Chromium, lists the API's operations."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from api_support import Client

pytestmark = pytest.mark.browser


def _chromium() -> dict[str, Any]:
    try:
        from scenariokit.runner.worker.browser import discover_browser
    except ImportError:
        path = shutil.which("chromium") or "/usr/bin/chromium"
        return {"executable_path": path, "args": ["--no-sandbox", "--disable-gpu"]}
    try:
        return dict(discover_browser().launch_options())
    except Exception as exc:  # BrowserUnavailable: say why the test cannot run here
        pytest.skip(f"no Chromium to open Swagger UI with: {exc}")


async def test_swagger_ui_lists_the_api_operations_with_their_descriptions(client: Client) -> None:
    playwright_api = pytest.importorskip("playwright.async_api")
    document = await (await client.get("/docs/openapi.json")).json()
    operations = sum(len(ops) for ops in document["paths"].values())
    url = str(client.make_url("/docs"))
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(**_chromium())
        try:
            page = await browser.new_page()
            failed: list[str] = []
            page.on("requestfailed", lambda request: failed.append(request.url))
            await page.goto(url)
            await page.wait_for_selector(".opblock", timeout=20_000)
            paths = await page.locator(".opblock .opblock-summary-path").all_inner_texts()
            title = await page.locator(".info .title").inner_text()
            servers = await page.locator(".servers select option").all_inner_texts()
            run = page.locator("#operations-runs-create_run")
            await run.locator(".opblock-summary").click()
            description = await run.locator(".opblock-description-wrapper").first.inner_text(timeout=20_000)
        finally:
            await browser.close()
    assert not failed, f"assets failed to load: {failed}"
    assert "scenariokit" in title
    assert len(paths) == operations
    assert [server.split()[0] for server in servers] == [str(client.make_url("")).rstrip("/")]
    assert document["paths"]["/api/v1/run"]["post"]["description"].split("`")[0] in description
    normalized = {path.replace("\u200b", "") for path in paths}
    assert {"/api/v1/scenarios", "/api/v1/run/{id}", "/health"} <= normalized
