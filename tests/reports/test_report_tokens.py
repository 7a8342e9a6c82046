"""With API tokens set: the report pages ask for a token and show nothing without one; the trace
viewer and the screenshot open through short-lived signed links, and an artifact without a token or
a valid signature is refused (docs/reports.md, "Tokens")."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from report_support import API, TOKEN, Api, ServerFactory, Watch

from browser_checks import loaded_image_width
from scenariokit_server.trace import ArtifactLinks

pytestmark = pytest.mark.browser


async def _status(http: aiohttp.ClientSession, url: str, **headers: str) -> int:
    async with http.get(url, headers=headers, allow_redirects=False) as response:
        return response.status


async def test_without_a_token_the_pages_hold_nothing_and_artifacts_need_a_token_or_a_signature(
    server: ServerFactory, site: str, http: aiohttp.ClientSession, launch_options: dict[str, Any]
) -> None:
    with server(api_tokens=(TOKEN,)) as base:
        run = await Api(http, base, TOKEN).failed_run(site, name="secret-checkout")
        for path in (f"/report/runs/{run['id']}", "/report/", "/report/?status=fail", "/report/runs/x"):
            async with http.get(base + path) as response:
                text = await response.text()
                assert response.status == 401 and response.content_type == "text/html", path
                assert "token-form" in text and "secret-checkout" not in text and run["id"] not in text
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with http.get(f"{base}/report/runs/{run['id']}", headers=bearer) as response:
            assert response.status == 200 and "secret-checkout" in await response.text()
        async with http.get(
            f"{base}/report/runs/{run['id']}", headers={"Authorization": "Bearer wrong"}
        ) as r:
            assert r.status == 401 and "secret-checkout" not in await r.text()

        # The plain artifact URL REST lists needs the token, like the rest of the API.
        plain = base + run["artifacts"][1]["url"]
        assert await _status(http, plain) == 401
        assert await _status(http, plain, **bearer) == 200

        # traceViewerUrl carries a signed link to the trace: it opens that file, and only that one.
        trace_link = parse_qs(urlsplit(run["traceViewerUrl"]).query)["trace"][0]
        assert trace_link.startswith(f"{API}/run/{run['id']}/artifacts/trace.zip?expires=")
        assert await _status(http, base + trace_link) == 200
        other_file = trace_link.replace("trace.zip", "step-2.png")
        assert await _status(http, base + other_file) == 401
        sig = parse_qs(urlsplit(trace_link).query)["sig"][0]
        assert await _status(http, base + trace_link.replace(sig, sig[:-2] + "AA")) == 401
        assert await _status(http, base + trace_link + "&more=1") == 401
        assert await _status(http, base + trace_link.split("&sig=")[0]) == 401  # no signature
        expired = ArtifactLinks.for_tokens((TOKEN,)).url(run_id(run), "trace.zip", now=time.time() - 3600)
        assert await _status(http, base + expired) == 401
        foreign = ArtifactLinks.for_tokens(("another-token-0123456789",)).url(run_id(run), "trace.zip")
        assert await _status(http, base + foreign) == 401
        other_run = trace_link.replace(run["id"], "00000000-0000-4000-8000-000000000000")
        assert await _status(http, base + other_run) == 401
        # A signature opens nothing but GET of the artifact: not the run itself, not the API.
        assert await _status(http, f"{base}{API}/run/{run['id']}?" + trace_link.split("?")[1]) == 401


def run_id(run: dict[str, Any]) -> uuid.UUID:
    return uuid.UUID(run["id"])


async def test_the_page_works_after_entering_a_token_kept_for_the_tab(
    server: ServerFactory,
    site: str,
    http: aiohttp.ClientSession,
    launch_options: dict[str, Any],
    tmp_path: Path,
) -> None:
    from playwright.async_api import async_playwright

    with server(api_tokens=(TOKEN,)) as base:
        run = await Api(http, base, TOKEN).failed_run(site, name="secret-checkout")
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options)
            try:
                context = await browser.new_context()
                watch = Watch()
                await watch.attach(context)
                page = await context.new_page()
                await page.goto(f"{base}/report/runs/{run['id']}")
                await page.locator("#token-form").wait_for()
                assert "secret-checkout" not in await page.content()
                await page.screenshot(path=tmp_path / "token-form.png")

                await page.locator("#token").fill("not-the-token-at-all")
                await page.locator("#token-form button").click()
                await page.locator("#token-error").wait_for()
                assert "secret-checkout" not in await page.content()

                await page.locator("#token").fill(TOKEN)
                await page.locator("#token-form button").click()
                await page.locator("#scenario-name").wait_for()
                assert await page.locator("#scenario-name").inner_text() == "secret-checkout"
                assert await page.evaluate("sessionStorage.getItem('scenariokit.token')") == TOKEN
                assert await loaded_image_width(page.locator("#screenshot")) > 0
                await page.locator("#log-q").fill("opened the")
                assert await page.locator("#log li:not([hidden])").count() == 1

                # Another page of the tab asks for no token again.
                await page.get_by_role("link", name="all runs").click()
                await page.locator("#runs").wait_for()
                assert await page.locator("#runs tbody tr").count() == 1

                # The trace link of the page opens the viewer, which fetches the trace by its signature.
                trace_url = await page.evaluate("location.origin") + (
                    await _trace_href(context, base, run["id"], page)
                )
                viewer = await context.new_page()
                await viewer.goto(trace_url)
                await viewer.locator(".action-title").first.wait_for(timeout=30_000)
                titles = " | ".join(await viewer.locator(".action-title").all_inner_texts())
                assert "Navigate" in titles or "goto" in titles, titles

                # A fresh tab has no token: the form again, nothing shown.
                fresh = await browser.new_page()
                await fresh.goto(f"{base}/report/runs/{run['id']}")
                await fresh.locator("#token-form").wait_for()
                assert "secret-checkout" not in await fresh.content()
            finally:
                await browser.close()
    assert not watch.outside, watch.outside


async def _trace_href(context: Any, base: str, ident: str, page: Any) -> str:
    """The href of the run page's trace link (the page is the run's, reached through the index)."""
    await page.get_by_role("link", name="secret-checkout").click()
    link = page.locator("#trace-link")
    await link.wait_for()
    href = await link.get_attribute("href")
    assert href and href.startswith("/trace/index.html?trace=")
    return str(href)


async def test_the_narrowest_token_that_reads_runs_opens_the_pages_and_signed_links(
    server: ServerFactory, site: str, http: aiohttp.ClientSession, launch_options: dict[str, Any]
) -> None:
    reader = "report-reader-token-0123456789"
    with server(api_tokens=(f"ops:admin:{TOKEN}", f"dashboard:read:{reader}")) as base:
        run = await Api(http, base, TOKEN).failed_run(site, name="secret-checkout")
        as_reader = {"Authorization": f"Bearer {reader}"}
        async with http.get(f"{base}/report/runs/{run['id']}", headers=as_reader) as response:
            assert response.status == 200 and "secret-checkout" in await response.text()
        async with http.get(f"{base}/report/", headers=as_reader) as response:
            assert response.status == 200
        seen = await Api(http, base, reader).call("GET", f"{API}/run/{run['id']}")
        trace_link = parse_qs(urlsplit(seen["traceViewerUrl"]).query)["trace"][0]
        assert await _status(http, base + trace_link) == 200  # the signed link, with no token at all
        assert await _status(http, base + seen["artifacts"][1]["url"], **as_reader) == 200
        # and nothing beyond reading
        refused = await Api(http, base, reader).call("POST", f"{API}/run/{run['id']}/cancel", expect=403)
        assert "scope 'run'" in refused["detail"]
