"""Report pages refuse bad input with a page saying why, escape whatever a user stored, and the trace
viewer's files are served with the headers its service worker needs."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp
import pytest
from report_support import API, Api, ServerFactory

BAD_REQUESTS = [
    ("/report/runs/not-a-uuid", 400, "must be a UUID"),
    ("/report/runs/3025cb33-00f1-4d42-b66d-f63ab993a1ed", 404, "not found"),  # fixed: xdist collects alike
    ("/report/?status=bogus", 400, "status"),
    ("/report/?page=0", 400, "page"),
    ("/report/?limit=201", 400, "limit"),
    ("/report/?orderBy=secret", 400, "orderBy"),
    ("/report/?unknown=1", 400, "unknown"),
    ("/report/?status=%00", 400, "status"),
]


async def test_bad_input_answers_a_page_saying_why(
    server: ServerFactory, http: aiohttp.ClientSession
) -> None:
    with server(run_scheduler=False) as base:
        for path, status, words in BAD_REQUESTS:
            async with http.get(base + path) as response:
                text = await response.text()
                assert response.status == status, (path, text)
                assert response.content_type == "text/html", path
                assert words.lower() in text.lower(), (path, text)
                assert 'id="message"' in text
        run_path = f"/report/runs/{uuid.uuid4()}"
        for query, words in (("?page=abc", "page"), ("?limit=0", "limit"), ("?x=1", "unknown")):
            async with http.get(base + run_path + query) as response:
                assert response.status == 400, query
                assert words in (await response.text()).lower(), query
        async with http.get(base + "/report", allow_redirects=False) as response:
            assert response.status == 308 and response.headers["Location"] == "/report/"
        async with http.get(base + "/report/") as response:
            assert response.status == 200
            policy = response.headers["Content-Security-Policy"]
            assert "script-src 'self'" in policy and "default-src 'none'" in policy
            assert response.headers["Cache-Control"] == "no-store"
            assert response.headers["Referrer-Policy"] == "no-referrer"
        async with http.get(base + "/report/", headers={"Host": "evil.example"}) as response:
            assert response.status == 421, "DNS rebinding cannot read the reports"
        async with http.get(base + "/report/assets/report.js") as response:
            assert response.status == 200 and response.content_type == "text/javascript"
        async with http.get(base + "/report/assets/../app.py") as response:
            assert response.status == 404


async def test_the_trace_viewer_is_served_with_its_service_worker_headers(
    server: ServerFactory, http: aiohttp.ClientSession
) -> None:
    with server(run_scheduler=False) as base:
        async with http.get(base + "/trace", allow_redirects=False) as response:
            assert response.status == 308 and response.headers["Location"] == "/trace/"
        async with http.get(base + "/trace/") as response:
            assert response.status == 200 and response.content_type == "text/html"
            assert "Playwright Trace Viewer" in await response.text()
        async with http.get(base + "/trace/sw.bundle.js") as response:
            assert response.status == 200 and response.content_type == "text/javascript"
            assert response.headers["Service-Worker-Allowed"] == "/trace/"
            assert response.headers["X-Content-Type-Options"] == "nosniff"
        for path in ("/trace/..%2F..%2F..%2Fpyproject.toml", "/trace/../setup.py", "/trace/nothing.js"):
            async with http.get(base + path) as response:
                assert response.status == 404, path
        async with http.get(base + "/trace/", headers={"Host": "evil.example"}) as response:
            assert response.status == 421


@pytest.mark.browser
async def test_a_scenario_named_like_a_script_is_text_on_every_page(
    server: ServerFactory, site: str, http: aiohttp.ClientSession, launch_options: dict[str, Any]
) -> None:
    from playwright.async_api import async_playwright

    name = "<script>alert(1)</script>"
    code = 'log("<b onmouseover=alert(3)>x</b>")\nassert False, "<i>no</i>"'
    steps = [{"title": "<img src=x onerror=alert(2)>", "execCode": code}]
    with server() as base:
        run = await Api(http, base).failed_run(site, name=name, steps=steps)
        async with http.get(f"{base}/report/runs/{run['id']}") as response:
            html = await response.text()
        assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<img src=x" not in html and "<b onmouseover" not in html
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options)
            try:
                page = await browser.new_page()
                dialogs: list[str] = []
                page.on("dialog", lambda dialog: dialogs.append(dialog.message))
                await page.goto(f"{base}/report/runs/{run['id']}")
                assert await page.locator("#scenario-name").inner_text() == name
                assert "<img src=x onerror=alert(2)>" in await page.locator("#steps").inner_text()
                assert "<b onmouseover=alert(3)>x</b>" in await page.locator("#log").inner_text()
                assert await page.locator("main script, main img:not(#screenshot), main b").count() == 0
                await page.goto(f"{base}/report/")
                assert await page.get_by_role("link", name=name).count() == 1
            finally:
                await browser.close()
        assert dialogs == []


async def test_a_run_in_progress_is_shown_and_read_again_until_it_ends(
    server: ServerFactory, http: aiohttp.ClientSession
) -> None:
    with server(run_scheduler=False) as base:  # nothing executes the run: it stays queued
        api = Api(http, base)
        env = await api.call("POST", f"{API}/environments", {"name": "nowhere"}, 201)
        scenario = await api.call("POST", f"{API}/scenarios", {"name": "queued"}, 201)
        run = await api.call(
            "POST", f"{API}/run", {"scenarioId": scenario["id"], "environmentId": env["id"]}, 201
        )
        async with http.get(f"{base}/report/runs/{run['id']}") as response:
            page = await response.text()
        assert response.status == 200 and 'data-refresh="3"' in page and ">in_progress<" in page
        assert run["traceViewerUrl"] is None and run["artifacts"] == []
        async with http.get(f"{base}/report/?status=in_progress") as response:
            assert f"/report/runs/{run['id']}" in await response.text()
