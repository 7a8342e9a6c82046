"""Runs per minute: the same three-step scenarios through scenariokit and as a bare Playwright script.

The bare script is what a home-grown runner does: for each scenario launch a fresh Chromium, run the
three steps, close it. scenariokit runs the same scenarios from its store through its scheduler and
worker processes (a fresh browser per run too, launched ahead while the worker waits). Both are
measured in this one process run, against the same page served on 127.0.0.1 with the same browser,
and printed with their ratio. scenariokit is measured with one worker (same concurrency as the
script) and with one worker per core (its default), each with the bubblewrap sandbox (when it works
here) and without (``SCENARIOKIT_SANDBOX=off``); every run has a worker process of its own either way.

    python bench/runs.py [--scenarios 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from aiohttp import web
from playwright.async_api import async_playwright, expect

import scenariokit
from scenariokit.runner.browser import discover_browser
from scenariokit.runner.sandbox import SANDBOX_ENV, bubblewrap_works

PAGE = """<!doctype html><title>bench</title>
<input id="name"><button id="go" onclick="document.getElementById('out').textContent='Hello '+
document.getElementById('name').value">Go</button><p id="out"></p>"""

STEPS = [
    "await page.goto(helpers.getEnvUrl())",
    "await page.fill('#name', 'bench')\nawait page.click('#go')",
    "await expect(page.locator('#out')).to_have_text('Hello bench')",
]


async def serve_page() -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_get("/", lambda _: web.Response(text=PAGE, content_type="text/html"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/"


async def bare_playwright(url: str, count: int) -> float:
    """Seconds for ``count`` runs of the script, each in a freshly launched browser."""
    config = discover_browser()
    began = time.perf_counter()
    async with async_playwright() as playwright:
        for _ in range(count):
            browser = await playwright.chromium.launch(**config.launch_options())
            context = await browser.new_context()
            page = await context.new_page()
            await page.goto(url)
            await page.fill("#name", "bench")
            await page.click("#go")
            await expect(page.locator("#out")).to_have_text("Hello bench")
            await browser.close()
    return time.perf_counter() - began


async def through_scenariokit(url: str, count: int, workers: int, sandbox: str) -> float:
    """Seconds for ``count`` runs queued at once and executed by scenariokit with ``workers`` workers."""
    os.environ[SANDBOX_ENV] = sandbox  # read when the scheduler starts its pool
    with tempfile.TemporaryDirectory() as tmp:
        async with scenariokit.open_kit(f"sqlite:///{Path(tmp) / 'bench.db'}", workers=workers) as kit:
            env = await kit.environments.create({"name": "bench", "data": {"url": url}})
            scenarios = [
                await kit.scenarios.create(
                    {"name": f"bench {i}", "steps": [{"execCode": code} for code in STEPS]}
                )
                for i in range(count)
            ]
            await kit.start_runner()  # worker start-up is a one-off, like installing the script
            await asyncio.sleep(2)  # let every worker launch its first browser
            began = time.perf_counter()
            runs = [
                await kit.runs.create({"scenarioId": str(s.id), "environmentId": str(env.id)})
                for s in scenarios
            ]
            results = [await kit.runs.wait(run.id, 600) for run in runs]
            elapsed = time.perf_counter() - began
    failed = [r.run for r in results if r.run.status is not scenariokit.RunStatus.PASS]
    if failed:
        raise SystemExit(f"{len(failed)} scenariokit runs did not pass: {failed[0].error}")
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=50)
    args = parser.parse_args()
    runner, url = await serve_page()
    cores = os.cpu_count() or 1
    sandboxes = ["bubblewrap", "off"] if bubblewrap_works() else ["off"]
    seconds: dict[str, float] = {}
    rows = [("bare Playwright script (sequential)", "bare")]
    try:
        seconds["bare"] = await bare_playwright(url, args.scenarios)
        for workers in sorted({1, cores}):
            for sandbox in sandboxes:
                key = f"{workers}-{sandbox}"
                seconds[key] = await through_scenariokit(url, args.scenarios, workers, sandbox)
                rows.append((f"scenariokit, {workers} worker(s), sandbox {sandbox}", key))
    finally:
        await runner.cleanup()
    rates = {key: args.scenarios / took * 60 for key, took in seconds.items()}
    print(f"{args.scenarios} three-step scenarios, fresh browser per run, {cores} cores")
    for label, key in rows:
        print(f"  {label:45s} {rates[key]:7.1f} runs/min   {rates[key] / rates['bare']:.2f}x")
    if "1-bubblewrap" in rates:
        for workers in sorted({1, cores}):
            ratio = rates[f"{workers}-bubblewrap"] / rates[f"{workers}-off"]
            print(f"  sandbox on/off with {workers} worker(s): {ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
