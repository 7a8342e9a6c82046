"""Fixtures for end-to-end runs: a small site on 127.0.0.1 and a Kit with real worker processes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

import scenariokit

SITE_PAGES = {
    "/": """<!doctype html><title>Home</title><h1>Hello</h1>
<p id="status">checking</p>
<script>document.getElementById("status").textContent =
  localStorage.getItem("token") ? "logged in" : "logged out";</script>""",
    "/login": """<!doctype html><title>Log in</title>
<input id="user"><input id="password" type="password"><button id="go">Log in</button><p id="status"></p>
<script>document.getElementById("go").onclick = () => {
  localStorage.setItem("token", "tok-" + document.getElementById("user").value + "-0123456789");
  document.cookie = "sessionid=abc; path=/";
  document.getElementById("status").textContent = "logged in";
};</script>""",
}


class Site:
    """Pages served on 127.0.0.1, counting the requests for each path."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        body = SITE_PAGES.get(request.path)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(text=body, content_type="text/html")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site() -> AsyncIterator[Site]:
    """The test site, on a free port of 127.0.0.1."""
    served = Site()
    app = web.Application()
    app.router.add_get("/{tail:.*}", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    served.url = f"http://127.0.0.1:{port}/"
    yield served
    await runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kit(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[scenariokit.Kit]:
    """A Kit on a SQLite file with two worker processes, shared by the tests of a module."""
    folder = tmp_path_factory.mktemp("kit")
    async with scenariokit.open_kit(
        f"sqlite:///{folder / 'kit.db'}",
        workers=2,
        artifacts_dir=folder / "artifacts",
        session_keepalive_seconds=30,
    ) as opened:
        yield opened
