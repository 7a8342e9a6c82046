"""Fixtures of the report tests: the real app on a loopback port running real runs, and Chromium.

The app runs in a thread with its scheduler (runs execute in Chromium, traced always, as
``SCENARIOKIT_TRACE=always``); the site the runs test is a page on 127.0.0.1. A run is made through
the REST API, as a user would, and waited for.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest

from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.runner.browser import discover_browser
from scenariokit_server import Settings
from served_pages import serve_pages

ROOT = Path(__file__).resolve().parents[2]
API = "/api/v1"
TOKEN = "report-test-token-0123456789"
SITE_PAGE = "<!doctype html><title>Staging</title><h1>Staging</h1>"

#: Step 1 passes and logs; step 2 fails on the title: a failed run with a screenshot and a trace.
FAILING_STEPS = [
    {"title": "Open the page", "execCode": 'await page.goto(helpers.getEnvUrl())\nlog("opened the page")'},
    {
        "title": "Check the title",
        "execCode": 'log("checking the title")\nawait expect(page).to_have_title("Shop", timeout=500)',
    },
]


def _live_server() -> ModuleType:
    """tests/api/live_server.py (its folder is on sys.path only when the API tests are collected)."""
    if "live_server" not in sys.modules:
        spec = importlib.util.spec_from_file_location("live_server", ROOT / "tests/api/live_server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["live_server"] = module
        spec.loader.exec_module(module)
    return sys.modules["live_server"]


@pytest.fixture
def launch_options() -> dict[str, Any]:
    """How to launch the Chromium the tests look with (skips when there is none)."""
    try:
        return dict(discover_browser().launch_options())
    except BrowserUnavailable as exc:
        pytest.skip(f"no Chromium: {exc}")


@pytest.fixture
def site() -> Iterator[str]:
    """The site the runs test, on 127.0.0.1."""
    with serve_pages({"/": SITE_PAGE}) as base:
        yield base


ServerFactory = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def server(tmp_path: Path) -> ServerFactory:
    """Start the real app (``server(api_tokens=(TOKEN,))`` with tokens); a context manager of its URL.

    Its scheduler runs runs in Chromium: a test that makes one asks for ``launch_options`` too, which
    skips it where there is no Chromium.
    """

    def start(**overrides: Any) -> AbstractContextManager[str]:
        settings = Settings(
            **{
                "database_url": f"sqlite:///{tmp_path / 'scenariokit.db'}",
                "secret_key": "report-test-secret-key",
                "artifacts_dir": tmp_path / "artifacts",
                "trace": "always",
                "workers": 1,
                **overrides,
            }
        )
        manager: AbstractContextManager[str] = _live_server().serve(settings)
        return manager

    return start


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


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session."""
    async with aiohttp.ClientSession() as session:
        yield session
