"""Helpers of the report tests: a REST client of the live app that makes failed runs, a request watch."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
API = "/api/v1"
TOKEN = "report-test-token-0123456789"
SITE_PAGE = "<!doctype html><title>Staging</title><h1>Staging</h1>"

#: Step 1 passes and logs (more than a log page of 100 lines); step 2 fails on the title: a failed run
#: with a screenshot and a trace.
FAILING_STEPS = [
    {
        "title": "Open the page",
        "execCode": 'await page.goto(helpers.getEnvUrl())\nlog("opened the page")\n'
        'for i in range(120):\n    log(f"filler line {i}")',
    },
    {
        "title": "Check the title",
        "execCode": 'log("checking the title")\nawait expect(page).to_have_title("Shop", timeout=500)',
    },
]


def live_server() -> ModuleType:
    """tests/api/live_server.py (its folder is on sys.path only when the API tests are collected)."""
    if "live_server" not in sys.modules:
        spec = importlib.util.spec_from_file_location("live_server", ROOT / "tests/api/live_server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["live_server"] = module
        spec.loader.exec_module(module)
    return sys.modules["live_server"]


ServerFactory = Callable[..., AbstractContextManager[str]]


class Api:
    """A small REST client of the live app (with a bearer token when given)."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str | None = None) -> None:
        self.session = session
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        async with self.session.request(
            method, self.base + path, json=body, headers=self.headers
        ) as response:
            data = await response.json()
            assert response.status == expect, data
            return data

    async def failed_run(self, site: str, name: str = "checkout", steps: Any = None) -> dict[str, Any]:
        """A finished run of a scenario ``name`` whose second step fails (screenshot and trace)."""
        env = await self.call("POST", f"{API}/environments", {"name": "staging", "data": {"url": site}}, 201)
        scenario = await self.call(
            "POST", f"{API}/scenarios", {"name": name, "steps": steps or FAILING_STEPS}, 201
        )
        run = await self.call(
            "POST", f"{API}/run", {"scenarioId": scenario["id"], "environmentId": env["id"]}, 201
        )
        for _ in range(600):
            detail = await self.call("GET", f"{API}/run/{run['id']}")
            if detail["status"] != "in_progress":
                return dict(detail)
            await asyncio.sleep(0.1)
        raise AssertionError(f"run {run['id']} did not finish")


class Watch:
    """Every request a browser context makes (service workers' too); any not to 127.0.0.1 is aborted."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.outside: list[str] = []

    async def attach(self, context: Any) -> None:
        """Route every request of ``context`` through the watch."""

        async def route(route: Any) -> None:
            url = route.request.url
            self.urls.append(url)
            host = urlsplit(url).hostname
            if url.startswith(("data:", "blob:")) or host == "127.0.0.1":
                await route.continue_()
            else:
                self.outside.append(url)
                await route.abort()

        await context.route("**/*", route)
