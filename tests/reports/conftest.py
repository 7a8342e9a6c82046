"""Fixtures of the report tests: the real app on a loopback port running real runs, and Chromium.

The app runs in a thread with its scheduler (runs execute in Chromium, traced always, as
``SCENARIOKIT_TRACE=always``); the site the runs test is a page on 127.0.0.1. A run is made through
the REST API, as a user would, and waited for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from report_support import SITE_PAGE, ServerFactory, live_server

from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.runner.worker.browser import discover_browser
from scenariokit_server import Settings
from served_pages import serve_pages


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
        manager: AbstractContextManager[str] = live_server().serve(settings)
        return manager

    return start


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session."""
    async with aiohttp.ClientSession() as session:
        yield session
